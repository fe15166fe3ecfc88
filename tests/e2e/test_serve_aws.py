"""End to end on the AWS backend: ``memstack serve --backend aws`` (a subprocess) against a moto server
(DynamoDB + S3 over HTTP) and the OpenSearch test double (Serverless mode), configured only through
``MEMSTACK_*`` settings, driven by ``MemstackClient``. ``MEMSTACK_INDEXING=stream`` is set as on the API
functions: serve has no stream, so it indexes inline — recall finds a turn right after it is saved."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstack import NotFound
from memstack.client import MemstackClient
from tests.e2e.serve_support import Served, running_serve
from tests.opensearch_double import OpenSearchDouble

WM_OPTIONS = {"working_memory": {"enabled": True}}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, OpenSearchDouble]]:
    from moto.server import ThreadedMotoServer

    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        with OpenSearchDouble("serverless") as double:
            env = {
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_SESSION_TOKEN": "testing",
                "AWS_REGION": "us-east-1",
                "MEMSTACK_TABLE": "memstack-e2e",
                "MEMSTACK_BUCKET": "memstack-e2e-bodies",
                "MEMSTACK_DYNAMODB_ENDPOINT_URL": endpoint,
                "MEMSTACK_S3_ENDPOINT_URL": endpoint,
                "MEMSTACK_OPENSEARCH_ENDPOINT": double.url,
                "MEMSTACK_OPENSEARCH_SERVICE": "aoss",
                "MEMSTACK_CREATE_RESOURCES": "true",
                "MEMSTACK_INDEXING": "stream",
            }
            folder = tmp_path_factory.mktemp("serve-aws")
            with running_serve("--backend", "aws", "--embedder", "hash", cwd=folder, env=env) as s:
                yield s, double
    finally:
        moto.stop()


def test_given_the_aws_backend_when_an_agent_runs_a_turn_loop_then_it_behaves_as_the_embedded_default(
    served: tuple[Served, OpenSearchDouble],
) -> None:
    server, double = served
    assert "backend=aws" in server.stdout[0] and "indexing=inline" in server.stdout[0]

    with MemstackClient(server.url, resource_id="user-7", timeout=60) as client:
        client.create_thread(thread_id="aws-1", title="Kitchen")
        first = client.context(thread_id="aws-1", message="I bought a cast iron pan.", options=WM_OPTIONS)
        assert [m.text for m in first.messages] == ["I bought a cast iron pan."]
        client.apply_tool_call(
            thread_id="aws-1",
            tool_call={
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "updateWorkingMemory",
                    "arguments": json.dumps({"memory": "# Kitchen\n- pan: cast iron"}),
                },
            },
            options=WM_OPTIONS,
        )
        saved = client.save_messages(
            thread_id="aws-1",
            messages=[
                "I bought a cast iron pan.",
                {"role": "assistant", "content": "Season it before first use."},
            ],
        )

        second = client.context(thread_id="aws-1", message="How do I clean it?", options=WM_OPTIONS)
        assert [m.text for m in second.messages] == [
            "I bought a cast iron pan.",
            "Season it before first use.",
            "How do I clean it?",
        ]
        assert any(s.kind == "working_memory" and "cast iron" in s.text for s in second.system)

        found = client.recall(thread_id="aws-2", query="cast iron pan")
        assert saved[0].id in {h.message_id for h in found.hits}, "indexed inline, not left to a stream"
        assert any(r.path.split("?")[0].endswith("/_bulk") for r in double.requests)

        assert [t.id for t in client.list_threads().threads] == ["aws-1"]
        client.delete_thread(thread_id="aws-1")
        with pytest.raises(NotFound):
            client.get_thread(thread_id="aws-1")

        client.save_messages(thread_id="aws-2", messages=["The pan is 26 cm."])
        receipt = client.erase_resource()
        assert (receipt.counts["threads"], receipt.counts["messages"]) == (1, 1)
        assert receipt.counts["index_documents"] >= 1, "indexed inline: the erasure removes the chunk"
        assert client.list_threads().threads == ()


def test_given_the_aws_backend_when_a_db_path_is_given_then_serve_refuses_to_start(tmp_path: Path) -> None:
    refused = pytest.raises(AssertionError, match=r"exited \(2\).*--db applies to the sqlite backend only")
    with refused, running_serve("--backend", "aws", "--db", "x.db", cwd=tmp_path):
        pass
