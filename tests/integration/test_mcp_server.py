"""``memstack mcp``: the MCP server driven by the MCP SDK's own client — in-process over ``Memory`` and
over ``MemstackClient`` (``memstack serve`` on loopback), over streamable HTTP, and over stdio as a
subprocess — with every tool bound to one resource."""

from __future__ import annotations

import asyncio
import contextvars
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install -e '.[mcp]')")

from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.errors import InvalidInput  # noqa: E402
from memstack.integrations.mcp import build_server  # noqa: E402

R, OTHER = "user-1", "user-2"
TOOLS = {"remember", "recall", "get_working_memory", "update_working_memory", "list_threads", "get_context"}


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content
    return data


async def error_text(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return " ".join(getattr(c, "text", "") for c in result.content)


@pytest.fixture
def memory() -> Iterator[Memory]:
    with Memory.local(":memory:", embedder="hash", background="inline") as m:
        yield m


def test_given_a_server_when_listed_then_the_memory_tools_and_none_takes_a_resource(backend: Any) -> None:
    async def run() -> None:
        async with Client(build_server(backend, resource_id=R)) as client:
            tools = (await client.list_tools()).tools
            assert {t.name for t in tools} == TOOLS
            for tool in tools:
                assert "resource_id" not in tool.input_schema.get("properties", {}), tool.name

    asyncio.run(run())


def test_given_remembered_messages_when_recalled_then_found_with_scope_and_filter(backend: Any) -> None:
    async def run() -> None:
        async with Client(build_server(backend, resource_id=R)) as client:
            saved = await call(client, "remember", content="My sister Ana lives in Porto", thread_id="family")
            assert saved["saved"][0]["seq"] == 1
            await call(client, "remember", content="Porto is rainy in March", thread_id="weather")

            everywhere = await call(client, "recall", query="Ana sister", thread_id="weather")
            assert [m["thread_id"] for m in everywhere["matches"] if m["hit"]][0] == "family"
            here = await call(client, "recall", query="Ana sister", thread_id="weather", scope="thread")
            assert all(m["thread_id"] == "weather" for m in here["matches"])
            filtered = await call(
                client, "recall", query="Porto", thread_id="x", filter={"thread_id": {"$eq": "weather"}}
            )
            assert {m["thread_id"] for m in filtered["matches"]} == {"weather"}

    asyncio.run(run())


def test_given_two_servers_for_two_resources_when_one_remembers_then_the_other_never_sees_it(
    backend: Any,
) -> None:
    async def run() -> None:
        async with (
            Client(build_server(backend, resource_id=R)) as mine,
            Client(build_server(backend, resource_id=OTHER)) as theirs,
        ):
            await call(mine, "remember", content="secret plan about Lisbon", thread_id="t")
            await call(mine, "update_working_memory", working_memory="# Me\n- likes Lisbon")
            assert (await call(theirs, "recall", query="Lisbon plan"))["matches"] == []
            assert (await call(theirs, "list_threads"))["threads"] == []
            assert (await call(theirs, "get_working_memory"))["working_memory"] is None
            assert [t["id"] for t in (await call(mine, "list_threads"))["threads"]] == ["t"]

    asyncio.run(run())


def test_given_working_memory_and_history_when_the_context_is_read_then_both_are_shown(backend: Any) -> None:
    async def run() -> None:
        async with Client(build_server(backend, resource_id=R)) as client:
            await call(client, "update_working_memory", working_memory="# User\n- name: Ana")
            assert (await call(client, "get_working_memory"))["working_memory"] == "# User\n- name: Ana"
            await call(client, "remember", content="hello there", role="user")
            ctx = await call(client, "get_context", message="what is my name?")
            assert [m["text"] for m in ctx["messages"]] == ["hello there", "what is my name?"]
            await call(client, "update_working_memory", working_memory="- thread note", scope="thread")
            thread_wm = await call(client, "get_working_memory", scope="thread")
            assert thread_wm["working_memory"] == "- thread note"

    asyncio.run(run())


def test_given_bad_arguments_when_called_then_a_tool_error_with_the_stable_code(backend: Any) -> None:
    async def run() -> None:
        async with Client(build_server(backend, resource_id=R)) as client:
            text = await error_text(client, "recall", query="x", filter={"$regex": "a"})
            assert "invalid_input (field semantic_recall.filter" in text
            assert "validation" in (await error_text(client, "recall", query="x", top_k=0)).lower()

    asyncio.run(run())


def test_given_the_resource_from_the_callers_identity_when_called_then_each_caller_gets_its_own(
    memory: Memory,
) -> None:
    caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="")
    server = build_server(memory, resource_for=caller.get)

    async def run(identity: str) -> Any:
        caller.set(identity)
        async with Client(server) as client:
            if not identity:
                return await error_text(client, "list_threads")
            await call(client, "remember", content=f"I am {identity}", thread_id=f"t-{identity}")
            return await call(client, "list_threads")

    assert [t["id"] for t in asyncio.run(run("alice"))["threads"]] == ["t-alice"]
    assert [t["id"] for t in asyncio.run(run("bob"))["threads"]] == ["t-bob"]
    assert "forbidden: no resource for this caller" in asyncio.run(run(""))
    assert memory.list_threads(resource_id="alice").threads[0].id == "t-alice"


def test_given_neither_or_both_resource_options_when_built_then_invalid_input(memory: Memory) -> None:
    with pytest.raises(InvalidInput):
        build_server(memory)
    with pytest.raises(InvalidInput):
        build_server(memory, resource_id=R, resource_for=lambda: R)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_given_streamable_http_when_a_client_connects_then_the_tools_work(memory: Memory) -> None:
    import uvicorn

    port = free_port()
    app = build_server(memory, resource_id=R).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)

    async def run() -> None:
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            await call(client, "remember", content="over http", thread_id="h")
            assert [t["id"] for t in (await call(client, "list_threads"))["threads"]] == ["h"]

    try:
        asyncio.run(run())
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert memory.list_messages(resource_id=R, thread_id="h").messages[0].parts[0].text == "over http"


def test_given_memstack_mcp_over_stdio_when_a_client_starts_it_then_the_tools_write_the_local_memory(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memory.db"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memstack.cli", "mcp", "--resource-id", R, "--db", str(db), "--embedder", "hash"],
        cwd=str(tmp_path),
    )

    async def run() -> None:
        async with Client(params) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            await call(client, "remember", content="from stdio", thread_id="s")

    asyncio.run(run())
    with Memory.local(db, embedder="hash") as memory:
        assert memory.list_messages(resource_id=R, thread_id="s").messages[0].parts[0].text == "from stdio"
