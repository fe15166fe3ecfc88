"""``MemstackClient`` without a network: error mapping, URL encoding and SigV4 signing on
``httpx.MockTransport``, and every method against the real resolver (``handle_http``) in-process."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from botocore.credentials import Credentials

from memstack import (
    Conflict,
    Forbidden,
    InvalidInput,
    Memory,
    MemstackError,
    Message,
    NotFound,
    PayloadTooLarge,
    TextPart,
    Throttled,
    ToolCallPart,
    Unavailable,
)
from memstack.api import AuthConfig, create_app, handle_http
from memstack.async_client import AsyncMemstackClient
from memstack.client import MemstackClient, SigV4Auth, error_from_response
from memstack.errors import UnsupportedMediaType
from tests.sigv4_support import expected_signature
from tests.working_memory_support import update_call

BASE = "http://memstack.test"
FAKE = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-example")


def client_for(handler: Callable[[httpx.Request], httpx.Response], **kwargs: Any) -> MemstackClient:
    return MemstackClient(BASE, resource_id="u1", transport=httpx.MockTransport(handler), **kwargs)


def answering(status: int, body: Any, content_type: str = "application/json") -> MemstackClient:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client_for(lambda _: httpx.Response(status, content=raw, headers={"Content-Type": content_type}))


# --- error mapping ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "invalid_input", InvalidInput),
        (415, "unsupported_media_type", UnsupportedMediaType),  # a kind of InvalidInput
        (403, "forbidden", Forbidden),
        (404, "not_found", NotFound),
        (409, "conflict", Conflict),
        (413, "payload_too_large", PayloadTooLarge),
        (429, "throttled", Throttled),
        (503, "unavailable", Unavailable),
    ],
)
def test_given_an_api_error_when_a_method_is_called_then_the_library_exception_of_its_code_is_raised(
    status: int, code: str, cls: type[MemstackError]
) -> None:
    client = answering(status, {"error": {"code": code, "message": "what went wrong", "field": "limit"}})

    with pytest.raises(cls) as raised:
        client.get_thread(thread_id="t1")

    assert type(raised.value) is cls
    assert (raised.value.code, raised.value.message, raised.value.field) == (code, "what went wrong", "limit")
    assert raised.value.status == status


def test_given_an_internal_error_when_called_then_a_memstack_error_with_code_internal() -> None:
    client = answering(500, {"error": {"code": "internal", "message": "internal error"}})

    with pytest.raises(MemstackError) as raised:
        client.health()

    assert (type(raised.value), raised.value.code, raised.value.field) == (MemstackError, "internal", None)


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (403, {"message": "Missing Authentication Token"}, Forbidden),  # API Gateway's own answer
        (429, {"message": "Too Many Requests"}, Throttled),
        (502, b"<html>Bad Gateway</html>", Unavailable),
        (504, {"message": "Endpoint request timed out"}, Unavailable),
    ],
)
def test_given_a_gateway_answer_without_the_error_shape_when_called_then_it_maps_by_status(
    status: int, body: Any, cls: type[MemstackError]
) -> None:
    with pytest.raises(cls) as raised:
        answering(status, body, "text/html" if isinstance(body, bytes) else "application/json").health()

    assert raised.value.status == status
    assert f"HTTP {status}" in raised.value.message


def test_given_an_unknown_error_code_when_mapped_then_the_status_decides_and_the_code_is_kept() -> None:
    response = httpx.Response(409, json={"error": {"code": "some_new_code", "message": "m"}})

    exc = error_from_response(response)

    assert (type(exc), exc.code) == (Conflict, "some_new_code")


def test_given_no_server_when_called_then_unavailable_naming_the_url_and_the_cause() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(
        Unavailable, match=r"did not answer \(GET http://\S+/v1/health\): ConnectError: connection refused"
    ):
        client_for(refuse).health()


def test_given_a_closed_port_when_a_resource_call_is_made_then_the_error_names_url_and_cause_not_the_resource() -> (
    None
):
    from memstack.client import MemstackClient

    with socket.socket() as probe:  # a port nobody listens on: bound, then closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        MemstackClient(f"http://127.0.0.1:{port}", resource_id="user-secret-42", timeout=2) as client,
        pytest.raises(Unavailable) as caught,
    ):
        client.list_threads()

    message = caught.value.message
    assert f"GET http://127.0.0.1:{port}/v1/threads" in message and "ConnectError" in message
    assert "user-secret-42" not in message


def test_given_no_resource_when_a_resource_call_is_made_then_invalid_input_before_any_request() -> None:
    sent: list[httpx.Request] = []
    client = MemstackClient(
        BASE, transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(200))
    )

    with pytest.raises(InvalidInput) as raised:
        client.list_threads()

    assert raised.value.field == "resource_id"
    assert sent == []


# --- URLs -------------------------------------------------------------------------------------------


def test_given_json_and_odd_ids_when_sent_then_path_and_query_use_sigv4_percent_encoding() -> None:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"working_memory": None, "scope": "thread"})

    client = MemstackClient(f"{BASE}/prod/", transport=httpx.MockTransport(record))
    client.get_working_memory(
        thread_id="a b(c+é",
        resource_id="user 1",
        options={"working_memory": {"scope": "thread", "template": "# Notes: x+y"}},
    )

    raw = seen[0].url.raw_path.decode()
    assert raw.startswith(
        "/prod/v1/threads/a%20b%28c%2B%C3%A9/working-memory?resource_id=user%201&options=%7B"
    )
    assert "+" not in raw, "spaces are %20 (SigV4 canonical form), a literal + is %2B"
    assert parse_qs(urlsplit(str(seen[0].url)).query)["options"] == [
        '{"working_memory":{"scope":"thread","template":"# Notes: x+y"}}'
    ]


# --- SigV4 ------------------------------------------------------------------------------------------


def test_given_sigv4_when_a_request_is_sent_then_it_carries_an_execute_api_signature_that_verifies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")  # the execute-api URL's region wins over the environment's
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"messages": []})

    url = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"
    client = MemstackClient(
        url, resource_id="u 1", sigv4={"credentials": FAKE}, transport=httpx.MockTransport(record)
    )
    client.save_messages(thread_id="t1", messages=["hello"])

    request = seen[0]
    authorization = request.headers["Authorization"]
    date = request.headers["X-Amz-Date"]
    assert authorization.startswith(
        f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{date[:8]}/eu-west-1/execute-api/aws4_request, "
    )
    assert "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token," in authorization
    assert request.headers["X-Amz-Security-Token"] == "session-token-example"

    # the server's check: recompute the signature over what was actually sent
    expected = expected_signature(request, FAKE, "eu-west-1")
    assert authorization.endswith(f"Signature={expected}")


def test_given_sigv4_without_any_region_when_built_then_invalid_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")

    with pytest.raises(InvalidInput, match="region") as raised:
        MemstackClient("http://127.0.0.1:8765", sigv4={"credentials": FAKE})

    assert raised.value.field == "sigv4"


def test_given_an_explicit_region_and_service_when_signing_then_the_scope_names_them() -> None:
    auth = SigV4Auth(FAKE, region="us-west-2", service="execute-api")
    request = httpx.Request("GET", "http://127.0.0.1:8765/v1/health")

    signed = next(auth.auth_flow(request))

    assert "/us-west-2/execute-api/aws4_request" in signed.headers["Authorization"]


# --- every method against the real resolver (in-process, no socket) ---------------------------------


def client_over(memory: Memory) -> MemstackClient:
    """A client whose requests the real resolver over ``memory`` answers in-process."""
    app = create_app(memory, auth=AuthConfig())

    def serve(request: httpx.Request) -> httpx.Response:
        url = request.url
        answer = handle_http(
            app,
            request.method,
            url.raw_path.decode().split("?")[0],
            url.query.decode(),
            list(request.headers.items()),
            request.content,
        )
        return httpx.Response(answer.status, headers=answer.headers, content=answer.body)

    return MemstackClient(BASE, resource_id="u1", transport=httpx.MockTransport(serve))


@pytest.fixture
def local() -> Iterator[MemstackClient]:
    memory = Memory.local(":memory:", embedder="hash")
    with client_over(memory) as client:
        yield client
    memory.close()


def test_given_the_resolver_when_threads_are_managed_then_the_library_types_come_back(
    local: MemstackClient,
) -> None:
    created = local.create_thread(thread_id="t1", title="Trip", metadata={"kind": "travel"})
    assert (created.id, created.resource_id, created.title) == ("t1", "u1", "Trip")
    assert local.get_thread(thread_id="t1") == created

    updated = local.update_thread(thread_id="t1", metadata={"stage": 2})
    assert updated.metadata == {"kind": "travel", "stage": 2}

    local.save_messages(thread_id="t1", messages=["one", {"role": "assistant", "content": "two"}])
    clone = local.clone_thread(source_thread_id="t1", new_thread_id="t2", message_limit=1)
    assert clone.thread.id == "t2"
    assert [m.text for m in clone.messages] == ["two"]
    assert set(clone.message_id_map.values()) == {clone.messages[0].id}
    moved = local.clone_thread(source_thread_id="t1", new_thread_id="t3", target_resource_id="u1b")
    assert (moved.thread.resource_id, [m.text for m in moved.messages]) == ("u1b", ["one", "two"])
    assert local.get_thread(thread_id="t3", resource_id="u1b").resource_id == "u1b"

    page = local.list_threads(limit=1, metadata={"kind": "travel"})
    assert len(page.threads) == 1 and page.next_cursor is not None
    rest = local.list_threads(limit=1, cursor=page.next_cursor, metadata={"kind": "travel"})
    assert {page.threads[0].id, rest.threads[0].id} == {"t1", "t2"}

    local.delete_thread(thread_id="t2")
    with pytest.raises(NotFound):
        local.get_thread(thread_id="t2")


def test_given_the_resolver_when_a_resource_is_erased_then_the_receipt_comes_back_and_zeros_the_second_time(
    local: MemstackClient,
) -> None:
    from memstack import EraseReceipt

    local.save_messages(thread_id="t1", messages=["one", "two"])
    local.update_working_memory(
        thread_id="t1", working_memory="# Notes", options={"working_memory": {"enabled": True}}
    )

    receipt = local.erase_resource()

    assert receipt.resource_id == "u1"
    assert (receipt.counts["threads"], receipt.counts["messages"], receipt.counts["working_memory"]) == (
        1,
        2,
        1,
    )
    assert local.list_threads().threads == ()
    assert local.erase_resource(resource_id="u1") == EraseReceipt(resource_id="u1")


def test_given_a_resource_id_the_api_cannot_route_when_erased_then_invalid_input_before_any_request() -> None:
    sent: list[httpx.Request] = []
    client = client_for(lambda request: sent.append(request) or httpx.Response(200))

    with pytest.raises(InvalidInput) as raised:
        client.erase_resource(resource_id="a/b")

    assert raised.value.field == "resource_id" and sent == []


def test_given_the_resolver_when_messages_flow_then_save_list_include_recall_and_delete_work(
    local: MemstackClient,
) -> None:
    when = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    message = Message(  # of this thread and resource, as Memory requires of a Message it is given
        id="m1",
        thread_id="t1",
        resource_id=local.resource_id,
        role="user",
        parts=(TextPart(text="I keep bees"),),
        created_at=when,
    )
    saved = local.save_messages(thread_id="t1", messages=[message, "my hives are in the garden", "ok"])
    assert [(m.id == "m1", m.seq, m.thread_id) for m in saved][0] == (True, 1, "t1")
    assert saved[0].created_at == when

    last = local.list_messages(thread_id="t1", last=2)
    assert [m.text for m in last.messages] == ["my hives are in the garden", "ok"]
    with_neighbour = local.list_messages(thread_id="t1", last=1, include=[{"id": "m1", "after": 0}])
    assert [m.id for m in with_neighbour.messages][0] == "m1"

    found = local.recall(thread_id="t2", query="bees hives garden")
    assert "m1" in {h.message_id for h in found.hits}
    assert {m.id for m in found.messages} >= {"m1"}

    assert local.delete_messages(message_ids=["m1", "missing"]) == 1
    assert [m.text for m in local.list_messages(thread_id="t1").messages] == [
        "my hives are in the garden",
        "ok",
    ]


def test_given_the_resolver_when_context_is_assembled_then_to_openai_matches_the_library(
    local: MemstackClient,
) -> None:
    local.save_messages(
        thread_id="t1", messages=["I'm allergic to peanuts.", {"role": "assistant", "content": "Noted."}]
    )
    options = {"working_memory": {"enabled": True}}

    ctx = local.context(
        thread_id="t1", message="Snack ideas?", instructions="Be brief.", options=options, count_tokens=True
    )

    assert [s.kind for s in ctx.system][0] == "instructions"
    assert [m.text for m in ctx.messages] == ["I'm allergic to peanuts.", "Noted.", "Snack ideas?"]
    assert ctx.token_count is not None and ctx.token_count > 0
    rendered = ctx.to_openai()
    assert set(rendered) == {"messages", "tools"}
    assert rendered["messages"][0]["role"] == "system"
    assert rendered["messages"][-1] == {"role": "user", "content": "Snack ideas?"}
    assert [t["function"]["name"] for t in rendered["tools"]] == ["updateWorkingMemory"]
    assert set(ctx.history_ids) <= ctx.message_ids

    plain = local.context(thread_id="t9", resource_id="u2", message="hi")
    assert plain.to_openai() == {"messages": [{"role": "user", "content": "hi"}]}, "no tools key when none"


def test_given_the_resolver_when_working_memory_is_written_then_both_scopes_and_tool_calls_work(
    local: MemstackClient,
) -> None:
    on = {"working_memory": {"enabled": True}}  # the server's options leave it off: the call turns it on
    local.update_working_memory(thread_id="t1", working_memory="# User\n- name: Ada", options=on)
    assert local.get_working_memory(thread_id="t1", options=on) == "# User\n- name: Ada"

    local.create_thread(thread_id="t1")
    thread_scope = {"working_memory": {"enabled": True, "scope": "thread"}}
    local.update_working_memory(thread_id="t1", working_memory="# Trip\n- to: Rome", options=thread_scope)
    assert local.get_working_memory(thread_id="t1", options=thread_scope) == "# Trip\n- to: Rome"
    assert local.get_working_memory(thread_id="t1", options=on) == "# User\n- name: Ada"

    call = ToolCallPart(id="call_1", name="updateWorkingMemory", args={"memory": "# User\n- name: Ada L."})
    result = local.apply_tool_call(thread_id="t1", tool_call=call, options=on)
    assert result.role == "tool"
    assert local.get_working_memory(thread_id="t1", options=on) == "# User\n- name: Ada L."

    with pytest.raises(NotFound):
        local.get_working_memory(thread_id="nope", options=thread_scope)
    assert local.health()["status"] == "ok"

    # as with Memory, resource scope needs no thread, thread scope refuses to go without one
    local.update_working_memory(working_memory="# User\n- name: Ada B.", options=on)
    assert local.get_working_memory(options=on) == "# User\n- name: Ada B."
    with pytest.raises(InvalidInput) as err:
        local.get_working_memory(options=thread_scope)
    assert err.value.field == "thread_id"


@pytest.mark.parametrize("thread_id", ["a/b", "a#b", "a?b", "a\\b", "a€b", "a\u200bb", ".", "..", ""])
def test_given_a_thread_id_the_api_cannot_route_when_called_then_invalid_input_before_any_request(
    thread_id: str,
) -> None:
    sent: list[httpx.Request] = []
    client = client_for(lambda r: sent.append(r) or httpx.Response(200, json={}))
    calls: list[Callable[[], object]] = [
        lambda: client.get_thread(thread_id=thread_id),
        lambda: client.create_thread(thread_id=thread_id),
        lambda: client.save_messages(thread_id=thread_id, messages=["hi"]),
        lambda: client.context(thread_id=thread_id, message="hi"),
        lambda: client.recall(thread_id=thread_id, query="q"),
        lambda: client.clone_thread(source_thread_id=thread_id),
        lambda: client.get_working_memory(
            thread_id=thread_id, options={"working_memory": {"scope": "thread"}}
        ),
        lambda: client.get_observations(thread_id=thread_id),
        lambda: client.apply_recall_tool(thread_id=thread_id, tool_call=recall_call(cursor="m1")),
    ]
    for call in calls:
        with pytest.raises(InvalidInput) as raised:
            call()
        assert raised.value.field == "thread_id"
    with pytest.raises(InvalidInput) as clone:
        client.clone_thread(source_thread_id="ok", new_thread_id=thread_id)
    assert clone.value.field == "new_thread_id"
    assert sent == []


def test_given_every_character_the_routes_take_when_a_thread_is_used_then_it_round_trips(
    local: MemstackClient,
) -> None:
    from memstack.api.ids import ROUTABLE_SPECIALS

    thread_id = "t" + ROUTABLE_SPECIALS + "ü"
    assert local.create_thread(thread_id=thread_id).id == thread_id
    assert local.get_thread(thread_id=thread_id).id == thread_id
    assert [m.thread_id for m in local.save_messages(thread_id=thread_id, messages=["hi"])] == [thread_id]
    assert local.clone_thread(source_thread_id=thread_id, new_thread_id=thread_id + "2").thread.id == (
        thread_id + "2"
    )
    local.delete_thread(thread_id=thread_id)
    with pytest.raises(NotFound):
        local.get_thread(thread_id=thread_id)


@pytest.mark.parametrize(
    ("answer", "call"),
    [
        ({"id": 5}, lambda c: c.get_thread(thread_id="t")),
        ({"hits": [{"message_id": "m"}], "messages": []}, lambda c: c.recall(thread_id="t", query="q")),
        ([1, 2], lambda c: c.list_threads()),
        ({"messages": "nope"}, lambda c: c.save_messages(thread_id="t", messages=["x"])),
        ({"system": None}, lambda c: c.context(thread_id="t")),
        ("text", lambda c: c.health()),
        ({"deleted": "many"}, lambda c: c.delete_messages(message_ids=["m"])),
        ({"record": {"scope": "thread"}}, lambda c: c.get_observations(thread_id="t")),
        ({"observations": None}, lambda c: c.get_observations(thread_id="t")),
        ({"messages": []}, lambda c: c.apply_recall_tool(thread_id="t", tool_call=recall_call())),
    ],
)
def test_given_an_answer_of_an_unexpected_shape_then_unavailable_not_a_pydantic_or_key_error(
    answer: Any, call: Callable[[MemstackClient], Any]
) -> None:
    with pytest.raises(Unavailable, match="unexpected shape"):
        call(answering(200, answer))


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ReadTimeout("slow"),
        httpx.RemoteProtocolError("garbled"),
        httpx.DecodingError("bad gzip"),
        httpx.TooManyRedirects("loop"),
    ],
)
def test_given_any_httpx_failure_when_called_then_unavailable(failure: Exception) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise failure

    with pytest.raises(Unavailable):
        client_for(fail).list_threads()


def test_given_values_json_cannot_hold_when_sent_then_invalid_input_naming_the_body() -> None:
    client = client_for(lambda r: httpx.Response(201, json={}))
    with pytest.raises(InvalidInput) as raised:
        client.create_thread(thread_id="t", metadata={"when": object()})
    assert raised.value.field == "body"


def test_given_recall_over_the_resolver_then_hits_carry_seq(local: MemstackClient) -> None:
    local.save_messages(thread_id="t1", messages=["filler", "I keep bees in the garden"])
    hits = local.recall(thread_id="t2", query="bees garden").hits
    assert hits and {h.message_id: h.seq for h in hits} == {
        m.id: m.seq
        for m in local.list_messages(thread_id="t1").messages
        if m.id in {h.message_id for h in hits}
    }
    assert all(h.seq >= 1 for h in hits)


# --- observational memory over the resolver --------------------------------------------------------

OM: dict[str, Any] = {
    "observation": {"message_tokens": 1_000, "buffer_tokens": False},
    "retrieval": {"scope": "thread"},
}


def recall_call(**args: Any) -> dict[str, Any]:
    return {"id": "call-1", "type": "function", "function": {"name": "recall", "arguments": json.dumps(args)}}


@pytest.fixture
def observing() -> Iterator[MemstackClient]:
    """A client over a ``Memory`` with observational memory on, a scripted Observer, and inline
    background work (a save that crosses the threshold has observed before it answers)."""
    from memstack.adapters.testing import ScriptedChatModel
    from tests.observation_support import om_memory

    memory = om_memory(ScriptedChatModel(), observational_memory=OM)
    with client_over(memory) as client:
        yield client
    memory.close()


def test_given_an_observed_thread_when_observations_and_recall_are_asked_then_library_types_come_back(
    observing: MemstackClient,
) -> None:
    from memstack.client import RemoteObservations

    observing.save_messages(thread_id="t1", messages=["hello"])
    assert observing.get_observations(thread_id="t1") is None, "nothing observed yet"
    for i in range(2, 46):  # about 25 tokens each: past the 1,000-token threshold
        text = f"Message {i}: I went hiking near lake number {i} with my sister and we talked about painting classes."
        observing.save_messages(thread_id="t1", messages=[{"id": f"m{i}", "role": "user", "content": text}])

    record = observing.get_observations(thread_id="t1")

    assert isinstance(record, RemoteObservations)
    assert record.scope == "thread" and record.origin_type == "initial"
    assert record.observed_seq > 0 and record.observation_tokens > 0 and record.active_observations
    assert record.updated_at is not None and record.updated_at.tzinfo is not None
    assert record.usage.observer_calls >= 1, "what the thread cost comes back too"
    result = observing.apply_recall_tool(
        thread_id="t1", tool_call=recall_call(cursor="m2", limit=2), options={"observational_memory": OM}
    )
    assert isinstance(result, Message) and result.role == "tool"
    part = result.parts[0]
    assert [m["id"] for m in part.result["messages"]] == ["m2", "m3"]
    as_part = observing.apply_recall_tool(
        thread_id="t1",
        tool_call=ToolCallPart(id="c2", name="recall", args={"cursor": "m2", "limit": 1}),
        options={"observational_memory": OM},
    )
    assert as_part.parts[0].tool_call_id == "c2"


def test_given_the_recall_route_when_misused_then_library_errors(observing: MemstackClient) -> None:
    observing.save_messages(thread_id="t1", messages=["hello"])
    with pytest.raises(NotFound):
        observing.get_observations(thread_id="t1", resource_id="someone-else")
    wrong = {"id": "c1", "type": "function", "function": {"name": "updateWorkingMemory", "arguments": "{}"}}
    with pytest.raises(InvalidInput) as raised:
        observing.apply_recall_tool(thread_id="t1", tool_call=wrong, options={"observational_memory": OM})
    assert (raised.value.field, raised.value.status) == ("tool_call.function.name", 400)


def test_given_the_client_when_a_turn_is_stale_then_the_save_and_the_tool_call_are_refused_as_in_the_library(
    local: MemstackClient,
) -> None:
    options = {"working_memory": {"enabled": True}}
    ctx = local.context(thread_id="t1", message="hi", options=options)
    other = local.context(thread_id="t1", message="hi", options=options)
    assert ctx.last_seq == 0 and ctx.working_memory_version is not None

    local.save_messages(thread_id="t1", messages=["one"], expected_last_seq=ctx.last_seq)
    with pytest.raises(Conflict):
        local.save_messages(thread_id="t1", messages=["two"], expected_last_seq=ctx.last_seq)

    first = local.apply_tool_call(
        thread_id="t1", tool_call=update_call("a", "- tea"), options=options, context=ctx
    )
    refused = local.apply_tool_call(
        thread_id="t1", tool_call=update_call("b", "- Oslo"), options=options, context=other
    )
    assert first.parts[0].result["success"] is True
    assert refused.parts[0].result["current_memory"] == "- tea"
    redo = local.apply_tool_call(
        thread_id="t1", tool_call=update_call("c", "- tea\n- Oslo"), options=options, context=other
    )
    assert redo.parts[0].result["success"] is True


@pytest.mark.parametrize("client_class", [MemstackClient, AsyncMemstackClient])
def test_given_a_method_of_memory_when_the_client_has_it_then_it_takes_the_same_arguments_optional_alike(
    client_class: type,
) -> None:
    """Code written for ``Memory`` runs on the clients (README): every argument of a shared method exists
    on the client, and one ``Memory`` lets a caller omit can be omitted there too (``resource_id`` may
    become optional on a client, which defaults it to its own)."""
    import inspect

    from memstack.memory import Memory

    shared = [
        name
        for name, _ in inspect.getmembers(Memory, predicate=inspect.isfunction)
        if not name.startswith("_") and hasattr(client_class, name)
    ]
    assert {"context", "save_messages", "get_working_memory", "clone_thread"} <= set(shared)
    differences = []
    for name in shared:
        ours = inspect.signature(getattr(Memory, name)).parameters
        theirs = inspect.signature(getattr(client_class, name)).parameters
        for arg, param in ours.items():
            if arg == "self":
                continue
            if arg not in theirs:
                differences.append(f"{name}: no {arg}")
            elif (
                param.default is not inspect.Parameter.empty
                and theirs[arg].default is inspect.Parameter.empty
            ):
                differences.append(f"{name}: {arg} is required on the client, optional in Memory")
    assert differences == []
