"""Requests per turn on the AWS backend: what one ``context()`` and one turn's ``save_messages`` send.

Runs the real adapters (PynamoDB store, opensearch-py index) against DynamoDB and S3 under moto
(in-process) and the OpenSearch test double (tests/opensearch_double.py, over real HTTP), replays the
first turns of a LoCoMo conversation, then measures one more turn:

* DynamoDB/S3 requests, counted by wrapping botocore's API call (every client, every thread);
* OpenSearch requests, counted on the client's transport;
* embedding calls, counted on the embedder;

and prints each request with its start and end (ms from the call's start) and thread, so overlapping
requests — the ones issued concurrently — show. Targets (DESIGN.md "A turn on AWS"): ``context()`` ≤ 2 DynamoDB requests +
1 OpenSearch request + ≤ 1 embedding call, issued concurrently; a turn's save = 1 DynamoDB write; the
query embedding made by ``context()`` is reused when that message is indexed.

Usage: ``python benchmarks/aws_requests.py [--warm-turns 40] [--json benchmarks/results/aws_requests.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the OpenSearch double lives in tests/

WRITE_OPERATIONS = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}


@dataclass
class Call:
    """One request: which service and operation, when (ms from the measured call's start), which thread."""

    service: str
    operation: str
    start_ms: float
    end_ms: float
    thread: str
    request_bytes: int = 0
    response_bytes: int = 0
    read_units: float = 0.0
    """DynamoDB read request units (benchmarks/dynamodb_units.py); 0 for other services."""
    write_units: float = 0.0
    """DynamoDB write request units."""


class Recorder:
    """Collects requests from every thread while a measurement is open."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._t0 = time.perf_counter()
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self.calls = []
            self._t0 = time.perf_counter()

    def wrap(
        self,
        service: str,
        operation: Callable[[], str],
        fn: Callable[[], Any],
        request_bytes: int = 0,
        response_bytes: Callable[[Any], int] = lambda _: 0,
        units: Callable[[Any], tuple[float, float]] = lambda _: (0.0, 0.0),
    ) -> Any:
        start = time.perf_counter()
        result: Any = None
        try:
            result = fn()
            return result
        finally:
            end = time.perf_counter()
            with self._lock:
                self.calls.append(
                    Call(
                        service,
                        operation(),
                        (start - self._t0) * 1000,
                        (end - self._t0) * 1000,
                        threading.current_thread().name,
                        request_bytes,
                        response_bytes(result) if result is not None else 0,
                        *(units(result) if result is not None else (0.0, 0.0)),
                    )
                )


@contextmanager
def count_botocore(rec: Recorder) -> Iterator[None]:
    """Record every botocore request (DynamoDB via PynamoDB, S3 via boto3) with its serialised request body
    and raw response body sizes, at the endpoint (what goes over the wire; retries count once each)."""
    import botocore.endpoint
    from benchmarks.dynamodb_units import units_of

    original = botocore.endpoint.Endpoint.make_request

    def patched(self: Any, operation_model: Any, request_dict: Any) -> Any:
        body = request_dict.get("body") or b""
        size = len(body.encode() if isinstance(body, str) else body) if isinstance(body, str | bytes) else 0
        return rec.wrap(
            operation_model.service_model.service_name,
            lambda: str(operation_model.name),
            lambda: original(self, operation_model, request_dict),
            size,
            lambda result: len(getattr(result[0], "content", b"") or b""),
            lambda result: (
                units_of(operation_model.name, body, getattr(result[0], "content", None))
                if operation_model.service_model.service_name == "dynamodb"
                else (0.0, 0.0)
            ),
        )

    botocore.endpoint.Endpoint.make_request = patched  # type: ignore[method-assign]
    try:
        yield
    finally:
        botocore.endpoint.Endpoint.make_request = original  # type: ignore[method-assign]


def _json_size(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, str):
        return len(value.encode())
    return len(json.dumps(value, default=str).encode())


def count_opensearch(rec: Recorder, client: Any) -> None:
    """Record every request the OpenSearch client's transport sends."""
    transport = client.transport
    original = transport.perform_request

    def patched(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        body = kwargs.get("body", args[2] if len(args) > 2 else None)
        return rec.wrap(
            "opensearch",
            lambda: f"{method} {url}",
            lambda: original(method, url, *args, **kwargs),
            _json_size(body),
            _json_size,
        )

    transport.perform_request = patched


class CountingEmbedder:
    """Wraps an embedder and records each call (one call may embed a batch)."""

    def __init__(self, inner: Any, rec: Recorder) -> None:
        self.inner = inner
        self.rec = rec
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.symmetric = inner.symmetric
        from memstack.recall.engine import fusion_weight

        self.fusion_weight = fusion_weight(inner)  # hybrid fusion reads the wrapped embedder's prior

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self.rec.wrap(  # type: ignore[no-any-return]
            "embedding",
            lambda: f"documents x{len(texts)}",
            lambda: self.inner.embed_documents(texts),
            sum(len(t.encode()) for t in texts),
        )

    def embed_query(self, text: str) -> list[float]:
        return self.rec.wrap(  # type: ignore[no-any-return]
            "embedding", lambda: "query", lambda: self.inner.embed_query(text), len(text.encode())
        )


def concurrent_pairs(calls: list[Call]) -> int:
    """How many pairs of requests overlapped in time (issued concurrently)."""
    n = 0
    for i, a in enumerate(calls):
        for b in calls[i + 1 :]:
            if a.start_ms < b.end_ms and b.start_ms < a.end_ms:
                n += 1
    return n


def summary(calls: list[Call]) -> dict[str, Any]:
    """Counts by service, DynamoDB writes, and the overlap figure."""
    by: dict[str, int] = {}
    for c in calls:
        by[c.service] = by.get(c.service, 0) + 1
    return {
        "dynamodb": by.get("dynamodb", 0),
        "dynamodb_writes": sum(c.service == "dynamodb" and c.operation in WRITE_OPERATIONS for c in calls),
        "s3": by.get("s3", 0),
        "opensearch": by.get("opensearch", 0),
        "embedding": by.get("embedding", 0),
        "concurrent_pairs": concurrent_pairs(calls),
        "request_bytes": sum(c.request_bytes for c in calls),
        "response_bytes": sum(c.response_bytes for c in calls),
        "dynamodb_read_units": sum(c.read_units for c in calls),
        "dynamodb_write_units": sum(c.write_units for c in calls),
    }


def print_calls(title: str, calls: list[Call], wall_ms: float) -> None:
    print(f"\n{title}  (wall {wall_ms:.1f} ms)")
    print(f"  {'service':<11}{'operation':<40}{'start':>8}{'end':>8}{'req B':>9}{'resp B':>9}  thread")
    for c in sorted(calls, key=lambda c: c.start_ms):
        print(
            f"  {c.service:<11}{c.operation[:39]:<40}{c.start_ms:>8.1f}{c.end_ms:>8.1f}"
            f"{c.request_bytes:>9}{c.response_bytes:>9}  {c.thread}"
        )
    s = summary(calls)
    print(
        f"  → DynamoDB {s['dynamodb']} (writes {s['dynamodb_writes']}), S3 {s['s3']}, "
        f"OpenSearch {s['opensearch']}, embedding {s['embedding']}; overlapping pairs {s['concurrent_pairs']}; "
        f"RRU {s['dynamodb_read_units']:g}, WRU {s['dynamodb_write_units']:g}; "
        f"payload {s['request_bytes']} B sent, {s['response_bytes']} B received "
        "(embedding: text bytes sent; responses of the local embedder are not on a wire)"
    )


def run(warm_turns: int, data: Path, working_memory: bool) -> dict[str, Any]:
    """Replay ``warm_turns`` turns, then measure one turn; returns the figures."""
    import moto
    from tests.opensearch_double import OpenSearchDouble

    from memstack import locomo
    from memstack.adapters.hash_embed import HashEmbedder
    from memstack.bootstrap import build_aws
    from memstack.settings import load_settings

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(name, value)
    rec = Recorder()
    conv = locomo.load(data, [0])[0]
    turns = [t for ts in conv.sessions.values() for t in ts]
    thread_id = turns[0].thread_id
    turns = [t for t in turns if t.thread_id == thread_id][: warm_turns + 2]
    options: dict[str, Any] = (
        {"working_memory": {"enabled": True, "scope": "resource"}} if working_memory else {}
    )
    with OpenSearchDouble(mode="serverless") as double, moto.mock_aws(), count_botocore(rec):
        settings = load_settings(
            backend="aws",
            region="us-east-1",
            table="memstack-bench",
            bucket="memstack-bench-bodies",
            opensearch_endpoint=double.url,
            opensearch_service="aoss",
            create_resources=True,
        )
        embedder = CountingEmbedder(HashEmbedder(), rec)
        memory = build_aws(settings, embedder=embedder, options=options)  # type: ignore[arg-type]
        count_opensearch(rec, memory.index._client)  # type: ignore[attr-defined]  # the benchmark counts its transport
        for t in turns[:-2]:
            memory.context(thread_id=thread_id, resource_id=conv.resource_id, message=t.text)
            memory.save_messages(
                thread_id=thread_id,
                resource_id=conv.resource_id,
                messages=[
                    {"id": t.message_id, "role": t.role, "content": t.text, "created_at": t.created_at}
                ],
            )
        user, reply = turns[-2], turns[-1]
        rec.reset()
        t0 = time.perf_counter()
        ctx = memory.context(thread_id=thread_id, resource_id=conv.resource_id, message=user.text)
        context_wall = (time.perf_counter() - t0) * 1000
        context_calls = list(rec.calls)
        rec.reset()
        t0 = time.perf_counter()
        memory.save_messages(
            thread_id=thread_id,
            resource_id=conv.resource_id,
            messages=[
                {"id": user.message_id, "role": "user", "content": user.text},
                {"id": reply.message_id, "role": "assistant", "content": reply.text},
            ],
        )
        save_wall = (time.perf_counter() - t0) * 1000
        save_calls = list(rec.calls)
        memory.close()
    label = "working memory on (resource scope)" if working_memory else "Mastra defaults (working memory off)"
    print_calls(f"context() — {label}; {len(ctx.messages)} messages shown", context_calls, context_wall)
    print_calls("save_messages(one turn: user + assistant) incl. indexing", save_calls, save_wall)
    save_store = [c for c in save_calls if c.service == "dynamodb"]
    embedded = sum(
        int(c.operation.split("x")[1]) for c in save_calls if c.operation.startswith("documents x")
    )
    print(f"  texts embedded by the save: {embedded} of 2 (the user message's query embedding is reused)")
    return {
        "options": label,
        "warm_turns": warm_turns,
        "context": summary(context_calls),
        "save": summary(save_calls),
        "save_dynamodb_operations": [c.operation for c in save_store],
        "save_texts_embedded": embedded,
        "context_calls": [asdict(c) for c in context_calls],
        "save_calls": [asdict(c) for c in save_calls],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--warm-turns", type=int, default=40)
    parser.add_argument(
        "--data", type=Path, help="LoCoMo JSON (default: the repository's data/locomo/locomo-dev-2.json.gz)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    from memstack.demo import default_data_path

    data = args.data or default_data_path()
    results = [run(args.warm_turns, data, working_memory=wm) for wm in (False, True)]
    print("\nsummary")
    print(
        f"  {'options':<40}{'ctx ddb':>8}{'ctx os':>8}{'ctx emb':>8}{'overlap':>8}{'ctx B out/in':>14}"
        f"{'save ddb writes':>16}{'save emb':>9}{'save B out/in':>15}"
    )
    for r in results:
        c, s = r["context"], r["save"]
        print(
            f"  {r['options']:<40}{c['dynamodb']:>8}{c['opensearch']:>8}{c['embedding']:>8}"
            f"{c['concurrent_pairs']:>8}{str(c['request_bytes']) + '/' + str(c['response_bytes']):>14}"
            f"{s['dynamodb_writes']:>16}{s['embedding']:>9}"
            f"{str(s['request_bytes']) + '/' + str(s['response_bytes']):>15}"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
