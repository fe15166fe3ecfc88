"""Where a ``memstack serve`` context request's CPU goes, part by part, in microseconds per request.

``benchmarks/serve_load.py`` measures the whole server under load; this one takes the request path apart
and times each part on its own, in this process, as the best of ``--repeats`` rounds of ``--calls`` calls
(the minimum is the figure least disturbed by other work on a shared machine). Same workload: LoCoMo
conversation 0 (419 messages) in one thread of a fresh SQLite file, hash embedder, each request the
context of a new turn (one of the conversation's questions), hybrid recall.

Parts, in the order a request meets them:

* ``HTTP headers``: the headers of the benchmark client's request, read as ``BaseHTTPRequestHandler``
  reads them (``http.client.parse_headers``: the email package's parser);
* ``event``: the API Gateway proxy event built from it (``memstack.api.http.to_event``);
* ``resolver``: ``MemstackResolver.resolve`` of that event, whole (pre-checks, Powertools routing, request
  validation, the route, response validation and JSON) — and inside it, timed alone:
  ``Memory.context`` (history read, recall, layers, assembly), then the route's own work
  (``to_openai`` and the ``ContextOut`` model) and the response's serialisation (``ContextOut`` to JSON
  as the tree's resolver does it: the route plan's ``serialise`` — the model's serializer straight to
  JSON text — where the tree has ``memstack.api.validation``, else Powertools' response validation's
  ``TypeAdapter.dump_python`` + ``memstack.api.app.dump_json_text``);
* inside ``Memory.context``: the history read (``get_thread_with_history``) and semantic recall (embedding,
  keyword + vector search, fusion, neighbour windows);
* ``resolver on health``: ``GET /v1/health`` through the same resolver — no body, no ``Memory`` call: what
  any request pays for Powertools and the pre-checks alone;
* ``resolver, context made``: the same context requests through a resolver whose ``Memory.context`` hands
  back the turn's ``ModelContext`` made beforehand (``_MadeContexts``): everything a context request costs
  the API layer — pre-checks, routing, validation, the middleware, the route's work, serialisation —
  measured whole instead of as the difference of two larger, noisier figures;
* ``token count``: what ``count_tokens: true`` adds (tiktoken ``o200k_base``; off by default).

The resolver's own overhead is ``resolver, context made`` minus the route's work and the serialisation.
(The JSON also keeps ``resolver_difference``, the resolver whole minus ``Memory.context``, the route's work
and the serialisation, as this benchmark reported the overhead before: it carries the noise of two ~1.5 ms
figures, so it moves by hundreds of µs from run to run on a loaded machine.)
What is not here — the socket reads and writes, the response head, the access line, the thread that
serves the connection — is the server's CPU per request (``serve_load.py``) minus these parts.

With ``--baseline REF`` (e.g. ``main``) the same measurement runs on ``git archive REF``'s ``shared/`` too, in
a fresh interpreter per tree, the trees taking turns (``--rounds``), each part's best over the rounds kept:
the report puts this tree's figures beside the baseline's.

Usage: ``python benchmarks/serve_profile.py [--calls 25] [--repeats 30] [--baseline main] [--rounds 2]
[--out benchmarks/results/serve_profile]``
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import RESULTS, machine, machine_line, markdown_table, write_report  # noqa: E402
from benchmarks.serve_load import PATH, RESOURCE, THREAD, seed  # noqa: E402


def best_us(parts: dict[str, Callable[[int], object]], calls: int, repeats: int) -> dict[str, float]:
    """Each part's best (lowest) mean CPU time per call over ``repeats`` rounds of ``calls`` calls, in µs
    (``time.process_time``: every thread of this process, so recall on the turn's pool thread counts).

    The parts take turns within each round, so a burst of other work on the machine falls on all of them
    rather than on one part's rounds only."""
    for fn in parts.values():
        for i in range(min(calls, 20)):  # warm caches (messages, vectors, pydantic schemas)
            fn(i)
    best = dict.fromkeys(parts, float("inf"))
    for _ in range(repeats):
        for name, fn in parts.items():
            started = time.process_time()
            for i in range(calls):
                fn(i)
            best[name] = min(best[name], (time.process_time() - started) / calls)
    return {name: seconds * 1e6 for name, seconds in best.items()}


def _request_head(question: str) -> bytes:
    """The head ``http.client`` sends for a context request (what ``serve_load.py``'s clients send)."""
    body = json.dumps({"message": question}).encode()
    sent = io.BytesIO()

    class _Capture(http.client.HTTPConnection):
        def send(self, data: Any) -> None:
            sent.write(data if isinstance(data, bytes) else b"".join(data))

    conn = _Capture("127.0.0.1", 8765)
    conn.request("POST", PATH, body=body, headers={"Content-Type": "application/json"})
    head = sent.getvalue()
    return head[: head.index(b"\r\n\r\n") + 4]


class _MadeContexts:
    """Stands in for the ``Memory`` of a resolver: ``context`` answers each call with the next of the turns'
    ``ModelContext``s, made beforehand by the real ``Memory`` (so the resolver's own work is timed alone)."""

    def __init__(self, contexts: list[Any]) -> None:
        self._contexts = contexts
        self._next = 0

    def context(self, **_: Any) -> Any:
        self._next += 1
        return self._contexts[self._next % len(self._contexts)]


def measure(data: Path, calls: int, repeats: int) -> dict[str, Any]:
    from pydantic import TypeAdapter

    from memstack.api import AuthConfig, create_app
    from memstack.api.app import dump_json_text
    from memstack.api.http import handle_http, to_event
    from memstack.api.routes.context import context_out
    from memstack.api.schemas import ContextOut
    from memstack.serve import ServeConfig, build_memory, make_server

    with tempfile.TemporaryDirectory(prefix="memstack-serve-profile-") as tmp:
        db = Path(tmp) / "profile.db"
        questions = seed(db, data)
        memory = build_memory("sqlite", db=str(db), embedder="hash")
        try:
            server = make_server(memory, ServeConfig(port=0), log=io.StringIO())
            server.server_close()  # only its resolver pool is used: nothing listens
            heads = [_request_head(q).partition(b"\r\n")[2] for q in questions]  # after the request line
            bodies = [json.dumps({"message": q}).encode() for q in questions]
            n = len(questions)
            path, _, query = PATH.partition("?")
            pairs = list(http.client.parse_headers(io.BytesIO(heads[0])).items())

            def event(i: int) -> dict[str, Any]:
                return to_event("POST", path, query, pairs, bodies[i % n])

            events = [event(i) for i in range(n)]
            health = to_event("GET", "/v1/health", None, pairs[:1])

            def resolve(i: int) -> object:
                with server.pool.borrow() as app:
                    return app.resolve(events[i % n], None)

            def context(i: int) -> Any:
                return memory.context(thread_id=THREAD, resource_id=RESOURCE, message=questions[i % n])

            contexts = [context(i) for i in range(n)]
            made = create_app(lambda: _MadeContexts(contexts), auth=AuthConfig())  # type: ignore[arg-type, return-value]

            def route_work(i: int) -> ContextOut:
                return context_out(contexts[i % n], count_tokens=False)

            outs = [route_work(i) for i in range(n)]
            serialise = _serialiser(TypeAdapter(ContextOut), dump_json_text)
            serialise_outs = lambda i: serialise(outs[i % n])  # noqa: E731

            store, options = memory.store, memory.options

            def history(i: int) -> object:
                return store.get_thread_with_history(RESOURCE, THREAD, last=options.last_messages or 0)

            def recalled(i: int) -> object:
                return memory.recall(thread_id=THREAD, resource_id=RESOURCE, query=questions[i % n])

            def tokens(i: int) -> object:
                ctx = contexts[i % n]
                return ctx.token_count

            parts = best_us(
                {
                    "http_head": lambda i: http.client.parse_headers(io.BytesIO(heads[i % n])),
                    "event": event,
                    "handle_http_whole": lambda i: _handle(
                        handle_http, server, path, query, pairs, bodies[i % n]
                    ),
                    "resolver_whole": resolve,
                    "resolver_health": lambda i: _resolve_one(server, health),
                    "resolver_made": lambda i: made.resolve(events[i % n], None),
                    "memory_context": context,
                    "history_read": history,
                    "recall": recalled,
                    "route_work": route_work,
                    "serialisation": serialise_outs,
                    "token_count": tokens,
                },
                calls,
                repeats,
            )
            response_bytes = len(serialise(outs[0]))
        finally:
            memory.close()
    parts["resolver_overhead"] = parts["resolver_made"] - parts["route_work"] - parts["serialisation"]
    parts["resolver_difference"] = (
        parts["resolver_whole"] - parts["memory_context"] - parts["route_work"] - parts["serialisation"]
    )
    return {
        "machine": machine(),
        "workload": {
            "conversation": 0,
            "questions": n,
            "embedder": "hash",
            "calls": calls,
            "repeats": repeats,
        },
        "response_bytes": response_bytes,
        "us_per_request": {k: round(v, 1) for k, v in parts.items()},
    }


def _serialiser(adapter: Any, dump_json_text: Callable[[Any], str]) -> Callable[[Any], str]:
    """How the measured tree's resolver writes a ``ContextOut`` as the response body."""
    try:
        from aws_lambda_powertools.event_handler.api_gateway import Response

        from memstack.api.routes.context import context as route
        from memstack.api.validation import route_plan
    except ImportError:  # a tree before memstack.api.validation: Powertools' response validation
        return lambda out: dump_json_text(adapter.dump_python(out, mode="json"))
    plan = route_plan(route, "/v1/threads/{thread_id}/context")

    def serialise(out: Any) -> str:
        response: Any = Response(200, "application/json", out)
        plan.serialise(response)
        return str(response.body)

    return serialise


def _resolve_one(server: Any, event: dict[str, Any]) -> object:
    with server.pool.borrow() as app:
        return app.resolve(event, None)


def _handle(handle_http: Any, server: Any, path: str, query: str, pairs: list[Any], body: bytes) -> object:
    with server.pool.borrow() as app:
        return handle_http(app, "POST", path, query, pairs, body)


ROWS = [
    ("HTTP headers (`http.client.parse_headers`, as the stdlib server reads them)", "http_head"),
    ("API Gateway event (`to_event`)", "event"),
    ("`handle_http` whole (event + resolver + response)", "handle_http_whole"),
    ("resolver whole (`MemstackResolver.resolve`)", "resolver_whole"),
    ("— `Memory.context`", "memory_context"),
    ("  — history read (`get_thread_with_history`)", "history_read"),
    ("  — semantic recall (embed, keyword + vector search, fusion, windows)", "recall"),
    ("— the route's work (`to_openai`, `ContextOut`)", "route_work"),
    ("— response serialisation (`ContextOut` to JSON text, as the resolver writes it)", "serialisation"),
    ("resolver, context made beforehand (the API layer's whole share)", "resolver_made"),
    ("— resolver overhead (pre-checks, routing, validation, middleware)", "resolver_overhead"),
    ("resolver on `GET /v1/health` (no `Memory` call: the framework's floor)", "resolver_health"),
    ("token count (`count_tokens: true` only)", "token_count"),
]


def render(result: dict[str, Any]) -> str:
    us = result["us_per_request"]
    w = result["workload"]
    baseline = result.get("baseline")
    if baseline is None:
        table = markdown_table(
            ["part", "µs per request"], [[label, f"{us[key]:,.0f}"] for label, key in ROWS]
        )
    else:
        theirs = baseline["us_per_request"]
        table = markdown_table(
            ["part", "this tree µs", f"`{baseline['ref']}` µs", "ratio"],
            [
                [
                    label,
                    f"{us[key]:,.0f}",
                    f"{theirs[key]:,.0f}" if key in theirs else "–",
                    _ratio(us, theirs, key),
                ]
                for label, key in ROWS
            ],
        )
    turns = (
        f" This tree and `{baseline['ref']}` measured in fresh interpreters taking turns, {baseline['rounds']} "
        "rounds each, each part's best kept."
        if baseline is not None
        else ""
    )
    return (
        "\n".join(
            [
                "# Where a `memstack serve` context request's CPU goes",
                "",
                machine_line(result["machine"]),
                f"Workload: LoCoMo conversation {w['conversation']} (419 messages), hash embedder, hybrid recall; "
                f"each part timed alone in one process, best of {w['repeats']} rounds of {w['calls']} calls "
                f"(process CPU, interleaved). Response body: {result['response_bytes']:,} bytes. The socket, the response "
                "head, the access line and the connection's thread are the server's CPU per request "
                f"(`serve_load.py`) minus these.{turns} Load average at the end (1/5/15 min): {result['load']}.",
                "",
                table,
            ]
        )
        + "\n"
    )


def _ratio(ours: dict[str, float], theirs: dict[str, float], key: str) -> str:
    if key not in theirs or theirs[key] <= 0 or ours[key] <= 0:
        return "–"
    return f"x{ours[key] / theirs[key]:.2f}"


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _best_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The first run with each part's lowest figure over all runs."""
    best = dict(runs[0])
    best["us_per_request"] = {
        key: min(run["us_per_request"][key] for run in runs) for key in runs[0]["us_per_request"]
    }
    return best


def _run_tree(shared: Path, args: argparse.Namespace, data: Path) -> dict[str, Any]:
    """One measurement in a fresh interpreter on ``shared`` (a tree's ``shared/`` folder)."""
    env = {**os.environ, "PYTHONPATH": str(shared)}
    command = [
        sys.executable,
        __file__,
        "--calls",
        str(args.calls),
        "--repeats",
        str(args.repeats),
        "--data",
        str(data),
        "--json-only",
    ]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True, timeout=1800)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    from memstack.demo import default_data_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--baseline", default=None, help="also measure this git ref's shared/ (e.g. main)")
    parser.add_argument("--rounds", type=int, default=2, help="turns per tree with --baseline")
    parser.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / "serve_profile")
    args = parser.parse_args(argv)
    data = args.data or default_data_path()
    if args.json_only:
        print(json.dumps(measure(data, args.calls, args.repeats)))
        return 0
    if args.baseline is None:
        result = measure(data, args.calls, args.repeats)
    else:
        from benchmarks.cold_start import baseline_tree

        with tempfile.TemporaryDirectory(prefix="memstack-serve-profile-base-") as tmp:
            base = baseline_tree(args.baseline, Path(tmp))
            mine, theirs = [], []
            for _ in range(args.rounds):
                mine.append(_run_tree(ROOT / "shared", args, data))
                theirs.append(_run_tree(base / "shared", args, data))
        result = _best_of(mine)
        result["baseline"] = {"ref": args.baseline, "rounds": args.rounds, **_best_of(theirs)}
    result["load"] = _load()
    write_report(args.out, render(result), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
