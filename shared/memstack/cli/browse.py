"""Looking into memory from a shell: ``memstack threads``, ``messages``, ``context``, ``recall``,
``working-memory get|set`` and ``observations``, on a local backend or through ``--url`` (the client
answers the same methods as ``Memory``), as text or ``--json``."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from memstack.cli.common import open_target, print_json, target_arguments
from memstack.errors import InvalidInput

TEXT_CHARS = 160
"""Longest message text shown per line in text output (``--json`` shows everything)."""


def add_parsers(sub: Any) -> None:
    """Register the browsing commands."""
    threads = sub.add_parser("threads", help="list a resource's threads, newest first")
    threads.add_argument("--resource", required=True)
    threads.add_argument("--limit", type=int, default=20, help="threads per page (default 20)")
    threads.add_argument("--cursor", help="the next_cursor of the previous page")
    target_arguments(threads)
    threads.set_defaults(run=run_threads)

    messages = sub.add_parser("messages", help="list a thread's messages by seq, with their parts")
    _thread(messages)
    messages.add_argument("--last", type=int, help="the newest N messages (default: the first page)")
    messages.add_argument("--limit", type=int, default=40, help="messages per page (default 40)")
    messages.add_argument("--cursor", help="the next_cursor of the previous page")
    target_arguments(messages)
    messages.set_defaults(run=run_messages)

    context = sub.add_parser("context", help="what the model sees for a turn (nothing is saved)")
    _thread(context)
    context.add_argument("--message", help="the new user message of the turn")
    context.add_argument(
        "--format",
        choices=["openai", "bedrock", "anthropic"],
        default="openai",
        help="--json: the request shape",
    )
    target_arguments(context)
    context.set_defaults(run=run_context)

    recall = sub.add_parser("recall", help="semantic recall alone: hits with each retriever's rank")
    _thread(recall)
    recall.add_argument("query")
    recall.add_argument("--top-k", type=int, help="hits (default: the memory's semantic_recall.top_k)")
    recall.add_argument("--mode", choices=["vector", "keyword", "hybrid"], help="default: the memory's")
    recall.add_argument("--scope", choices=["thread", "resource"], help="default: the memory's")
    target_arguments(recall)
    recall.set_defaults(run=run_recall)

    wm = sub.add_parser("working-memory", help="get or set working memory (resource or thread scope)")
    action = wm.add_subparsers(dest="action", required=True)
    get = action.add_parser("get", help="print the working-memory document")
    _wm(get)
    get.set_defaults(run=run_wm_get)
    put = action.add_parser("set", help="replace the document (markdown) with --text, --file or stdin")
    _wm(put)
    source = put.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="the new document")
    source.add_argument("--file", help="a file holding the new document; '-' reads stdin")
    put.set_defaults(run=run_wm_set)

    observations = sub.add_parser("observations", help="a thread's observation record (observational memory)")
    _thread(observations)
    target_arguments(observations)
    observations.set_defaults(run=run_observations)


def _thread(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resource", required=True)
    parser.add_argument("--thread", required=True)


def _wm(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resource", required=True)
    parser.add_argument("--thread", help="the thread (required in thread scope and with --url)")
    parser.add_argument(
        "--scope", choices=["resource", "thread"], default="resource", help="default resource"
    )
    target_arguments(parser)


def run_threads(args: argparse.Namespace) -> int:
    """``memstack threads``."""
    with open_target(args) as target:
        page = target.list_threads(resource_id=args.resource, limit=args.limit, cursor=args.cursor)
    if args.json:
        print_json(
            {"threads": [t.model_dump(mode="json") for t in page.threads], "next_cursor": page.next_cursor}
        )
        return 0
    print(f"{'thread':<24} {'messages':>8}  {'updated':<20} title")
    for t in page.threads:
        print(f"{t.id:<24} {t.last_seq:>8}  {t.updated_at:%Y-%m-%d %H:%M:%S}  {t.title}")
    _next(page.next_cursor)
    return 0


def run_messages(args: argparse.Namespace) -> int:
    """``memstack messages``."""
    with open_target(args) as target:
        page = target.list_messages(
            resource_id=args.resource,
            thread_id=args.thread,
            last=args.last,
            limit=args.limit,
            cursor=args.cursor,
        )
    if args.json:
        print_json(
            {"messages": [m.model_dump(mode="json") for m in page.messages], "next_cursor": page.next_cursor}
        )
        return 0
    for m in page.messages:
        author = f" ({m.author.label})" if m.author else ""
        print(f"{m.seq:>5} {m.role:<9}{author} {_parts(m)}")
    _next(page.next_cursor)
    return 0


def run_context(args: argparse.Namespace) -> int:
    """``memstack context``."""
    with open_target(args) as target:
        turn = {"resource_id": args.resource, "thread_id": args.thread, "message": args.message}
        # the API counts tokens only when asked; a local Memory counts on first read
        ctx = target.context(**turn, count_tokens=True) if args.url else target.context(**turn)
        request = {"openai": ctx.to_openai, "bedrock": ctx.to_bedrock, "anthropic": ctx.to_anthropic}[
            args.format
        ]()
        tokens = ctx.token_count
    if args.json:
        print_json({"request": request, "token_count": tokens})
        return 0
    for m in ctx.to_openai()["messages"]:
        print(f"[{m['role']}] {_short(_content(m))}")
    print(f"-- {len(ctx.to_openai()['messages'])} messages, {tokens} tokens, {len(ctx.tools)} tools")
    return 0


def run_recall(args: argparse.Namespace) -> int:
    """``memstack recall``."""
    options: dict[str, Any] = {
        k: v for k, v in (("top_k", args.top_k), ("mode", args.mode), ("scope", args.scope)) if v is not None
    }
    with open_target(args) as target:
        result = target.recall(
            resource_id=args.resource,
            thread_id=args.thread,
            query=args.query,
            options={"semantic_recall": options} if options else None,
        )
    texts = {m.id: m for m in result.messages}
    if args.json:
        print_json(
            {
                "hits": [asdict(h) for h in result.hits],
                "messages": [m.model_dump(mode="json") for m in result.messages],
            }
        )
        return 0
    print(f"{'score':>7} {'vector':>6} {'keyword':>7}  {'thread':<16} text")
    for h in result.hits:
        ranks = [str(r) if r is not None else "-" for r in (h.vector_rank, h.keyword_rank)]
        text = _parts(texts[h.message_id]) if h.message_id in texts else h.message_id
        print(f"{h.score:>7.4f} {ranks[0]:>6} {ranks[1]:>7}  {h.thread_id:<16} {text}")
    return 0


def run_wm_get(args: argparse.Namespace) -> int:
    """``memstack working-memory get``."""
    thread = _wm_thread(args)
    with open_target(args) as target:
        document = target.get_working_memory(
            resource_id=args.resource, thread_id=thread, options=_wm_options(args)
        )
    if args.json:
        print_json({"working_memory": document})
    elif document is not None:
        print(document)
    else:
        print("(no working memory yet)", file=sys.stderr)
    return 0


def run_wm_set(args: argparse.Namespace) -> int:
    """``memstack working-memory set``."""
    thread = _wm_thread(args)
    document = args.text if args.text is not None else _read_document(args.file)
    with open_target(args) as target:
        target.update_working_memory(
            resource_id=args.resource, thread_id=thread, working_memory=document, options=_wm_options(args)
        )
    if args.json:
        print_json({"updated": True, "scope": args.scope})
    else:
        owner = thread if args.scope == "thread" else args.resource
        print(f"working memory of {args.scope} {owner!r} updated")
    return 0


def _read_document(name: str) -> str:
    """The UTF-8 text of file ``name`` (``-``: standard input), read as bytes and decoded strictly, so a file
    and a pipe give the same answer (newlines and a byte-order mark as text mode reads them). Raises ``InvalidInput`` (field ``file``): unreadable, or not UTF-8."""
    shown = "standard input" if name == "-" else name
    try:
        if name == "-":
            raw = sys.stdin.buffer.read()
        else:
            with open(name, "rb") as f:
                raw = f.read()
    except OSError as exc:
        raise InvalidInput(f"cannot read --file {shown}: {exc.strerror or exc}", field="file") from None
    try:
        text = raw.decode("utf-8-sig")  # an editor's byte-order mark is not part of the document
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"--file {shown} is not UTF-8 text (an invalid byte at offset {exc.start})", field="file"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # newlines as text mode reads them


def run_observations(args: argparse.Namespace) -> int:
    """``memstack observations``: the record as the API shows it (``RemoteObservations``)."""
    with open_target(args) as target:
        if args.url:
            record = target.get_observations(resource_id=args.resource, thread_id=args.thread)
        else:
            record = _local_observations(target, args.resource, args.thread)
    if args.json:
        shown = None if record is None else {**asdict(record), "usage": record.usage.model_dump()}
        print_json({"record": shown})
        return 0
    if record is None:
        print("(nothing observed yet)", file=sys.stderr)
        return 0
    usage = record.usage
    print(
        f"scope={record.scope} generations={record.generation_count} observed_seq={record.observed_seq} "
        f"observation_tokens={record.observation_tokens} pending_tokens={record.pending_message_tokens} "
        f"buffered_chunks={record.buffered_chunks} failures={record.failure_count}"
    )
    if record.last_error:
        print(f"last error: {record.last_error}")
    print(
        f"cost: observer {usage.observer_calls} calls, reflector {usage.reflector_calls} calls, "
        f"{usage.embedding_calls} embedding calls"
    )
    print(record.active_observations or "(no active observations)")
    return 0


def _local_observations(memory: Any, resource_id: str, thread_id: str) -> Any:
    from memstack.api.routes.observations import summary
    from memstack.client import RemoteObservations

    memory.get_thread(resource_id=resource_id, thread_id=thread_id)  # NotFound, as the API answers
    found = memory.get_observation_record(resource_id=resource_id, thread_id=thread_id)
    return (
        None
        if found is None
        else RemoteObservations.from_json(summary(found, thread_id).model_dump(mode="json"))
    )


def _wm_thread(args: argparse.Namespace) -> str | None:
    """The thread a working-memory command names: required in thread scope (the document is the thread's),
    optional in resource scope, locally and through ``--url`` alike (the API's route without a thread)."""
    if args.thread is None and args.scope == "thread":
        raise InvalidInput("working-memory needs --thread in thread scope", field="thread")
    return str(args.thread) if args.thread is not None else None


def _wm_options(args: argparse.Namespace) -> dict[str, Any]:
    return {"working_memory": {"enabled": True, "scope": args.scope}}


def _parts(message: Any) -> str:
    shown = []
    for p in message.parts:
        if p.type in ("text", "reasoning"):
            shown.append(p.text if p.type == "text" else f"(reasoning) {p.text}")
        elif p.type == "tool_call":
            shown.append(f"-> {p.name}({p.args})")
        elif p.type == "tool_result":
            shown.append(f"<- {p.name or p.tool_call_id}: {p.result}")
        elif p.type == "image":
            shown.append(f"[image: {p.caption or p.url}]")
        else:
            shown.append(f"[file: {p.name or p.url}]")
    return _short(" ".join(shown))


def _content(m: dict[str, Any]) -> str:
    content = m.get("content")
    if isinstance(content, str):
        return content
    if m.get("tool_calls"):
        return " ".join(f"-> {c['function']['name']}({c['function']['arguments']})" for c in m["tool_calls"])
    return str(content)


def _short(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= TEXT_CHARS else one[: TEXT_CHARS - 1] + "…"


def _next(cursor: str | None) -> None:
    if cursor:
        print(f"-- more: --cursor {cursor}", file=sys.stderr)
