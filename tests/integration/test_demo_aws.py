"""The main job on the AWS backend: ``memstack demo --backend aws`` against a moto server (DynamoDB + S3 over
HTTP) and the OpenSearch test double (Serverless mode), configured only through MEMSTACK_* settings."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstack.cli import main
from tests.opensearch_double import OpenSearchDouble

DATA = Path(__file__).resolve().parents[1] / "data" / "locomo-excerpt.json"
RESULT = re.compile(r"^RESULT .*evidence_recall=(?P<recall>[0-9.]+) ", re.M)


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, moto_server: str) -> Iterator[OpenSearchDouble]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_REGION": "us-east-1",
        "MEMSTACK_BACKEND": "aws",
        "MEMSTACK_TABLE": "memstack-demo",
        "MEMSTACK_BUCKET": "memstack-demo-bodies",
        "MEMSTACK_DYNAMODB_ENDPOINT_URL": moto_server,
        "MEMSTACK_S3_ENDPOINT_URL": moto_server,
        "MEMSTACK_OPENSEARCH_SERVICE": "aoss",
        "MEMSTACK_CREATE_RESOURCES": "true",
    }.items():
        monkeypatch.setenv(name, value)
    with OpenSearchDouble("serverless") as double:
        monkeypatch.setenv("MEMSTACK_OPENSEARCH_ENDPOINT", double.url)
        yield double


def run_demo(capsys: pytest.CaptureFixture[str], *args: str) -> float:
    code = main(["demo", "--data", str(DATA), "--embedder", "hash", "--quiet", *args])
    out = capsys.readouterr().out
    assert code == 0, out
    found = RESULT.search(out)
    assert found is not None, out
    assert out.strip().splitlines()[-1].startswith("RESULT conversations=1 messages=35 questions=")
    return float(found["recall"])


def test_given_aws_settings_when_the_demo_runs_then_it_prints_the_result_line_like_the_embedded_default(
    aws_env: OpenSearchDouble, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    aws = run_demo(capsys)
    paths = {r.path.split("?")[0] for r in aws_env.requests}
    assert any(p.endswith("/_msearch") for p in paths), "hybrid recall goes through one _msearch"
    assert any(p.endswith("/_bulk") for p in paths)

    monkeypatch.setenv("MEMSTACK_BACKEND", "sqlite")
    local = run_demo(capsys)
    assert aws > 0.3
    # same fusion, same embedder; BM25 differs a little between FTS5 and OpenSearch
    assert abs(aws - local) <= 0.15, (aws, local)


def test_given_the_aws_backend_when_demo_gets_a_db_path_then_a_clear_error(
    aws_env: OpenSearchDouble, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--data", str(DATA), "--embedder", "hash", "--db", "x.db"]) == 2
    assert "--db applies to the sqlite backend only" in capsys.readouterr().err
