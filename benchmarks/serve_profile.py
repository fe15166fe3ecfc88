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
  as the resolver does it: ``TypeAdapter.dump_python`` + ``memstack.api.app.dump_json_text``);
* inside ``Memory.context``: the history read (``get_thread_with_history``) and semantic recall (embedding,
  keyword + vector search, fusion, neighbour windows);
* ``resolver on health``: ``GET /v1/health`` through the same resolver — no body, no ``Memory`` call: what
  any request pays for Powertools and the pre-checks alone;
* ``token count``: what ``count_tokens: true`` adds (tiktoken ``o200k_base``; off by default).

The resolver's own overhead is the whole minus ``Memory.context``, the route's work and the serialisation.
What is not here — the socket reads and writes, the response head, the access line, the thread that
serves the connection — is the server's CPU per request (``serve_load.py``) minus these parts.

Usage: ``python benchmarks/serve_profile.py [--calls 25] [--repeats 30] [--out benchmarks/results/serve_profile]``
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
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


def measure(data: Path, calls: int, repeats: int) -> dict[str, Any]:
    from pydantic import TypeAdapter

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

            def route_work(i: int) -> ContextOut:
                return context_out(contexts[i % n], count_tokens=False)

            outs = [route_work(i) for i in range(n)]
            adapter = TypeAdapter(ContextOut)

            def serialise(i: int) -> str:
                return dump_json_text(adapter.dump_python(outs[i % n], mode="json"))

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
                    "memory_context": context,
                    "history_read": history,
                    "recall": recalled,
                    "route_work": route_work,
                    "serialisation": serialise,
                    "token_count": tokens,
                },
                calls,
                repeats,
            )
            response_bytes = len(serialise(0))
        finally:
            memory.close()
    parts["resolver_overhead"] = (
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
    ("— response serialisation (`dump_python` + `dump_json_text`)", "serialisation"),
    ("— resolver overhead (pre-checks, routing, validation, middleware)", "resolver_overhead"),
    ("resolver on `GET /v1/health` (no `Memory` call: the framework's floor)", "resolver_health"),
    ("token count (`count_tokens: true` only)", "token_count"),
]


def render(result: dict[str, Any]) -> str:
    us = result["us_per_request"]
    w = result["workload"]
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
                "(`serve_load.py`) minus these.",
                "",
                markdown_table(
                    ["part", "µs per request"], [[label, f"{us[key]:,.0f}"] for label, key in ROWS]
                ),
            ]
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    from memstack.demo import default_data_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / "serve_profile")
    args = parser.parse_args(argv)
    result = measure(args.data or default_data_path(), args.calls, args.repeats)
    write_report(args.out, render(result), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
