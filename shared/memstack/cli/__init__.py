"""The ``memstack`` command: ``demo``, ``serve``, ``mcp`` and ``erase`` here; the operator's toolkit in
modules per command group (``browse``: threads, messages, context, recall, working-memory,
observations; ``transfer``: export, import, reindex), sharing one convention (``common``)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstack.cli import browse, transfer
from memstack.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    Terminated,
    backend_arguments,
    check_target,
    embedder_argument,
    existing_database,
    json_argument,
    open_client,
    port,
    print_json,
    remote_arguments,
    say,
    stoppable,
)
from memstack.cli.progress import ProgressBar
from memstack.errors import InvalidInput, MemstackError
from memstack.studio import command as studio_command

if TYPE_CHECKING:
    from memstack.memory import Memory
    from memstack.settings import Settings


def _ints(value: str) -> list[int]:
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated numbers, e.g. 0,3") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memstack", description="Agent memory: threads, recall, context.")
    parser.add_argument("--version", action="version", version=f"memstack {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="replay LoCoMo conversations through the API and measure evidence recall",
        description="Replay LoCoMo conversations turn by turn (context, then save), then ask the questions "
        "and report how much evidence each assembled context holds.",
    )
    demo.add_argument(
        "--data",
        help="LoCoMo JSON file, .json or .json.gz (default: the repository's data/locomo/locomo-dev-2.json.gz, "
        "two conversations)",
    )
    demo.add_argument("--conversations", type=_ints, help="indexes to replay, e.g. 0,3 (default: all)")
    demo.add_argument(
        "--backend",
        choices=["sqlite", "aws"],
        help="sqlite (embedded, default) or aws: DynamoDB + OpenSearch at the endpoints in the MEMSTACK_* "
        "settings (default: MEMSTACK_BACKEND, else sqlite)",
    )
    demo.add_argument(
        "--embedder",
        choices=["wordllama", "hash", "local", "openai"],
        help="default: MEMSTACK_EMBEDDER, else openai when OPENAI_API_KEY is set, else wordllama; openai needs "
        "OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible endpoint)",
    )
    demo.add_argument("--mode", choices=["vector", "keyword", "hybrid"], default="hybrid")
    demo.add_argument("--top-k", type=int, default=4)
    demo.add_argument("--message-range", type=int, default=1)
    demo.add_argument(
        "--db", help="SQLite file of the sqlite backend (default: a fresh temporary file, removed afterwards)"
    )
    demo.add_argument(
        "--observational",
        action="store_true",
        help="also run observational memory (Observer and Reflector) with the chat model MEMSTACK_CHAT_MODEL "
        "at OPENAI_BASE_URL with OPENAI_API_KEY (a base URL alone: a compatible server that needs no key); "
        "skipped, saying so, when neither is configured",
    )
    demo.add_argument(
        "--message-tokens",
        type=int,
        default=None,
        help="--observational: the Observer's threshold (default 2000; each conversation is replayed as one "
        "thread of 15k-25k tokens, so it crosses it many times)",
    )
    demo.add_argument("--quiet", action="store_true", help="no progress output")
    _serve_parser(sub)
    _erase_parser(sub)
    _mcp_parser(sub)
    browse.add_parsers(sub)
    transfer.add_parsers(sub)
    studio_command.add_parser(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memstack")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _mcp_parser(sub: Any) -> None:
    mcp = sub.add_parser(
        "mcp",
        help="serve Memstack as Model Context Protocol tools (stdio or streamable HTTP) for one resource",
        description="Serve remember, recall, get/update_working_memory, list_threads and get_context as MCP "
        "tools, all acting for the one resource given by --resource-id (the model never chooses it). Needs "
        "the mcp extra: pip install 'memstack[mcp]'.",
    )
    mcp.add_argument(
        "--resource-id", required=True, help="the resource (user, org, project) every tool acts for"
    )
    mcp.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="http: address to listen on (default 127.0.0.1)")
    mcp.add_argument(
        "--port", type=port, default=8766, help="http: port (default 8766); the endpoint is /mcp"
    )
    mcp.add_argument(
        "--url",
        help="use a Memstack HTTP API (memstack serve, or a deployed stage URL with --sigv4) instead of a "
        "local memory",
    )
    mcp.add_argument("--sigv4", action="store_true", help="--url: sign requests with SigV4 (IAM auth)")
    backend_arguments(mcp)
    embedder_argument(mcp)
    mcp.add_argument("--thread-id", default="mcp", help="the thread tools use when the model names none")


def _serve_parser(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve the HTTP API (the routes of API Gateway, docs/api.md) on localhost",
        description="Serve the /v1 routes of the HTTP API on localhost through the same resolver as the "
        "Lambda functions. Indexing runs inline (no stream locally). Ctrl-C or SIGTERM stops it.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=port, default=8765, help="port (default 8765; 0: any free port)")
    backend_arguments(serve)
    embedder_argument(serve)
    serve.add_argument(
        "--auth",
        choices=["iam", "jwt"],
        help="iam: trust resource_id (default: MEMSTACK_AUTH, else iam); jwt: LOCAL TESTING ONLY, the token "
        "claims are read unverified from the X-Memstack-Claims header (a JSON object)",
    )
    serve.add_argument("--verbose", action="store_true", help="also print the API's JSON log lines")
    serve.add_argument(
        "--options",
        metavar="JSON",
        help="memory options as a JSON object of MemoryOptions names, e.g. '{\"last_messages\": 20}' "
        "(default: MEMSTACK_OPTIONS; given, it replaces it)",
    )
    serve.add_argument(
        "--observational",
        action="store_true",
        help="turn observational memory on (over --options / MEMSTACK_OPTIONS), with the chat model of "
        "MEMSTACK_CHAT_MODEL at OPENAI_BASE_URL with OPENAI_API_KEY (or MEMSTACK_CHAT_PROVIDER=bedrock)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        help="server processes accepting on the one socket (default: the CPU count up to 4 on Linux, else 1; "
        "docs/local.md 'Workers')",
    )


def _erase_parser(sub: Any) -> None:
    erase = sub.add_parser(
        "erase",
        help="erase everything a resource owns (threads, messages, working memory, observations, index)",
        description="Erase everything a resource owns, as DELETE /v1/resources/{resource_id} does: threads, "
        "messages, working memory, observation records and index documents. Idempotent; run it again to "
        "finish an erasure that failed midway. Asks for the resource id as confirmation unless --yes.",
    )
    erase.add_argument("--resource", required=True, help="the resource id to erase")
    erase.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    backend_arguments(erase)
    embedder_argument(erase)
    remote_arguments(erase, "erase")
    json_argument(erase)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code: 2 for bad input or settings (``InvalidInput`` and the
    other 4xx errors), 1 when a backend failed (``Unavailable``) or the system refused a file or socket
    (``OSError``: said in one line, with the path)."""
    args = _parser().parse_args(argv)
    try:
        if hasattr(args, "run"):
            code: int = args.run(args)
            return code
        if args.command == "demo":
            with stoppable():  # the temporary database goes with the block
                return _demo(args)
        if args.command == "serve":
            return _serve(args)
        if args.command == "erase":
            return _erase(args)
        if args.command == "mcp":
            return _mcp(args)
    except MemstackError as exc:
        print(f"memstack: {exc}", file=sys.stderr)
        return 1 if exc.status >= 500 else 2
    except KeyboardInterrupt:
        say(f"memstack {args.command}: stopped (Ctrl-C)")
        return EXIT_INTERRUPTED
    except Terminated:
        say(f"memstack {args.command}: stopped (SIGTERM)")
        return EXIT_TERMINATED
    except BrokenPipeError:
        # the reader of stdout went away (`memstack export | head`): what was asked for was delivered, and
        # the interpreter's final flush must not fail again on the closed pipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a file or socket the command was given: said in one line, not a traceback
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"memstack {args.command}: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    return 1


def _demo(args: argparse.Namespace) -> int:
    from memstack import demo, locomo
    from memstack.settings import load_settings

    data = args.data or demo.default_data_path()
    conversations = locomo.load(data, args.conversations)
    settings = load_settings(**({"backend": args.backend} if args.backend else {}))
    args.embedder = args.embedder or settings.embedder_name
    if settings.backend == "aws":
        if args.db:
            raise InvalidInput("--db applies to the sqlite backend only", field="db")
        return _run_demo(args, conversations, data, settings)
    if args.db:
        return _run_demo(args, conversations, data, args.db)
    with tempfile.TemporaryDirectory(prefix="memstack-demo-") as scratch:
        return _run_demo(args, conversations, data, str(Path(scratch) / "memory.db"))


def _serve(args: argparse.Namespace) -> int:
    from memstack.serve import ServeConfig, build_memory, serve
    from memstack.serve_workers import default_workers, serve_workers
    from memstack.settings import load_settings

    settings = load_settings(**({"backend": args.backend} if args.backend else {}))
    embedder = args.embedder or settings.embedder_name
    auth = args.auth or settings.auth
    options = serve_options(args.options, observational=args.observational, configured=settings.options)
    db = args.db or (settings.db_path if settings.backend == "sqlite" else None)
    in_memory = db is not None and str(db) in (":memory:", "")
    # an in-memory database lives in one process: by default it gets one worker; asked for more, it is refused
    workers = args.workers if args.workers is not None else (1 if in_memory else default_workers())
    if workers < 1:
        raise InvalidInput(f"--workers must be at least 1, not {workers}", field="workers")
    if workers > 1 and in_memory:
        raise InvalidInput(
            "--workers above 1 needs a database file: each worker would get its own in-memory one",
            field="workers",
        )

    def build() -> Memory:
        return build_memory(settings.backend, db=args.db, embedder=embedder, options=options)

    # built here once either way: bad settings and an unreachable backend fail before any fork, and the
    # SQLite schema exists before the workers open the file
    memory = build()
    if workers > 1:
        memory.close()
    where = (
        f"db={args.db or settings.db_path}"
        if settings.backend == "sqlite"
        else f"table={settings.table} opensearch={settings.opensearch_endpoint}"
    )
    observing = "on" if memory.options.observational_memory.enabled else "off"
    banner = (
        f" (backend={settings.backend} {where} embedder={embedder} auth={auth} indexing=inline "
        f"observational={observing}; reference at /docs)"
    )
    if auth == "jwt":
        banner += " -- jwt claims come UNVERIFIED from the X-Memstack-Claims header: local testing only"
    try:
        config = ServeConfig(host=args.host, port=args.port, auth=auth, verbose=args.verbose)
        if workers == 1:
            return serve(memory, config, banner=banner)
        return serve_workers(build, config, workers=workers, banner=banner)
    except OSError as exc:
        print(f"memstack: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1


def serve_options(
    given: str | None, *, observational: bool, configured: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The memory options of ``memstack serve``: ``--options`` (a JSON object) instead of ``configured``
    (``MEMSTACK_OPTIONS``), then observational memory turned on by ``--observational`` (an options object
    for it is kept, enabled).

    Raises:
        InvalidInput: ``--options`` is not JSON, not an object, or not valid memory options (field
            ``options``; the message names the flag and, from ``MemoryOptions``, the option).
    """
    import json

    from memstack.config import MemoryOptions

    options = configured
    if given is not None:
        try:
            options = json.loads(given)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                f"--options must be a JSON object of memory options: {exc.msg} at character {exc.pos}",
                field="options",
            ) from None
        if not isinstance(options, dict):
            raise InvalidInput(
                f"--options must be a JSON object of memory options, not {type(options).__name__}",
                field="options",
            )
    if observational:
        options = dict(options or {})
        current = options.get("observational_memory")
        options["observational_memory"] = {**current, "enabled": True} if isinstance(current, dict) else True
    if options is not None:
        try:
            MemoryOptions.parse(options)
        except InvalidInput as exc:
            raise InvalidInput(f"--options: {exc.message}", field="options") from None
    return options


def _erase(args: argparse.Namespace) -> int:
    """Erase ``args.resource`` locally (``Memory.erase_resource``) or through the API (``--url``) and print
    the receipt's counts; 1 when the confirmation is not given."""
    from memstack.model import ERASE_COUNT_KEYS, check_id

    resource_id = check_id(args.resource, "resource")
    remote = args.url is not None
    check_target(args)
    where = args.url if remote else args.db or f"the {args.backend or 'MEMSTACK_BACKEND'} backend"
    if not remote:
        existing_database(args)
    if not args.yes:
        prompt = (
            f"Erase everything resource {resource_id!r} owns in {where}? This cannot be undone.\n"
            "Type the resource id to confirm: "
        )
        try:
            answer = input(prompt)
        except EOFError:
            answer = ""
        if answer.strip() != resource_id:
            print("memstack erase: not confirmed; nothing was erased", file=sys.stderr)
            return 1
    receipt = _erase_remote(args, resource_id) if remote else _erase_local(args, resource_id)
    if args.json:
        print_json(receipt.to_dict())
        return 0
    print(f"erased resource {receipt.resource_id!r}:")
    for key in ERASE_COUNT_KEYS:
        print(f"  {key:<20} {receipt.counts.get(key, 0)}")
    return 0


def _erase_local(args: argparse.Namespace, resource_id: str) -> Any:
    from memstack.serve import build_memory

    with build_memory(args.backend, db=args.db, embedder=args.embedder) as memory:
        return memory.erase_resource(resource_id=resource_id)


def _erase_remote(args: argparse.Namespace, resource_id: str) -> Any:
    with open_client(args) as client:
        return client.erase_resource(resource_id=resource_id)


def _mcp(args: argparse.Namespace) -> int:
    from memstack.model import check_id

    check_id(args.resource_id, "resource_id")
    try:
        from memstack.integrations.mcp import build_server
    except ImportError:
        raise InvalidInput(
            "memstack mcp needs the mcp extra: pip install 'memstack[mcp]'", field="mcp"
        ) from None
    if args.url:
        from memstack.client import MemstackClient

        memory: Any = MemstackClient(args.url, sigv4=args.sigv4)
    else:
        from memstack.serve import build_memory
        from memstack.settings import load_settings

        settings = load_settings(**({"backend": args.backend} if args.backend else {}))
        memory = build_memory(settings.backend, db=args.db, embedder=args.embedder or settings.embedder_name)
    server = build_server(memory, resource_id=args.resource_id, default_thread_id=args.thread_id)
    try:
        if args.transport == "http":
            print(
                f"memstack mcp: listening on http://{args.host}:{args.port}/mcp", file=sys.stderr, flush=True
            )
            server.run("streamable-http", host=args.host, port=args.port)
        else:
            server.run("stdio")
    finally:
        memory.close()
    return 0


def _run_demo(args: argparse.Namespace, conversations: list[Any], data: object, db: str | Settings) -> int:
    from memstack import demo
    from memstack.bootstrap import build, build_local, chat_model_configured, make_chat_model
    from memstack.config import MemoryOptions
    from memstack.settings import load_settings

    options: dict[str, Any] = {
        "semantic_recall": {"mode": args.mode, "top_k": args.top_k, "message_range": args.message_range}
    }
    MemoryOptions.parse(options)  # refused before anything is printed or built
    chat: demo.CountingChat | None = None
    if args.observational:
        settings = db if not isinstance(db, str) else load_settings()
        if not chat_model_configured(settings):
            print(
                "memstack demo: observational memory SKIPPED: no OPENAI_API_KEY or OPENAI_BASE_URL is "
                "configured, so there is no model for the Observer; running without that layer",
                file=sys.stderr,
            )
        else:
            message_tokens = args.message_tokens or demo.DEMO_MESSAGE_TOKENS
            options["observational_memory"] = demo.observational_options(message_tokens)
            chat = demo.CountingChat(make_chat_model(settings))
            print(
                f"memstack demo: observational memory on (model={settings.chat_model_name} scope=resource "
                f"message_tokens={message_tokens}); each conversation is one thread, so the Observer runs "
                "as it crosses the threshold",
                file=sys.stderr,
            )
    elif args.message_tokens is not None:
        raise InvalidInput("--message-tokens applies with --observational only", field="message_tokens")
    where = (
        f"db={db}"
        if isinstance(db, str)
        else f"backend=aws table={db.table} opensearch={db.opensearch_endpoint} ({db.opensearch_service})"
    )
    print(
        f"memstack demo: {len(conversations)} conversation(s) from {data}; embedder={args.embedder} "
        f"mode={args.mode} top_k={args.top_k} message_range={args.message_range} {where}",
        file=sys.stderr,
    )
    memory = (
        build_local(path=db, embedder=args.embedder, options=options, chat_model=chat, background="inline")
        if isinstance(db, str)
        else build(db, embedder=args.embedder, options=options, chat_model=chat, background="inline")
    )
    with memory, ProgressBar("demo", quiet=args.quiet) as bar:
        result = demo.run(memory, conversations, progress=bar, one_thread=chat is not None)
        summary = demo.observation_line(memory, conversations, chat) if chat is not None else None
    print(demo.table(result))
    if summary is not None:
        print(summary)
    print(result.result_line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
