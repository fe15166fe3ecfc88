"""OpenAIEmbedder and OpenAIChatModel against mocked HTTP (respx): retries, error mapping, batching, order.

Every test runs inside a respx router with ``assert_all_mocked``: a request to a route not mocked fails the
test instead of reaching the network.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
import respx

from memstack.adapters.openai import OpenAIChatModel, OpenAIEmbedder
from memstack.adapters.openai.connection import MAX_DELAY
from memstack.bootstrap import make_embedder
from memstack.errors import InvalidInput, PayloadTooLarge, Unavailable
from memstack.ports import ChatModel, Embedder
from tests.openai_support import chat_body, embeddings_body, error_body

API = "https://api.openai.com/v1"
KEY = "sk-test-SECRET-0123456789"


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=API, assert_all_mocked=True, assert_all_called=False) as router:
        yield router


class Sleeps(list[float]):
    """An injected ``sleep`` that records the waits instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def unit(i: int, dim: int = 3) -> list[float]:
    """A distinct unit vector per ``i``: (cos θ, sin θ, 0, ...) with θ = i / 1000."""
    return [math.cos(i / 1000), math.sin(i / 1000)] + [0.0] * (dim - 2)


def echo_embeddings(request: httpx.Request) -> httpx.Response:
    """Answer each input with ``unit(n)``, where the input is ``"text <n>"``."""
    inputs = json.loads(request.content)["input"]
    dim = json.loads(request.content).get("dimensions", 3)
    return httpx.Response(200, json=embeddings_body([unit(int(t.split()[-1]), dim) for t in inputs]))


def embedder(sleeps: Sleeps, **kwargs: Any) -> OpenAIEmbedder:
    """An embedder with the test key and 3-d vectors unless told otherwise (``dimensions=None`` for native)."""
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("dimensions", 3)
    return OpenAIEmbedder(sleep=sleeps, **kwargs)


def chat(sleeps: Sleeps, **kwargs: Any) -> OpenAIChatModel:
    kwargs.setdefault("api_key", KEY)
    return OpenAIChatModel(sleep=sleeps, **kwargs)


# --- construction ---------------------------------------------------------------------------------------


def test_given_known_model_when_constructed_then_dimension_and_model_id_known_without_a_request(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings")

    small, large, ada = (
        embedder(sleeps, dimensions=None),
        embedder(sleeps, model="text-embedding-3-large", dimensions=None),
        embedder(sleeps, model="text-embedding-ada-002", dimensions=None),
    )

    assert isinstance(small, Embedder)
    assert (small.model_id, small.dimension, small.symmetric) == (
        "openai/text-embedding-3-small@1536",
        1536,
        True,
    )
    assert (large.dimension, ada.dimension) == (3072, 1536)
    assert route.call_count == 0


def test_given_no_key_and_no_client_when_constructed_then_invalid_input_on_api_key() -> None:
    with pytest.raises(InvalidInput) as caught:
        OpenAIEmbedder(api_key=None)
    assert caught.value.field == "api_key"
    with pytest.raises(InvalidInput):
        OpenAIChatModel(api_key="")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"dimensions": 0}, "dimensions"),
        ({"dimensions": 4096}, "dimensions"),
        ({"model": "text-embedding-ada-002", "dimensions": 512}, "dimensions"),
        ({"batch_size": 2049}, "batch_size"),
        ({"timeout": 0}, "timeout"),
        ({"max_retries": -1}, "max_retries"),
    ],
)
def test_given_bad_options_when_constructed_then_invalid_input_names_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        OpenAIEmbedder(api_key=KEY, **kwargs)
    assert caught.value.field == field


def test_given_an_embedder_when_shown_then_the_key_is_not_in_its_repr(sleeps: Sleeps) -> None:
    assert KEY not in repr(embedder(sleeps)) + repr(chat(sleeps)) + repr(embedder(sleeps)._connection)


# --- embeddings: success paths ---------------------------------------------------------------------------


def test_given_texts_when_embedded_then_one_request_with_float_encoding_and_bearer_key(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings").mock(side_effect=echo_embeddings)

    vectors = embedder(sleeps).embed_documents(["text 1", "text 2"])

    assert vectors == [pytest.approx(unit(1)), pytest.approx(unit(2))]
    assert route.call_count == 1
    request = route.calls.last.request
    assert json.loads(request.content) == {
        "model": "text-embedding-3-small",
        "input": ["text 1", "text 2"],
        "encoding_format": "float",
        "dimensions": 3,
    }
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert sleeps == []


def test_given_5000_texts_when_embedded_then_three_requests_and_input_order(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings").mock(side_effect=echo_embeddings)
    texts = [f"text {i}" for i in range(5000)]

    vectors = embedder(sleeps).embed_documents(texts)

    sizes = [len(json.loads(call.request.content)["input"]) for call in route.calls]
    assert sizes == [2048, 2048, 904], "OpenAI embeddings API: max 2048 inputs per request"
    assert len(vectors) == 5000
    for i in (0, 1, 2047, 2048, 4095, 4096, 4999):
        assert vectors[i] == pytest.approx(unit(i)), f"vector {i} out of order"


def test_given_long_texts_when_embedded_then_requests_stay_under_the_character_budget(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings").mock(side_effect=echo_embeddings)
    texts = [("word " * 20_000) + f"text {i}" for i in range(3)]  # ~100,000 characters each

    vectors = embedder(sleeps).embed_documents(texts)

    assert route.call_count == 3
    assert [v == pytest.approx(unit(i)) for i, v in enumerate(vectors)] == [True] * 3


def test_given_response_out_of_index_order_when_embedded_then_vectors_follow_input_order(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    api.post("/embeddings").respond(200, json=embeddings_body([unit(2), unit(0), unit(1)], indexes=[2, 0, 1]))

    vectors = embedder(sleeps).embed_documents(["a", "b", "c"])

    assert vectors == [pytest.approx(unit(0)), pytest.approx(unit(1)), pytest.approx(unit(2))]


def test_given_dimensions_when_embedding_then_sent_to_the_api_and_named_in_model_id(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings").mock(side_effect=echo_embeddings)
    short = embedder(sleeps, dimensions=256)

    vector = short.embed_query("text 7")

    assert json.loads(route.calls.last.request.content)["dimensions"] == 256
    assert (short.dimension, short.model_id, len(vector)) == (256, "openai/text-embedding-3-small@256", 256)


def test_given_empty_texts_when_embedded_then_zero_vectors_and_never_sent(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings").mock(side_effect=echo_embeddings)

    vectors = embedder(sleeps).embed_documents(["", "text 4", "  \n"])

    assert json.loads(route.calls.last.request.content)["input"] == ["text 4"]
    assert vectors == [[0.0, 0.0, 0.0], pytest.approx(unit(4)), [0.0, 0.0, 0.0]]
    assert embedder(sleeps, dimensions=None).embed_query("") == [0.0] * 1536
    assert route.call_count == 1


def test_given_unnormalised_vectors_from_a_compatible_server_then_returned_unit_length(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    api.post("/embeddings").respond(200, json=embeddings_body([[3.0, 4.0, 0.0]]))

    assert embedder(sleeps, dimensions=3).embed_query("x") == pytest.approx([0.6, 0.8, 0.0])


def test_given_unknown_model_when_dimension_read_then_probed_once_and_memoised(sleeps: Sleeps) -> None:
    with respx.mock(base_url="http://localhost:11434/v1", assert_all_mocked=True) as local:
        route = local.post("/embeddings").respond(200, json=embeddings_body([unit(0, 768)]))
        nomic = embedder(
            sleeps, model="nomic-embed-text", dimensions=None, base_url="http://localhost:11434/v1"
        )
        assert route.call_count == 0

        assert (nomic.dimension, nomic.model_id) == (768, "openai/nomic-embed-text@768")
        assert nomic.dimension == 768
        assert route.call_count == 1


def test_given_unknown_model_when_first_embedding_then_dimension_learnt_without_a_probe(
    sleeps: Sleeps,
) -> None:
    with respx.mock(base_url="http://localhost:8000/v1", assert_all_mocked=True) as local:
        route = local.post("/embeddings").respond(200, json=embeddings_body([unit(0, 5), unit(1, 5)]))
        custom = embedder(sleeps, model="my-model", dimensions=None, base_url="http://localhost:8000/v1/")

        custom.embed_documents(["a", "b"])

        assert (custom.dimension, route.call_count) == (5, 1)
        assert route.calls.last.request.url == "http://localhost:8000/v1/embeddings"


# --- embeddings: retries ---------------------------------------------------------------------------------


def test_given_429_with_retry_after_then_success_when_embedding_then_waits_as_told_and_returns(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings").mock(
        side_effect=[
            httpx.Response(
                429, headers={"retry-after": "2"}, json=error_body("Rate limit", type_="requests")
            ),
            httpx.Response(200, json=embeddings_body([unit(3)])),
        ]
    )

    vector = embedder(sleeps).embed_query("hello")

    assert vector == pytest.approx(unit(3))
    assert route.call_count == 2
    assert sleeps == [2.0]


def test_given_429_with_retry_after_ms_then_success_when_embedding_then_waits_those_milliseconds(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    api.post("/embeddings").mock(
        side_effect=[
            httpx.Response(429, headers={"retry-after-ms": "250", "retry-after": "1"}),
            httpx.Response(200, json=embeddings_body([unit(3)])),
        ]
    )

    embedder(sleeps).embed_query("hello")

    assert sleeps == [0.25]


def test_given_retry_after_as_http_date_or_too_long_when_retrying_then_date_honoured_and_wait_capped(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=15), usegmt=True)  # whole seconds
    api.post("/embeddings").mock(
        side_effect=[
            httpx.Response(503, headers={"retry-after": soon}),
            httpx.Response(429, headers={"retry-after": "3600"}),
            httpx.Response(200, json=embeddings_body([unit(3)])),
        ]
    )

    embedder(sleeps).embed_query("hello")

    assert 10.0 <= sleeps[0] <= 15.0  # the date's second, less the time taken (a loaded machine included)
    assert sleeps[1] == MAX_DELAY


def test_given_429s_without_retry_after_when_retrying_then_jittered_exponential_backoff(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    api.post("/embeddings").mock(
        side_effect=[httpx.Response(429)] * 4 + [httpx.Response(200, json=embeddings_body([unit(3)]))]
    )

    embedder(sleeps).embed_query("hello")

    assert len(sleeps) == 4
    for attempt, wait in enumerate(sleeps):
        ceiling = 0.5 * 2**attempt
        assert ceiling / 2 <= wait <= ceiling, f"retry {attempt} waited {wait}s"


def test_given_500s_until_retries_run_out_when_embedding_then_unavailable(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings").respond(500, json=error_body("server error", type_="server_error"))

    with pytest.raises(Unavailable) as caught:
        embedder(sleeps, max_retries=3).embed_query("hello")

    assert route.call_count == 4
    assert len(sleeps) == 3
    assert "HTTP 500" in caught.value.message and "4 attempt" in caught.value.message


def test_given_connection_errors_when_embedding_then_retried_then_unavailable(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings").mock(side_effect=httpx.ConnectError("connection refused"))

    with pytest.raises(Unavailable) as caught:
        embedder(sleeps, max_retries=2).embed_query("hello")

    assert route.call_count == 3
    assert len(sleeps) == 2
    assert "connection failed" in caught.value.message


def test_given_a_timeout_then_success_when_embedding_then_retried(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings").mock(
        side_effect=[httpx.ReadTimeout("slow"), httpx.Response(200, json=embeddings_body([unit(3)]))]
    )

    assert embedder(sleeps, timeout=0.5).embed_query("hello") == pytest.approx(unit(3))
    assert route.call_count == 2 and len(sleeps) == 1


def test_given_zero_retries_when_throttled_then_one_request_and_unavailable(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings").respond(429)

    with pytest.raises(Unavailable):
        embedder(sleeps, max_retries=0).embed_query("hello")

    assert (route.call_count, sleeps) == (1, [])


# --- embeddings: errors that are not retried --------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
def test_given_a_rejected_key_when_embedding_then_invalid_input_on_api_key_without_the_key(
    api: respx.MockRouter, sleeps: Sleeps, status: int
) -> None:
    route = api.post("/embeddings").respond(
        status, json=error_body(f"Incorrect API key provided: {KEY}.", code="invalid_api_key")
    )

    with pytest.raises(InvalidInput) as caught:
        embedder(sleeps).embed_query("hello")

    error = caught.value
    assert error.field == "api_key"
    assert "rejected the API key" in error.message
    assert KEY not in str(error) and KEY not in json.dumps(error.to_dict())
    assert error.__cause__ is None and error.__suppress_context__, (
        "the SDK's error (with the key) is not chained"
    )
    assert (route.call_count, sleeps) == (1, [])


def test_given_a_400_when_embedding_then_invalid_input_naming_the_model(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings").respond(
        400,
        json=error_body(
            "This model's maximum context length is 8192 tokens: secret text", code="context_length_exceeded"
        ),
    )

    with pytest.raises(InvalidInput) as caught:
        embedder(sleeps).embed_query("secret text")

    assert caught.value.field == "texts"
    assert "text-embedding-3-small" in caught.value.message
    assert "context_length_exceeded" in caught.value.message
    assert "secret text" not in caught.value.message, "the endpoint's text may echo the input"
    assert (route.call_count, sleeps) == (1, [])


def test_given_an_unknown_model_when_embedding_then_invalid_input_on_model(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    api.post("/embeddings").respond(404, json=error_body("The model does not exist", code="model_not_found"))

    with pytest.raises(InvalidInput) as caught:
        embedder(sleeps, model="text-embedding-9", dimensions=8).embed_query("hello")

    assert caught.value.field == "model"


def test_given_413_when_embedding_then_payload_too_large(api: respx.MockRouter, sleeps: Sleeps) -> None:
    api.post("/embeddings").respond(413)

    with pytest.raises(PayloadTooLarge):
        embedder(sleeps).embed_query("hello")


def test_given_exhausted_quota_when_embedding_then_unavailable_without_retrying(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/embeddings").respond(
        429,
        json=error_body(
            "You exceeded your current quota", code="insufficient_quota", type_="insufficient_quota"
        ),
    )

    with pytest.raises(Unavailable) as caught:
        embedder(sleeps).embed_query("hello")

    assert "quota" in caught.value.message
    assert (route.call_count, sleeps) == (1, [])


@pytest.mark.parametrize(
    "body",
    [
        embeddings_body([unit(0)]),  # one vector for two texts
        embeddings_body([unit(0), unit(1, 4)]),  # sizes differ
        {"unexpected": True},
    ],
)
def test_given_a_malformed_response_when_embedding_then_unavailable(
    api: respx.MockRouter, sleeps: Sleeps, body: dict[str, Any]
) -> None:
    api.post("/embeddings").respond(200, json=body)

    with pytest.raises(Unavailable):
        embedder(sleeps, dimensions=3).embed_documents(["a", "b"])


UNREADABLE_BODIES = {"not JSON": b"{not json", "empty": b"", "not UTF-8": b'{"data": "\xff\xfe"}'}
"""A 200 answer whose body cannot be read as JSON text."""


@pytest.mark.parametrize("body", list(UNREADABLE_BODIES.values()), ids=list(UNREADABLE_BODIES))
@pytest.mark.parametrize("call", ["embedding", "completion"])
def test_given_a_200_whose_body_is_not_json_then_unavailable_naming_it_as_every_malformed_answer(
    api: respx.MockRouter, sleeps: Sleeps, body: bytes, call: str
) -> None:
    """The SDK parses a 200's body without wrapping its parser's error: the connection maps it, so the
    caller sees the ``Unavailable`` a turn degrades on (keywords only), not a ``JSONDecodeError``."""
    route = "/embeddings" if call == "embedding" else "/chat/completions"
    api.post(route).respond(200, content=body, headers={"content-type": "application/json"})

    with pytest.raises(Unavailable) as err:
        if call == "embedding":
            embedder(sleeps).embed_query("hello")
        else:
            chat(sleeps).complete([{"role": "user", "content": "hi"}])
    assert "unusable response" in err.value.message


# --- chat ------------------------------------------------------------------------------------------------


def test_given_messages_when_completed_then_text_usage_and_request_body(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/chat/completions").respond(
        200, json=chat_body({"role": "assistant", "content": "Hi!"})
    )
    model = chat(sleeps)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]

    result = model.complete(messages, max_output_tokens=50, temperature=0.2)

    assert isinstance(model, ChatModel) and model.model_id == "openai/gpt-4o-mini"
    assert (result.text, result.tool_calls, result.input_tokens, result.output_tokens) == ("Hi!", [], 12, 5)
    assert json.loads(route.calls.last.request.content) == {
        "model": "gpt-4o-mini",
        "messages": messages,
        "max_completion_tokens": 50,
        "temperature": 0.2,
    }


def test_given_a_tool_call_answer_when_completed_then_tool_calls_as_openai_dicts(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "updateWorkingMemory", "arguments": '{"memory": "# User\\n- Name: Ana"}'},
    }
    route = api.post("/chat/completions").respond(
        200, json=chat_body({"role": "assistant", "content": None, "tool_calls": [call]})
    )
    tools = [
        {"type": "function", "function": {"name": "updateWorkingMemory", "parameters": {"type": "object"}}}
    ]

    result = chat(sleeps).complete([{"role": "user", "content": "I am Ana"}], tools=tools)

    assert result.text == ""
    assert result.tool_calls == [call]
    assert json.loads(route.calls.last.request.content)["tools"] == tools


def test_given_a_compatible_endpoint_without_usage_when_completed_then_zero_tokens(sleeps: Sleeps) -> None:
    with respx.mock(base_url="http://localhost:8000/v1", assert_all_mocked=True) as local:
        body = chat_body({"role": "assistant", "content": "ok"})
        del body["usage"]
        route = local.post("/chat/completions").respond(200, json=body)

        result = chat(sleeps, model="llama3", base_url="http://localhost:8000/v1").complete(
            [{"role": "user", "content": "hi"}]
        )

        assert (result.text, result.input_tokens, result.output_tokens) == ("ok", 0, 0)
        assert route.call_count == 1


def test_given_429_then_success_when_completing_then_retried_after_retry_after(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    api.post("/chat/completions").mock(
        side_effect=[
            httpx.Response(429, headers={"retry-after": "1.5"}),
            httpx.Response(200, json=chat_body({"role": "assistant", "content": "done"})),
        ]
    )

    assert chat(sleeps).complete([{"role": "user", "content": "hi"}]).text == "done"
    assert sleeps == [1.5]


def test_given_502s_until_retries_run_out_when_completing_then_unavailable(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/chat/completions").respond(502)

    with pytest.raises(Unavailable):
        chat(sleeps, max_retries=2).complete([{"role": "user", "content": "hi"}])

    assert (route.call_count, len(sleeps)) == (3, 2)


def test_given_connection_errors_when_completing_then_retried_then_unavailable(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = api.post("/chat/completions").mock(side_effect=httpx.ConnectError("refused"))

    with pytest.raises(Unavailable):
        chat(sleeps, max_retries=1).complete([{"role": "user", "content": "hi"}])

    assert (route.call_count, len(sleeps)) == (2, 1)


@pytest.mark.parametrize("body", [{"choices": []}, {"choices": None}, {"choices": [{"index": 0}]}])
def test_given_a_malformed_response_when_completing_then_unavailable(
    api: respx.MockRouter, sleeps: Sleeps, body: dict[str, Any]
) -> None:
    api.post("/chat/completions").respond(200, json=body)

    with pytest.raises(Unavailable):
        chat(sleeps).complete([{"role": "user", "content": "hi"}])


def test_given_a_bad_key_when_completing_then_invalid_input_on_api_key(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    api.post("/chat/completions").respond(401, json=error_body(f"Incorrect API key provided: {KEY}"))

    with pytest.raises(InvalidInput) as caught:
        chat(sleeps).complete([{"role": "user", "content": "hi"}])

    assert caught.value.field == "api_key" and KEY not in str(caught.value)


def test_given_a_400_when_completing_then_invalid_input_on_messages(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    api.post("/chat/completions").respond(400, json=error_body("bad", code="context_length_exceeded"))

    with pytest.raises(InvalidInput) as caught:
        chat(sleeps).complete([{"role": "user", "content": "hi"}])

    assert caught.value.field == "messages" and "gpt-4o-mini" in caught.value.message


# --- bootstrap -------------------------------------------------------------------------------------------


def test_given_env_when_make_embedder_openai_then_key_url_and_model_read_at_call_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:9000/v1")
    monkeypatch.setenv("MEMSTACK_EMBEDDING_MODEL", "text-embedding-3-large")

    made = make_embedder("openai")

    assert isinstance(made, OpenAIEmbedder)
    assert made.model_id == "openai/text-embedding-3-large@3072"
    with respx.mock(base_url="http://localhost:9000/v1", assert_all_mocked=True) as local:
        route = local.post("/embeddings").respond(200, json=embeddings_body([unit(0, 3072)]))
        made.embed_query("hello")
        assert route.calls.last.request.headers["authorization"] == f"Bearer {KEY}"


def test_given_explicit_arguments_when_make_embedder_openai_then_they_win_over_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMSTACK_EMBEDDING_MODEL", "text-embedding-3-large")

    made = make_embedder("openai", api_key=KEY, model="text-embedding-3-small", dimensions=512)

    assert made.model_id == "openai/text-embedding-3-small@512"


def test_given_no_key_anywhere_when_make_embedder_openai_then_invalid_input_on_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    with pytest.raises(InvalidInput) as caught:
        make_embedder("openai")

    assert caught.value.field == "api_key"


def test_given_an_answer_with_a_lone_surrogate_when_completing_then_the_text_is_encodable_utf8(
    api: respx.MockRouter, sleeps: Sleeps
) -> None:
    # half of an emoji's surrogate pair, as a JSON escape: decoded, a str UTF-8 cannot encode
    raw = chat_body({"role": "assistant", "content": "PLACEHOLDER"})
    body = json.dumps(raw).replace("PLACEHOLDER", "* \\ud83d likes hiking \\ud83d\\ude00")
    api.post("/chat/completions").mock(
        return_value=httpx.Response(200, content=body.encode(), headers={"content-type": "application/json"})
    )

    result = chat(sleeps).complete([{"role": "user", "content": "hi"}])

    assert result.text == "* \ufffd likes hiking \U0001f600"
    result.text.encode("utf-8")  # raises UnicodeEncodeError if a lone surrogate got through


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity", "1e400"])
def test_given_a_retry_after_that_is_not_a_finite_number_when_retrying_then_it_is_ignored(
    api: respx.MockRouter, sleeps: Sleeps, header: str, value: str
) -> None:
    """``float`` reads ``inf`` and ``nan``; a wait that is no number of seconds is unreadable, so the backoff
    applies and the failure carries no ``retry_after``."""
    api.post("/embeddings").mock(
        side_effect=[
            httpx.Response(429, headers={header: value}),
            httpx.Response(429, headers={header: value}),
        ]
    )
    with pytest.raises(Unavailable) as err:
        embedder(sleeps, max_retries=1).embed_query("hello")
    assert err.value.retry_after is None
    assert len(sleeps) == 1 and 0 < sleeps[0] <= MAX_DELAY
