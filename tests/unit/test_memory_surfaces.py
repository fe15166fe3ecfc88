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
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from botocore.credentials import Credentials

from memstack import Conflict, InvalidInput, Memory, MemstackError, NotFound
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


@contextmanager
def open_surface(kind: str, options: dict[str, Any]) -> Iterator[Any]:
    """One surface (``SURFACES``) over a fresh in-memory ``Memory`` configured with ``options`` (the
    server's configured options, for the two clients)."""
    loop = asyncio.new_event_loop()
    with Memory.local(":memory:", embedder="hash", background="inline", **options) as memory:
        if kind == "memory":
            yield memory
        elif kind == "async_memory":
            yield Blocking(AsyncMemory(memory), loop)
        elif kind == "client":
            with serving(memory) as url, MemstackClient(url) as client:
                yield client
        else:
            with serving(memory) as url:
                client = AsyncMemstackClient(url)
                yield Blocking(client, loop)
                loop.run_until_complete(client.aclose())
    loop.close()


@pytest.fixture(params=SURFACES)
def surface(request: pytest.FixtureRequest) -> Iterator[Any]:
    with open_surface(request.param, OPTIONS) as opened:
        yield opened


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


# working memory: the configured options merged with the call's decide, on every surface -----------------

THREAD_SCOPE: dict[str, Any] = {"working_memory": {"enabled": True, "scope": "thread"}}
ON: dict[str, Any] = {"working_memory": {"enabled": True}}


@pytest.fixture(params=SURFACES)
def thread_scoped(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A surface whose configured options (the server's, for the clients) put working memory in threads."""
    with open_surface(request.param, THREAD_SCOPE) as opened:
        yield opened


@pytest.fixture(params=SURFACES)
def wm_off(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A surface configured without working memory."""
    with open_surface(request.param, {}) as opened:
        yield opened


def _shows(surface: Any, thread_id: str, text: str) -> bool:
    ctx = surface.context(resource_id=R, thread_id=thread_id, message="hi")
    return any(text in m["content"] for m in ctx.to_openai()["messages"] if m["role"] == "system")


def test_given_thread_scope_configured_when_updated_for_a_thread_then_that_thread_holds_it_and_its_turn_shows_it(
    thread_scoped: Any,
) -> None:
    surface = thread_scoped
    surface.create_thread(resource_id=R, thread_id="t1")
    surface.create_thread(resource_id=R, thread_id="t2")

    surface.update_working_memory(resource_id=R, thread_id="t1", working_memory="# thread one doc")

    assert surface.get_thread(resource_id=R, thread_id="t1").metadata == {
        "working_memory": "# thread one doc"
    }
    assert surface.get_working_memory(resource_id=R, thread_id="t1") == "# thread one doc"
    assert _shows(surface, "t1", "thread one doc")
    assert surface.get_working_memory(resource_id=R, thread_id="t2") is None
    resource_scope = {"working_memory": {"scope": "resource"}}
    assert surface.get_working_memory(resource_id=R, options=resource_scope) is None, "no resource record"
    with pytest.raises(InvalidInput) as err:
        surface.get_working_memory(resource_id=R)
    assert err.value.field == "thread_id"


def test_given_resource_scope_configured_when_updated_through_a_thread_then_the_resource_holds_it(
    surface: Any,
) -> None:
    surface.create_thread(resource_id=R, thread_id="t1")
    surface.update_working_memory(resource_id=R, thread_id="t1", working_memory="# shared doc")

    assert surface.get_thread(resource_id=R, thread_id="t1").metadata == {}
    assert surface.get_working_memory(resource_id=R) == "# shared doc"
    assert surface.get_working_memory(resource_id=R, thread_id="other") == "# shared doc"
    assert _shows(surface, "t2", "shared doc")


def test_given_working_memory_off_when_updated_then_refused_and_nothing_stored_unless_the_call_turns_it_on(
    wm_off: Any,
) -> None:
    surface = wm_off
    surface.create_thread(resource_id=R, thread_id="t1")

    with pytest.raises(InvalidInput) as err:
        surface.update_working_memory(resource_id=R, thread_id="t1", working_memory="# written while off")

    assert err.value.field == "working_memory" and "not enabled" in err.value.message
    assert surface.get_working_memory(resource_id=R, thread_id="t1", options=ON) is None
    surface.update_working_memory(resource_id=R, thread_id="t1", working_memory="# kept", options=ON)
    assert surface.get_working_memory(resource_id=R, options=ON) == "# kept"
    assert surface.get_working_memory(resource_id=R) is None, "off: no working memory is read"


@pytest.mark.parametrize("seed", [5, True, {"name": "x"}, ["# a"], None], ids=repr)
def test_given_a_seed_that_is_not_a_document_when_a_thread_is_created_or_updated_then_invalid_input(
    surface: Any, seed: object
) -> None:
    with pytest.raises(InvalidInput) as err:
        surface.create_thread(resource_id=R, thread_id="t1", metadata={"working_memory": seed})
    assert err.value.field == "metadata.working_memory"
    with pytest.raises(NotFound):
        surface.get_thread(resource_id=R, thread_id="t1")

    surface.create_thread(resource_id=R, thread_id="t1", metadata={"k": 1})
    with pytest.raises(InvalidInput) as err:
        surface.update_thread(resource_id=R, thread_id="t1", metadata={"working_memory": seed})
    assert err.value.field == "metadata.working_memory"
    assert surface.get_thread(resource_id=R, thread_id="t1").metadata == {"k": 1}


def test_given_a_model_call_whose_version_is_not_a_string_then_refused_on_every_surface(
    surface: Any,
) -> None:
    surface.update_working_memory(resource_id=R, thread_id="t1", working_memory="# Facts\n- peanuts")
    for version in (12, True, ["x"], {"a": 1}):
        call = {
            "id": "w",
            "type": "function",
            "function": {
                "name": TOOL_NAME,
                "arguments": json.dumps({"memory": "# Facts", "version": version}),
            },
        }
        result = surface.apply_tool_call(resource_id=R, thread_id="t1", tool_call=call)
        assert result.parts[0].is_error and result.parts[0].result["success"] is False, repr(version)
    assert surface.get_working_memory(resource_id=R, thread_id="t1") == "# Facts\n- peanuts"
    with pytest.raises(InvalidInput) as err:
        surface.apply_tool_call(
            resource_id=R, thread_id="t1", tool_call=CALLS["openai"], working_memory_version=12
        )
    assert err.value.field == "working_memory_version"


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


# --- one rule per argument on every surface -------------------------------------------------------------


def outcome(call: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """What ``call(*args)`` did, comparable across surfaces: the error's class, field and message, or a summary of
    the answer (a context's rendered messages, a list's length)."""
    try:
        answer = call(*args)
    except MemstackError as exc:
        return (type(exc).__name__, exc.field, exc.message)
    if hasattr(answer, "to_openai"):
        return ("ok", json.dumps(answer.to_openai()["messages"], sort_keys=True))
    if hasattr(answer, "messages"):
        return ("ok", [m.id for m in answer.messages])
    return ("ok", len(answer) if isinstance(answer, list | tuple) else answer)


@pytest.fixture
def reference() -> Iterator[Memory]:
    """A second ``Memory``, set up as each surface's: what every surface must answer."""
    with Memory.local(":memory:", embedder="hash", background="inline", **OPTIONS) as memory:
        yield memory


def seeded(target: Any) -> Any:
    """``target`` with thread ``t1`` of messages ``a``, ``b``, ``c``, ``keep`` (single-letter ids: a string
    taken as a list of ids would name three of them)."""
    target.save_messages(
        resource_id=R,
        thread_id="t1",
        messages=[{"id": i, "role": "user", "content": f"message {i}"} for i in ("a", "b", "c", "keep")],
    )
    return target


LIST_PARAMETERS: dict[str, Callable[[Any, Any], Any]] = {
    "save_messages.messages": lambda s, v: s.save_messages(resource_id=R, thread_id="t1", messages=v),
    "delete_messages.message_ids": lambda s, v: s.delete_messages(resource_id=R, message_ids=v),
    "list_messages.include": lambda s, v: s.list_messages(resource_id=R, thread_id="t1", include=v),
    "context.context": lambda s, v: s.context(resource_id=R, thread_id="t1", message="hi", context=v),
    "context.instructions": lambda s, v: s.context(
        resource_id=R, thread_id="t1", message="hi", instructions=v
    ),
    "inspect_context.context": lambda s, v: (
        s.inspect_context(resource_id=R, thread_id="t1", message="hi", context=v).token_count
    ),
    "inspect_context.instructions": lambda s, v: (
        s.inspect_context(resource_id=R, thread_id="t1", message="hi", instructions=v).token_count
    ),
    "context.message": lambda s, v: s.context(resource_id=R, thread_id="t1", message=v),
}
"""Every list-taking argument of the clients' methods (and ``message``, which takes one message)."""

NOT_LISTS: dict[str, Any] = {
    "str": "abc",
    "dict": {"id": "a"},
    "int": 7,
    "list of str as message": ["a", "b"],
}


@pytest.mark.parametrize("parameter", sorted(LIST_PARAMETERS))
def test_given_a_non_list_for_a_list_argument_when_called_then_every_surface_answers_as_memory(
    surface: Any, reference: Memory, parameter: str
) -> None:
    call = LIST_PARAMETERS[parameter]
    seeded(surface), seeded(reference)
    for given, value in NOT_LISTS.items():
        expected = outcome(call, reference, value)
        assert outcome(call, surface, value) == expected, given
        if not isinstance(value, list):
            stored = surface.list_messages(resource_id=R, thread_id="t1", last=100).messages
            assert [m.id for m in stored][:4] == ["a", "b", "c", "keep"], f"{given} taken as a list of ids"


def test_given_strings_where_memory_wants_lists_then_memory_refuses_them_or_takes_one_message(
    reference: Any,
) -> None:
    seeded(reference)
    with pytest.raises(InvalidInput, match="messages must be a list"):
        reference.save_messages(resource_id=R, thread_id="t1", messages="hello")
    with pytest.raises(InvalidInput, match="message_ids must be a non-empty list"):
        reference.delete_messages(resource_id=R, message_ids="abc")
    with pytest.raises(InvalidInput, match="include must be a list"):
        reference.list_messages(resource_id=R, thread_id="t1", include="x")
    with pytest.raises(InvalidInput, match="message must be an object or a string"):
        reference.context(resource_id=R, thread_id="t1", message=["a", "b"])
    ctx = reference.context(resource_id=R, thread_id="t1", message="hi", context="abc")
    texts = [getattr(m.parts[0], "text", None) for m in ctx.messages[-2:]]
    assert texts == ["abc", "hi"], "one context message, not three"


ODD_IDS = {
    "slash": "a/b",
    "question mark": "q?x",
    "hash": "h#x",
    "dot": ".",
    "dot-dot": "..",
    "emoji": "ü🙂",
    "percent": "50%",
    "control": "tab\tid",
}
"""Ids a path segment cannot carry (``memstack.model.check_routable_id``)."""

ID_CALLS: dict[str, Callable[[Any, str], Any]] = {
    "create_thread": lambda s, i: s.create_thread(resource_id=R, thread_id=i),
    "get_thread": lambda s, i: s.get_thread(resource_id=R, thread_id=i),
    "update_thread": lambda s, i: s.update_thread(resource_id=R, thread_id=i, title="x"),
    "save_messages": lambda s, i: s.save_messages(resource_id=R, thread_id=i, messages=["x"]),
    "list_messages": lambda s, i: s.list_messages(resource_id=R, thread_id=i),
    "context": lambda s, i: s.context(resource_id=R, thread_id=i, message="x"),
    "inspect_context": lambda s, i: s.inspect_context(resource_id=R, thread_id=i, message="x"),
    "recall": lambda s, i: s.recall(resource_id=R, thread_id=i, query="x"),
    "apply_tool_call": lambda s, i: s.apply_tool_call(resource_id=R, thread_id=i, tool_call=CALLS["openai"]),
    "working memory of a thread": lambda s, i: s.get_working_memory(
        resource_id=R, thread_id=i, options={"working_memory": {"scope": "thread"}}
    ),
    "clone_thread.new_thread_id": lambda s, i: s.clone_thread(
        resource_id=R, source_thread_id="t1", new_thread_id=i
    ),
    "clone_thread.target_resource_id": lambda s, i: s.clone_thread(
        resource_id=R, source_thread_id="t1", target_resource_id=i
    ),
    "resource of list_threads": lambda s, i: s.list_threads(resource_id=i),
    "resource of save_messages": lambda s, i: s.save_messages(resource_id=i, thread_id="t1", messages=["x"]),
    "resource of context": lambda s, i: s.context(resource_id=i, thread_id="t1", message="x"),
    "resource of working memory": lambda s, i: s.get_working_memory(resource_id=i),
}
"""Every method that takes a thread or resource id where it is created or read (the removals are below)."""


@pytest.mark.parametrize("method", sorted(ID_CALLS))
def test_given_an_id_no_path_can_carry_when_used_then_every_surface_refuses_it_alike(
    surface: Any, reference: Memory, method: str
) -> None:
    seeded(surface), seeded(reference)
    fields = {"thread_id", "resource_id", "new_thread_id", "target_resource_id"}
    for name, odd in ODD_IDS.items():
        expected = outcome(ID_CALLS[method], reference, odd)
        assert expected[0] == "InvalidInput" and expected[1] in fields, name
        assert outcome(ID_CALLS[method], surface, odd) == expected, name
    assert [t.id for t in surface.list_threads(resource_id=R).threads] == ["t1"], "nothing was created"


@pytest.mark.parametrize("odd", list(ODD_IDS.values()), ids=list(ODD_IDS))
def test_given_an_unroutable_id_when_a_client_removes_by_it_then_refused_before_sending(odd: str) -> None:
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(204)

    with MemstackClient("http://memstack.test", resource_id=R, transport=httpx.MockTransport(record)) as c:
        for remove in (
            lambda: c.delete_thread(thread_id=odd),
            lambda: c.erase_resource(resource_id=odd),
            lambda: c.clone_thread(source_thread_id=odd),
        ):
            with pytest.raises(InvalidInput):
                remove()
    assert sent == []


ODD_MESSAGE_IDS = [i for i in ODD_IDS.values() if i != "tab\tid"]
"""Message ids travel in bodies and queries only: any text is carried."""


def test_given_message_ids_no_path_could_carry_when_saved_listed_and_deleted_then_every_surface_reaches_them(
    surface: Any,
) -> None:
    surface.save_messages(
        resource_id=R,
        thread_id="t1",
        messages=[{"id": i, "role": "user", "content": i} for i in ODD_MESSAGE_IDS],
    )
    page = surface.list_messages(
        resource_id=R, thread_id="t1", last=0, include=[{"id": i} for i in ODD_MESSAGE_IDS]
    )
    assert sorted(m.id for m in page.messages) == sorted(ODD_MESSAGE_IDS)
    assert surface.delete_messages(resource_id=R, message_ids=ODD_MESSAGE_IDS) == len(ODD_MESSAGE_IDS)


WORDING: dict[str, Callable[[Any], Any]] = {
    "role": lambda s: s.save_messages(
        resource_id=R, thread_id="t1", messages=[{"role": "robot", "content": "x"}]
    ),
    "expected_last_seq": lambda s: s.save_messages(
        resource_id=R, thread_id="t1", messages=["x"], expected_last_seq=-5
    ),
    "message id": lambda s: s.save_messages(
        resource_id=R, thread_id="t1", messages=[{"role": "user", "content": "x", "id": ""}]
    ),
    "message metadata": lambda s: s.save_messages(
        resource_id=R, thread_id="t1", messages=[{"role": "user", "content": "x", "metadata": [1]}]
    ),
    "instructions item": lambda s: s.context(
        resource_id=R, thread_id="t1", message="x", instructions=["a", 3]
    ),
    "list_messages limit": lambda s: s.list_messages(resource_id=R, thread_id="t1", limit=0),
    "list_messages last": lambda s: s.list_messages(resource_id=R, thread_id="t1", last=-2),
    "include before": lambda s: s.list_messages(
        resource_id=R, thread_id="t1", include=[{"id": "a", "before": -1}]
    ),
    "list_threads limit": lambda s: s.list_threads(resource_id=R, limit=10**9),
    "list_threads metadata": lambda s: s.list_threads(resource_id=R, metadata="x"),
    "update_thread metadata": lambda s: s.update_thread(resource_id=R, thread_id="t1", metadata="x"),
    "no message ids": lambda s: s.delete_messages(resource_id=R, message_ids=[]),
    "long thread id": lambda s: s.create_thread(resource_id=R, thread_id="x" * 1000),
    "message of another thread": lambda s: s.save_messages(
        resource_id=R, thread_id="t1", messages=[{"role": "user", "content": "x", "thread_id": "other"}]
    ),
    "unknown message key": lambda s: s.context(
        resource_id=R, thread_id="t1", message={"role": "user", "content": "x", "colour": "red"}
    ),
}
"""The faults the clients reported in pydantic's words before the API's errors used the library's."""


def test_given_a_fault_when_any_surface_refuses_it_then_the_words_are_memorys(
    surface: Any, reference: Memory
) -> None:
    seeded(surface), seeded(reference)
    for fault, call in WORDING.items():
        expected = outcome(call, reference)
        assert expected[0] == "InvalidInput", fault
        assert outcome(call, surface) == expected, fault


def test_given_a_context_then_every_surface_names_its_ids_alike(surface: Any) -> None:
    surface.save_messages(resource_id=R, thread_id="old", messages=["My cat is called Whiskers"])
    seeded(surface)
    ctx = surface.context(resource_id=R, thread_id="t1", message="What is my cat called? Whiskers")
    assert ctx.history_ids == ["a", "b", "c", "keep"]
    assert ctx.recalled_ids and all(isinstance(i, str) for i in ctx.recalled_ids)
    assert ctx.message_ids == set(ctx.history_ids) | set(ctx.recalled_ids)


def test_given_a_cancelled_async_save_then_it_lands_whole_or_not_and_a_retry_with_its_ids_stores_nothing_twice() -> (
    None
):
    batch = [{"id": f"m{i}", "role": "user", "content": f"message {i} about boats"} for i in range(200)]
    with Memory.local(":memory:", embedder="hash", background="inline") as memory:
        surface = AsyncMemory(memory)

        async def cancelled() -> None:
            task = asyncio.ensure_future(surface.save_messages(resource_id=R, thread_id="t", messages=batch))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancelled())  # returns once the default executor's worker threads are done
        stored = (
            [m.id for m in memory.list_messages(resource_id=R, thread_id="t", last=1000).messages]
            if any(t.id == "t" for t in memory.list_threads(resource_id=R).threads)
            else []
        )
        assert stored in ([], [m["id"] for m in batch]), "never half-applied"
        asyncio.run(surface.save_messages(resource_id=R, thread_id="t", messages=batch))
        page = memory.list_messages(resource_id=R, thread_id="t", last=1000).messages
        assert [(m.id, m.seq) for m in page] == [(f"m{i}", i + 1) for i in range(200)]


def test_given_a_message_naming_the_calls_own_thread_and_resource_when_saved_then_every_surface_takes_it(
    surface: Any,
) -> None:
    message = {"role": "user", "content": "x", "thread_id": "t1", "resource_id": R}
    assert [
        m.thread_id for m in surface.save_messages(resource_id=R, thread_id="t1", messages=[message])
    ] == ["t1"]
