"""One behaviour suite over every way to reach Memstack: ``Memory`` in-process, ``AsyncMemory``, and the
HTTP API through ``MemstackClient`` and ``AsyncMemstackClient`` (``memstack serve``'s server on loopback,
in-process). The same calls must give the same answers and raise the same errors on all four, so none can
drift; and the two clients must keep the same methods with the same signatures.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from botocore.credentials import Credentials

from memstack import Conflict, InvalidInput, Memory, NotFound
from memstack.async_client import AsyncMemstackClient
from memstack.async_memory import AsyncMemory
from memstack.client import MemstackClient
from memstack.working_memory.tools import TOOL_NAME
from tests.served import serving
from tests.sigv4_support import expected_signature

R, OTHER = "user-1", "user-2"
SURFACES = ["memory", "async_memory", "client", "async_client"]
OPTIONS: dict[str, Any] = {"working_memory": {"enabled": True}, "last_messages": 20}


class Blocking:
    """Calls the coroutine methods of ``target`` to completion on one event loop, so one test body drives
    sync and async surfaces alike."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._target, self._loop = target, loop

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._target, name)
        return lambda *args, **kwargs: self._loop.run_until_complete(method(*args, **kwargs))


@pytest.fixture(params=SURFACES)
def surface(request: pytest.FixtureRequest) -> Iterator[Any]:
    loop = asyncio.new_event_loop()
    with Memory.local(":memory:", embedder="hash", background="inline", **OPTIONS) as memory:
        if request.param == "memory":
            yield memory
        elif request.param == "async_memory":
            yield Blocking(AsyncMemory(memory), loop)
        elif request.param == "client":
            with serving(memory) as url, MemstackClient(url) as client:
                yield client
        else:
            with serving(memory) as url:
                client = AsyncMemstackClient(url)
                yield Blocking(client, loop)
                loop.run_until_complete(client.aclose())
    loop.close()


def test_given_a_thread_when_created_read_listed_updated_and_deleted_then_each_surface_agrees(
    surface: Any,
) -> None:
    created = surface.create_thread(resource_id=R, thread_id="t1", title="Trip", metadata={"k": 1})
    assert (created.id, created.title, created.metadata) == ("t1", "Trip", {"k": 1})
    assert surface.get_thread(resource_id=R, thread_id="t1").title == "Trip"
    assert [t.id for t in surface.list_threads(resource_id=R).threads] == ["t1"]
    assert surface.update_thread(resource_id=R, thread_id="t1", metadata={"j": 2}).metadata == {
        "k": 1,
        "j": 2,
    }
    surface.delete_thread(resource_id=R, thread_id="t1")
    with pytest.raises(NotFound) as err:
        surface.get_thread(resource_id=R, thread_id="t1")
    assert err.value.field == "thread_id"


def test_given_another_resources_thread_when_read_then_not_found_and_a_repeated_id_conflicts(
    surface: Any,
) -> None:
    surface.create_thread(resource_id=R, thread_id="t1")
    with pytest.raises(NotFound):
        surface.get_thread(resource_id=OTHER, thread_id="t1")
    with pytest.raises(Conflict):
        surface.create_thread(resource_id=R, thread_id="t1")


def test_given_messages_when_saved_then_seq_follows_the_batch_and_an_upsert_keeps_its_place(
    surface: Any,
) -> None:
    saved = surface.save_messages(
        resource_id=R,
        thread_id="t1",
        messages=[
            {"id": "a", "role": "user", "content": "one"},
            {"id": "b", "role": "assistant", "content": "two"},
        ],
    )
    assert [m.seq for m in saved] == [1, 2]
    surface.save_messages(
        resource_id=R, thread_id="t1", messages=[{"id": "a", "role": "user", "content": "uno"}]
    )
    page = surface.list_messages(resource_id=R, thread_id="t1", last=10)
    assert [(m.id, m.seq, m.parts[0].text) for m in page.messages] == [("a", 1, "uno"), ("b", 2, "two")]
    assert surface.delete_messages(resource_id=R, message_ids=["b", "missing"]) == 1


def test_given_a_bad_message_when_saved_then_invalid_input_naming_the_field_and_nothing_written(
    surface: Any,
) -> None:
    with pytest.raises(InvalidInput) as err:
        surface.save_messages(
            resource_id=R, thread_id="t1", messages=["fine", {"role": "wizard", "content": "x"}]
        )
    assert err.value.field is not None and err.value.field.startswith("messages[1]")
    with pytest.raises(NotFound):
        surface.list_messages(resource_id=R, thread_id="t1")


CALLS = {
    "openai": {
        "id": "w",
        "type": "function",
        "function": {"name": TOOL_NAME, "arguments": '{"memory": "- likes openai"}'},
    },
    "bedrock": {"toolUse": {"toolUseId": "w", "name": TOOL_NAME, "input": {"memory": "- likes bedrock"}}},
    "anthropic": {"type": "tool_use", "id": "w", "name": TOOL_NAME, "input": {"memory": "- likes anthropic"}},
}


@pytest.mark.parametrize("shape", sorted(CALLS))
def test_given_a_working_memory_call_in_any_shape_when_applied_then_stored_and_answered(
    surface: Any, shape: str
) -> None:
    surface.create_thread(resource_id=R, thread_id="t1")
    result = surface.apply_tool_call(resource_id=R, thread_id="t1", tool_call=CALLS[shape])
    assert result.role == "tool" and result.parts[0].tool_call_id == "w" and not result.parts[0].is_error
    assert surface.get_working_memory(resource_id=R, thread_id="t1") == f"- likes {shape}"
    surface.update_working_memory(resource_id=R, thread_id="t1", working_memory="# Replaced")
    assert surface.get_working_memory(resource_id=R, thread_id="t1") == "# Replaced"


def test_given_history_when_the_context_is_assembled_then_every_format_shows_it_with_the_tool(
    surface: Any,
) -> None:
    surface.save_messages(
        resource_id=R,
        thread_id="t1",
        messages=[{"role": "user", "content": "I live in Porto"}, {"role": "assistant", "content": "Noted"}],
    )
    ctx = surface.context(resource_id=R, thread_id="t1", message="Where do I live?", instructions="Be brief.")
    openai = ctx.to_openai()
    assert openai["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [m["content"] for m in openai["messages"][-3:]] == ["I live in Porto", "Noted", "Where do I live?"]
    assert [t["function"]["name"] for t in openai["tools"]] == [TOOL_NAME]
    bedrock = ctx.to_bedrock()
    assert bedrock["messages"][-1] == {"role": "user", "content": [{"text": "Where do I live?"}]}
    assert bedrock["toolConfig"]["tools"][0]["toolSpec"]["name"] == TOOL_NAME
    assert ctx.to_anthropic()["messages"][0]["content"] == [{"type": "text", "text": "I live in Porto"}]
    assert ctx.token_count is None or ctx.token_count > 0  # the HTTP API counts only when asked


def test_given_another_thread_when_recalled_then_the_message_is_found_by_its_words(surface: Any) -> None:
    surface.save_messages(resource_id=R, thread_id="old", messages=["My cat is called Whiskers"])
    surface.save_messages(resource_id=OTHER, thread_id="theirs", messages=["Whiskers the other cat"])
    result = surface.recall(resource_id=R, thread_id="new", query="Whiskers")
    assert [h.thread_id for h in result.hits] == ["old"]
    assert any("Whiskers" in p.text for m in result.messages for p in m.parts if hasattr(p, "text"))


def test_given_a_thread_when_cloned_then_its_messages_are_copied_under_new_ids(surface: Any) -> None:
    surface.save_messages(resource_id=R, thread_id="src", messages=["a", "b"])
    clone = surface.clone_thread(resource_id=R, source_thread_id="src", new_thread_id="dst")
    assert clone.thread.id == "dst" and [m.parts[0].text for m in clone.messages] == ["a", "b"]
    assert set(clone.message_id_map) == {
        m.id for m in surface.list_messages(resource_id=R, thread_id="src").messages
    }


def test_given_a_resource_when_erased_then_its_threads_are_gone_and_a_second_erase_counts_nothing(
    surface: Any,
) -> None:
    surface.save_messages(resource_id=R, thread_id="t1", messages=["a", "b"])
    surface.save_messages(resource_id=OTHER, thread_id="t1", messages=["kept"])
    receipt = surface.erase_resource(resource_id=R)
    assert receipt.resource_id == R and receipt.counts["messages"] == 2
    assert surface.list_threads(resource_id=R).threads == ()
    assert sum(surface.erase_resource(resource_id=R).counts.values()) == 0
    assert len(surface.list_messages(resource_id=OTHER, thread_id="t1").messages) == 1


# --- the two clients cannot drift -----------------------------------------------------------------------


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name not in ("close", "aclose")
    }


def test_given_the_two_clients_then_same_methods_with_the_same_signatures_and_async_ones() -> None:
    sync, coro = public_methods(MemstackClient), public_methods(AsyncMemstackClient)
    assert sync == coro
    assert all(inspect.iscoroutinefunction(getattr(AsyncMemstackClient, name)) for name in coro)


def test_given_async_memory_then_it_has_every_memory_method_the_clients_have() -> None:
    shared = set(public_methods(MemstackClient)) - {"health", "get_observations"}
    assert shared <= {name for name in dir(AsyncMemory) if not name.startswith("_")}
    assert shared <= {name for name in dir(Memory) if not name.startswith("_")}


FAKE = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-example")


def test_given_sigv4_when_the_async_client_sends_then_the_execute_api_signature_verifies() -> None:
    seen: list[httpx.Request] = []

    async def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"messages": []})

    async def run() -> None:
        url = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"
        async with AsyncMemstackClient(
            url, resource_id="u 1", sigv4={"credentials": FAKE}, transport=httpx.MockTransport(record)
        ) as client:
            await client.save_messages(thread_id="t1", messages=["hello"])

    asyncio.run(run())
    request = seen[0]
    expected = expected_signature(request, FAKE, "eu-west-1")
    assert request.headers["Authorization"].endswith(f"Signature={expected}")
    assert json.loads(request.content) == {"messages": ["hello"]}


def test_given_no_server_when_the_async_client_calls_then_unavailable() -> None:
    from memstack import Unavailable

    async def run() -> None:
        async with AsyncMemstackClient("http://127.0.0.1:9", resource_id="u", timeout=2) as client:
            await client.get_thread(thread_id="t")

    with pytest.raises(Unavailable, match="did not answer"):
        asyncio.run(run())


def test_given_a_clone_when_answered_then_it_is_the_thread_as_stored_and_its_last_seq_saves(
    surface: Any,
) -> None:
    surface.save_messages(resource_id=R, thread_id="src", messages=["a", "b", "c"])
    clone = surface.clone_thread(resource_id=R, source_thread_id="src", new_thread_id="dst")
    assert clone.thread == surface.get_thread(resource_id=R, thread_id="dst")
    assert clone.thread.last_seq == 3
    saved = surface.save_messages(
        resource_id=R, thread_id="dst", messages=["d"], expected_last_seq=clone.thread.last_seq
    )
    assert [m.seq for m in saved] == [4]


def test_given_an_untitled_thread_when_cloned_then_the_clone_is_untitled_and_a_titled_one_is_a_clone_of_it(
    surface: Any,
) -> None:
    surface.save_messages(resource_id=R, thread_id="plain", messages=["a"])
    surface.create_thread(resource_id=R, thread_id="named", title="Plans")
    assert surface.clone_thread(resource_id=R, source_thread_id="plain").thread.title == ""
    assert surface.clone_thread(resource_id=R, source_thread_id="named").thread.title == "Clone of Plans"
    given = surface.clone_thread(resource_id=R, source_thread_id="plain", title="Mine")
    assert given.thread.title == "Mine"


def test_given_a_taken_or_bad_new_thread_id_when_cloning_then_the_error_names_new_thread_id(
    surface: Any,
) -> None:
    surface.save_messages(resource_id=R, thread_id="src", messages=["a"])
    surface.create_thread(resource_id=R, thread_id="taken")
    with pytest.raises(Conflict) as taken:
        surface.clone_thread(resource_id=R, source_thread_id="src", new_thread_id="taken")
    assert taken.value.field == "new_thread_id"
    with pytest.raises(InvalidInput) as bad:
        surface.clone_thread(resource_id=R, source_thread_id="src", new_thread_id="x" * 300)
    assert bad.value.field == "new_thread_id"
    with pytest.raises(InvalidInput) as owner:
        surface.clone_thread(resource_id=R, source_thread_id="src", target_resource_id="x" * 300)
    assert owner.value.field == "target_resource_id"
