"""Observability (memstack.observability): business metrics flushed per Lambda invocation as EMF on stdout,
one span per route when tracing is on, no message text in logs or spans, silence in library use, and a
light import."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memstack import Memory, observability
from tests.integration.events import Api, reset_process_state, use_sqlite

ROOT = Path(__file__).resolve().parents[2]
MARKER = "PEANUT-ALLERGY-MARKER-7731"


@dataclass
class FakeLambdaContext:
    """The attributes of ``awslambdaric``'s context object that Powertools reads."""

    function_name: str = "memstack-api"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:eu-west-1:123456789012:function:memstack-api"
    aws_request_id: str = "52fdfc07-2182-154f-163f-5f0f9a621d72"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


@pytest.fixture
def lambda_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    """The ``api`` function's handler as Lambda runs it (with a context object), service ``memstack-api``."""
    monkeypatch.setenv(observability.SERVICE_ENV, "memstack-api")
    monkeypatch.setenv(observability.NAMESPACE_ENV, "MemstackTest")
    use_sqlite(monkeypatch, tmp_path / "memory.db")
    from functions.api.app import handler

    yield Api(lambda event, _: handler(event, FakeLambdaContext()), "user-a")
    reset_process_state()


def emf_lines(out: str) -> list[dict[str, Any]]:
    """The CloudWatch EMF documents among stdout's JSON lines."""
    docs = []
    for line in out.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and "_aws" in doc:
            docs.append(doc)
    return docs


def metric_values(doc: dict[str, Any]) -> dict[str, float]:
    """Each metric of an EMF document with its total (Powertools writes a list when values repeat)."""
    names = [m["Name"] for d in doc["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]]
    return {name: sum(doc[name]) if isinstance(doc[name], list) else doc[name] for name in names}


ROUTE_METRICS = [
    ("POST", "/v1/threads/t1/messages", {"messages": ["one", "two"]}, {"Saves": 2.0}),
    ("POST", "/v1/threads/t1/context", {"message": "hello"}, {"Turns": 1.0}),
    ("POST", "/v1/threads", {"id": "t2"}, {"ThreadsCreated": 1.0}),
    ("PATCH", "/v1/threads/t2", {"title": "Trip"}, {"ThreadsUpdated": 1.0}),
    ("POST", "/v1/threads/t1/clone", {"new_thread_id": "t3"}, {"ThreadsCloned": 1.0}),
    ("DELETE", "/v1/threads/t3", None, {"ThreadsDeleted": 1.0}),
    (
        "PUT",
        "/v1/working-memory",
        {"working_memory": "# Notes", "options": {"working_memory": {"enabled": True}}},
        {"WorkingMemoryUpdates": 1.0},
    ),
]


def test_given_the_api_function_when_routes_are_called_then_each_invocation_flushes_its_business_metric(
    lambda_api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    for method, path, body, expected in ROUTE_METRICS:
        capsys.readouterr()
        reply = lambda_api(method, path, body=body)
        assert reply.status < 300, (path, reply.body)
        docs = emf_lines(capsys.readouterr().out)
        assert len(docs) == 1, f"{method} {path}: one EMF line per invocation, got {len(docs)}"
        assert metric_values(docs[0]) == expected, (method, path)
        assert docs[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "MemstackTest"
        assert docs[0]["service"] == "memstack-api"


def test_given_saved_messages_when_recalled_then_recalled_counts_the_hits(
    lambda_api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    lambda_api.post("/v1/threads/t1/messages", {"messages": ["the train leaves at nine", "hello"]})
    capsys.readouterr()

    reply = lambda_api.post("/v1/threads/t2/recall", {"query": "when does the train leave"})

    hits = len(reply.body["hits"])
    assert hits > 0
    (doc,) = emf_lines(capsys.readouterr().out)
    assert metric_values(doc) == {"Recalled": float(hits)}


def test_given_a_marker_in_messages_when_a_turn_runs_in_lambda_then_no_log_line_or_metric_holds_it(
    lambda_api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    lambda_api.post("/v1/threads/t1/messages", {"messages": [f"I have a {MARKER}"]})
    on = {"working_memory": {"enabled": True}}
    assert (
        lambda_api.put("/v1/working-memory", {"working_memory": f"# Notes {MARKER}", "options": on}).status
        == 204
    )
    lambda_api.post("/v1/threads/t1/context", {"message": f"about my {MARKER}?"})
    lambda_api.post("/v1/threads/t1/recall", {"query": MARKER})

    out = capsys.readouterr().out
    logs = [json.loads(line) for line in out.splitlines() if line.startswith("{") and "_aws" not in line]
    assert any(line.get("message") == "context" for line in logs), "the JSON log lines reach stdout"
    context_line = next(line for line in logs if line.get("message") == "context")
    assert context_line["function_request_id"] == FakeLambdaContext.aws_request_id
    assert context_line["name"] == "memstack.api.routes.context", "logger names follow __name__"
    assert MARKER not in out


@dataclass
class StubSpan:
    name: str
    annotations: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def put_annotation(self, key: str, value: Any) -> None:
        self.annotations[key] = value

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        self.metadata[key] = value

    def add_exception(self, exception: BaseException, stack: Any, remote: bool = False) -> None:
        self.metadata["exception"] = repr(exception)


@dataclass
class StubProvider:
    """A Powertools tracing provider that records subsegments (the documented way to test a Tracer)."""

    spans: list[StubSpan] = field(default_factory=list)

    @contextmanager
    def in_subsegment(self, name: str, **kwargs: Any) -> Iterator[StubSpan]:
        span = StubSpan(name)
        self.spans.append(span)
        yield span

    in_subsegment_async = in_subsegment

    def put_annotation(self, key: str, value: Any) -> None:
        self.spans[-1].put_annotation(key, value) if self.spans else None

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        self.spans[-1].put_metadata(key, value) if self.spans else None

    def patch(self, modules: Any) -> None:
        return None

    def patch_all(self) -> None:
        return None


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[Api, StubProvider]]:
    """A resolver over a SQLite memory with tracing on through a stub provider."""
    from aws_lambda_powertools import Tracer

    from memstack.api import AuthConfig, create_app

    reset_process_state()
    provider = StubProvider()
    observability.configure(tracer=Tracer(disabled=False, provider=provider, auto_patch=False))  # type: ignore[arg-type]
    memory = Memory.local(str(tmp_path / "m.db"), embedder="hash")
    assert [span.name for span in provider.spans] == ["## reconcile_index"]  # Memory.local's start-up
    provider.spans.clear()
    app = create_app(memory, auth=AuthConfig())
    yield Api(app.resolve, "user-a"), provider
    memory.close()
    reset_process_state()


def test_given_tracing_on_when_routes_are_called_then_each_has_a_span_without_message_text(
    traced: tuple[Api, StubProvider],
) -> None:
    api, provider = traced
    api.post("/v1/threads/t1/messages", {"messages": [f"I have a {MARKER}"]})
    api.post("/v1/threads/t1/context", {"message": f"about my {MARKER}?"})
    api.post("/v1/threads/t1/recall", {"query": MARKER})
    api.get("/v1/threads/t1")

    names = [span.name for span in provider.spans]
    # a span per route, and inside it a span per use case of the Memory facade
    assert names == [
        "## api.save_messages",
        "## save_messages",
        "## api.context",
        "## context",
        "## api.recall",
        "## recall",
        "## api.get_thread",
        "## get_thread",
    ]
    assert MARKER not in repr(provider.spans)


def test_given_library_use_when_a_use_case_runs_then_no_tracer_is_built_and_powertools_is_not_imported() -> (
    None
):
    code = (
        "import sys; from memstack import observability\n"
        "with observability.use_case('context'): pass\n"
        "assert observability.tracer() is None\n"
        "assert not [m for m in sys.modules if m.startswith(('aws_lambda_powertools', 'aws_xray_sdk'))]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=_env_without("LAMBDA_TASK_ROOT"))


def _env_without(name: str) -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != name}


def test_given_library_use_when_a_turn_runs_then_nothing_is_printed_and_no_metric_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reset_process_state()
    memory = Memory.local(str(tmp_path / "m.db"), embedder="hash")
    memory.save_messages(thread_id="t1", resource_id="u", messages=[f"I have a {MARKER}"])
    memory.context(thread_id="t1", resource_id="u", message="hello")
    observability.add_metric(observability.TURNS)
    memory.close()

    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    assert not observability.metrics().metric_set


def test_given_the_module_when_imported_then_neither_powertools_nor_the_xray_sdk_is_loaded() -> None:
    code = (
        "import sys; import memstack.observability\n"
        "loaded = {m for m in sys.modules if m.startswith(('aws_lambda_powertools', 'aws_xray_sdk'))}\n"
        "assert not loaded, sorted(loaded)[:5]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
