"""BedrockEmbedder and BedrockChatModel against a real ``bedrock-runtime`` client under
``botocore.stub.Stubber``: exact request bodies, batching, retries and the error mapping.

The Stubber checks every call's parameters against the ones a test expects and fails on any call it was
not told about, so nothing reaches the network.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from memstack.adapters.bedrock import BedrockChatModel, BedrockEmbedder
from memstack.adapters.bedrock.chat import supports_prompt_cache
from memstack.bootstrap import chat_model_for, make_chat_model, make_embedder
from memstack.errors import InvalidInput, Unavailable
from memstack.ports import ChatModel, Embedder
from memstack.settings import load_settings

TITAN = "amazon.titan-embed-text-v2:0"
COHERE = "cohere.embed-english-v3"


class Sleeps(list[float]):
    """An injected ``sleep`` that records the waits instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def client() -> Iterator[Any]:
    runtime = boto3.session.Session(
        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="us-east-1"
    ).client("bedrock-runtime")
    yield runtime
    runtime.close()


@pytest.fixture
def stub(client: Any) -> Iterator[Stubber]:
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def body(data: dict[str, Any]) -> dict[str, Any]:
    raw = json.dumps(data).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


def invoke(model: str, request: dict[str, Any]) -> dict[str, Any]:
    return {
        "modelId": model,
        "body": json.dumps(request, ensure_ascii=False),
        "contentType": "application/json",
        "accept": "application/json",
    }


def vector(i: int, dim: int) -> list[float]:
    return [float(i + 1)] + [1.0] * (dim - 1)


def titan_request(text: str, dim: int = 1024) -> dict[str, Any]:
    return {"inputText": text, "normalize": True, "embeddingTypes": ["float"], "dimensions": dim}


# --- embedder: Titan -------------------------------------------------------------------------------------


def test_given_titan_when_constructed_then_dimension_model_id_and_symmetry_known_without_a_request(
    client: Any, stub: Stubber
) -> None:
    embedder = BedrockEmbedder(TITAN, dimensions=256, client=client)
    assert (embedder.dimension, embedder.model_id, embedder.symmetric) == (
        256,
        f"bedrock/{TITAN}@256",
        True,
    )
    assert isinstance(embedder, Embedder)


def test_given_titan_when_documents_embedded_then_one_exact_request_per_text_in_order(
    client: Any, stub: Stubber, sleeps: Sleeps
) -> None:
    for i, text in enumerate(["alpha", "beta", "gamma"]):
        stub.add_response(
            "invoke_model",
            body({"embedding": vector(i, 256), "inputTextTokenCount": 1}),
            invoke(TITAN, titan_request(text, 256)),
        )
    embedder = BedrockEmbedder(TITAN, dimensions=256, client=client, concurrency=1, sleep=sleeps)

    vectors = embedder.embed_documents(["alpha", "beta", "gamma"])

    assert [round(v[0] / v[1], 6) for v in vectors] == [1.0, 2.0, 3.0]
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0) for v in vectors)
    assert sleeps == []


def test_given_titan_embeddings_by_type_when_embedded_then_the_float_vector_is_used(
    client: Any, stub: Stubber
) -> None:
    stub.add_response(
        "invoke_model",
        body({"embeddingsByType": {"float": vector(4, 512)}, "embedding": vector(0, 512)}),
        invoke(TITAN, titan_request("hello", 512)),
    )
    [v] = BedrockEmbedder(TITAN, dimensions=512, client=client).embed_documents(["hello"])
    assert round(v[0] / v[1], 6) == 5.0


def test_given_empty_texts_when_embedded_then_zero_vectors_and_never_sent(client: Any, stub: Stubber) -> None:
    stub.add_response(
        "invoke_model", body({"embedding": vector(0, 256)}), invoke(TITAN, titan_request("x", 256))
    )
    vectors = BedrockEmbedder(TITAN, dimensions=256, client=client).embed_documents(["", "x", "  "])
    assert vectors[0] == [0.0] * 256 and vectors[2] == [0.0] * 256
    assert math.isclose(math.fsum(x * x for x in vectors[1]), 1.0)


def test_given_a_dimension_titan_does_not_offer_when_constructed_then_invalid_input_on_dimensions() -> None:
    with pytest.raises(InvalidInput) as err:
        BedrockEmbedder(TITAN, dimensions=768)
    assert err.value.field == "dimensions" and "256, 512, 1024" in err.value.message


def test_given_an_unsupported_model_when_constructed_then_invalid_input_on_model() -> None:
    with pytest.raises(InvalidInput) as err:
        BedrockEmbedder("amazon.titan-embed-image-v1")
    assert err.value.field == "model"


def test_given_an_inference_profile_id_when_constructed_then_its_family_is_recognised() -> None:
    embedder = BedrockEmbedder("us.cohere.embed-v4:0", dimensions=512)
    assert (embedder.dimension, embedder.symmetric) == (512, False)


def test_given_a_vector_of_the_wrong_size_when_embedded_then_unavailable(client: Any, stub: Stubber) -> None:
    stub.add_response(
        "invoke_model", body({"embedding": vector(0, 10)}), invoke(TITAN, titan_request("x", 256))
    )
    with pytest.raises(Unavailable, match="another size"):
        BedrockEmbedder(TITAN, dimensions=256, client=client).embed_documents(["x"])


def test_given_a_body_that_is_not_json_when_embedded_then_unavailable(client: Any, stub: Stubber) -> None:
    raw = b"<html>"
    stub.add_response(
        "invoke_model",
        {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "text/html"},
        invoke(TITAN, titan_request("x", 256)),
    )
    with pytest.raises(Unavailable, match="unusable response"):
        BedrockEmbedder(TITAN, dimensions=256, client=client).embed_documents(["x"])


# --- embedder: Cohere ------------------------------------------------------------------------------------


def cohere_request(texts: list[str], input_type: str) -> dict[str, Any]:
    return {"texts": texts, "input_type": input_type, "truncate": "END", "embedding_types": ["float"]}


def test_given_cohere_when_100_documents_embedded_then_two_batched_requests_as_search_document(
    client: Any, stub: Stubber
) -> None:
    texts = [f"text {i}" for i in range(100)]
    for start, stop in ((0, 96), (96, 100)):
        stub.add_response(
            "invoke_model",
            body(
                {
                    "id": "x",
                    "response_type": "embeddings_by_type",
                    "embeddings": {"float": [vector(i, 1024) for i in range(start, stop)]},
                }
            ),
            invoke(COHERE, cohere_request(texts[start:stop], "search_document")),
        )
    embedder = BedrockEmbedder(COHERE, client=client)

    vectors = embedder.embed_documents(texts)

    assert len(vectors) == 100 and round(vectors[99][0] / vectors[99][1], 6) == 100.0
    assert embedder.symmetric is False and embedder.dimension == 1024


def test_given_cohere_when_a_query_embedded_then_input_type_is_search_query(
    client: Any, stub: Stubber
) -> None:
    stub.add_response(
        "invoke_model",
        body({"embeddings": [vector(0, 1024)], "response_type": "embeddings_floats"}),
        invoke(COHERE, cohere_request(["where is it?"], "search_query")),
    )
    v = BedrockEmbedder(COHERE, client=client).embed_query("where is it?")
    assert len(v) == 1024


def test_given_cohere_v4_with_dimensions_when_embedded_then_output_dimension_is_sent(
    client: Any, stub: Stubber
) -> None:
    model = "cohere.embed-v4:0"
    stub.add_response(
        "invoke_model",
        body({"embeddings": {"float": [vector(0, 256)]}}),
        invoke(model, {**cohere_request(["a"], "search_document"), "output_dimension": 256}),
    )
    [v] = BedrockEmbedder(model, dimensions=256, client=client).embed_documents(["a"])
    assert len(v) == 256


def test_given_cohere_returns_fewer_vectors_than_texts_when_embedded_then_unavailable(
    client: Any, stub: Stubber
) -> None:
    stub.add_response(
        "invoke_model",
        body({"embeddings": [vector(0, 1024)]}),
        invoke(COHERE, cohere_request(["a", "b"], "search_document")),
    )
    with pytest.raises(Unavailable, match="1 vectors for 2 texts"):
        BedrockEmbedder(COHERE, client=client).embed_documents(["a", "b"])


# --- errors and retries ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ThrottlingException", 429),
        ("ModelNotReadyException", 429),
        ("ServiceUnavailableException", 503),
        ("InternalServerException", 500),
        ("ModelTimeoutException", 408),
    ],
)
def test_given_a_retryable_error_then_success_when_embedding_then_retried_after_a_backoff(
    client: Any, stub: Stubber, sleeps: Sleeps, code: str, status: int
) -> None:
    stub.add_client_error(
        "invoke_model", code, "slow down", status, expected_params=invoke(TITAN, titan_request("x", 256))
    )
    stub.add_response(
        "invoke_model", body({"embedding": vector(0, 256)}), invoke(TITAN, titan_request("x", 256))
    )

    [v] = BedrockEmbedder(TITAN, dimensions=256, client=client, sleep=sleeps).embed_documents(["x"])

    assert len(v) == 256
    assert len(sleeps) == 1 and 0.25 <= sleeps[0] <= 0.5


def test_given_throttling_until_retries_run_out_when_embedding_then_unavailable_naming_the_code(
    client: Any, stub: Stubber, sleeps: Sleeps
) -> None:
    for _ in range(3):
        stub.add_client_error("invoke_model", "ThrottlingException", "Too many requests", 429)
    embedder = BedrockEmbedder(TITAN, dimensions=256, client=client, max_retries=2, sleep=sleeps)
    with pytest.raises(Unavailable) as err:
        embedder.embed_documents(["x"])
    assert "3 attempt(s): ThrottlingException" in err.value.message
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0] * 0.9


@pytest.mark.parametrize(
    ("code", "status", "error", "field"),
    [
        ("ValidationException", 400, InvalidInput, "texts"),
        ("AccessDeniedException", 403, InvalidInput, "model"),
        ("ResourceNotFoundException", 404, InvalidInput, "model"),
        ("ServiceQuotaExceededException", 400, Unavailable, None),
    ],
)
def test_given_an_error_retrying_cannot_mend_when_embedding_then_mapped_at_once(
    client: Any,
    stub: Stubber,
    sleeps: Sleeps,
    code: str,
    status: int,
    error: type[Exception],
    field: str | None,
) -> None:
    stub.add_client_error("invoke_model", code, "Input text: 'my secret words' is too long", status)
    with pytest.raises(error) as err:
        BedrockEmbedder(TITAN, dimensions=256, client=client, sleep=sleeps).embed_documents(
            ["my secret words"]
        )
    assert sleeps == []
    assert getattr(err.value, "field", None) == field
    assert "secret words" not in str(err.value)  # Bedrock's text may quote the input: never passed on


# --- chat ------------------------------------------------------------------------------------------------

OBSERVER_PROMPT = [
    {"role": "system", "content": "You are the Observer. Long stable instructions."},
    {"role": "user", "content": "Observe these messages."},
]


def converse_answer(content: list[dict[str, Any]], usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "end_turn",
        "usage": usage or {"inputTokens": 120, "outputTokens": 7, "totalTokens": 127},
        "metrics": {"latencyMs": 10},
    }


def test_given_a_caching_model_when_completed_then_exact_converse_request_with_a_cache_point(
    client: Any, stub: Stubber
) -> None:
    stub.add_response(
        "converse",
        converse_answer([{"text": "* 🔴 user likes tea"}]),
        {
            "modelId": "amazon.nova-lite-v1:0",
            "system": [
                {"text": "You are the Observer. Long stable instructions."},
                {"cachePoint": {"type": "default"}},
            ],
            "messages": [{"role": "user", "content": [{"text": "Observe these messages."}]}],
            "inferenceConfig": {"maxTokens": 500, "temperature": 0.3},
        },
    )
    model = BedrockChatModel(client=client)

    answer = model.complete(OBSERVER_PROMPT, max_output_tokens=500, temperature=0.3)

    assert (answer.text, answer.input_tokens, answer.output_tokens) == ("* 🔴 user likes tea", 120, 7)
    assert answer.tool_calls == [] and isinstance(model, ChatModel)
    assert model.model_id == "bedrock/amazon.nova-lite-v1:0"


def test_given_a_model_without_prompt_caching_when_completed_then_no_cache_point(
    client: Any, stub: Stubber
) -> None:
    model_id = "anthropic.claude-3-haiku-20240307-v1:0"
    stub.add_response(
        "converse",
        converse_answer([{"text": "ok"}]),
        {
            "modelId": model_id,
            "system": [{"text": "You are the Observer. Long stable instructions."}],
            "messages": [{"role": "user", "content": [{"text": "Observe these messages."}]}],
        },
    )
    assert BedrockChatModel(model_id, client=client).complete(OBSERVER_PROMPT).text == "ok"
    assert supports_prompt_cache("us.anthropic.claude-3-5-haiku-20241022-v1:0")
    assert not supports_prompt_cache(model_id)


def test_given_tools_and_a_tool_use_answer_when_completed_then_tool_config_sent_and_openai_calls_returned(
    client: Any, stub: Stubber
) -> None:
    tool = {
        "type": "function",
        "function": {"name": "lookup", "description": "Look up", "parameters": {"type": "object"}},
    }
    stub.add_response(
        "converse",
        converse_answer(
            [
                {"text": "Let me look."},
                {"toolUse": {"toolUseId": "tu-1", "name": "lookup", "input": {"q": "tea"}}},
            ]
        ),
        {
            "modelId": "amazon.nova-lite-v1:0",
            "messages": [{"role": "user", "content": [{"text": "find tea"}]}],
            "toolConfig": {
                "tools": [
                    {
                        "toolSpec": {
                            "name": "lookup",
                            "description": "Look up",
                            "inputSchema": {"json": {"type": "object"}},
                        }
                    }
                ]
            },
        },
    )
    answer = BedrockChatModel(client=client).complete([{"role": "user", "content": "find tea"}], tools=[tool])
    assert answer.text == "Let me look."
    assert answer.tool_calls == [
        {"id": "tu-1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "tea"}'}}
    ]


def test_given_an_answer_with_a_lone_surrogate_when_completing_then_text_and_tool_calls_are_utf8(
    client: Any, stub: Stubber
) -> None:
    # half of an emoji's surrogate pair: Converse's JSON may escape it, decoded it is a str UTF-8 refuses
    stub.add_response(
        "converse",
        converse_answer(
            [
                {"text": "* \ud83d likes hiking \U0001f600"},
                {"toolUse": {"toolUseId": "tu-1", "name": "lookup", "input": {"q": "tea \udc00"}}},
            ]
        ),
    )

    answer = BedrockChatModel(client=client).complete([{"role": "user", "content": "hi"}])

    assert answer.text == "* \ufffd likes hiking \U0001f600"
    assert answer.tool_calls[0]["function"]["arguments"] == '{"q": "tea \ufffd"}'
    answer.text.encode("utf-8")  # raises UnicodeEncodeError if a lone surrogate got through


@pytest.mark.parametrize("code", ["ThrottlingException", "ModelNotReadyException"])
def test_given_throttling_then_success_when_completing_then_retried(
    client: Any, stub: Stubber, sleeps: Sleeps, code: str
) -> None:
    stub.add_client_error("converse", code, "busy", 429)
    stub.add_response("converse", converse_answer([{"text": "ok"}]), None)
    assert BedrockChatModel(client=client, sleep=sleeps).complete(OBSERVER_PROMPT).text == "ok"
    assert len(sleeps) == 1


def test_given_access_denied_when_completing_then_invalid_input_on_model_telling_what_to_grant(
    client: Any, stub: Stubber, sleeps: Sleeps
) -> None:
    stub.add_client_error("converse", "AccessDeniedException", "You don't have access", 403)
    with pytest.raises(InvalidInput) as err:
        BedrockChatModel(client=client, sleep=sleeps).complete(OBSERVER_PROMPT)
    assert err.value.field == "model" and "bedrock:InvokeModel" in err.value.message and sleeps == []


def test_given_a_validation_error_when_completing_then_invalid_input_on_messages(
    client: Any, stub: Stubber, sleeps: Sleeps
) -> None:
    stub.add_client_error("converse", "ValidationException", "Input is too long", 400)
    with pytest.raises(InvalidInput) as err:
        BedrockChatModel(client=client, sleep=sleeps).complete(OBSERVER_PROMPT)
    assert err.value.field == "messages"


def test_given_a_malformed_answer_when_completing_then_unavailable() -> None:
    class Garbage:  # a compatible proxy or a new API version may answer anything
        def converse(self, **kwargs: Any) -> dict[str, Any]:
            return {"output": {}, "usage": {"inputTokens": "many"}}

    with pytest.raises(Unavailable, match="unusable response"):
        BedrockChatModel(client=Garbage()).complete(OBSERVER_PROMPT)


def test_given_malformed_messages_when_completing_then_invalid_input_before_any_request(
    client: Any, stub: Stubber
) -> None:
    with pytest.raises(InvalidInput) as err:
        BedrockChatModel(client=client).complete([{"content": "no role"}])
    assert err.value.field == "messages"


def test_given_with_model_when_switched_then_same_client_and_caching_follows_the_model(
    client: Any, stub: Stubber
) -> None:
    model = BedrockChatModel(client=client)
    other = model.with_model("anthropic.claude-3-haiku-20240307-v1:0")
    assert other._connection is model._connection
    assert (other.model_id, other.cache_prompt, model.cache_prompt) == (
        "bedrock/anthropic.claude-3-haiku-20240307-v1:0",
        False,
        True,
    )


# --- settings and bootstrap ------------------------------------------------------------------------------


def test_given_bedrock_settings_when_make_embedder_then_the_model_dimension_and_region_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMSTACK_EMBEDDER", "bedrock")
    monkeypatch.setenv("MEMSTACK_EMBEDDING_MODEL", "cohere.embed-multilingual-v3")
    monkeypatch.setenv("MEMSTACK_BEDROCK_REGION", "eu-central-1")
    embedder = make_embedder(load_settings().embedder_name)
    assert isinstance(embedder, BedrockEmbedder)
    assert (embedder.model_id, embedder._connection.region) == (
        "bedrock/cohere.embed-multilingual-v3@1024",
        "eu-central-1",
    )


def test_given_the_bedrock_embedder_and_no_openai_key_when_a_chat_model_is_needed_then_bedrock_converse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MEMSTACK_EMBEDDER", "bedrock")
    settings = load_settings()
    chat = chat_model_for(settings, {"observational_memory": True})
    assert isinstance(chat, BedrockChatModel) and chat.model == "amazon.nova-lite-v1:0"
    monkeypatch.setenv("MEMSTACK_CHAT_MODEL", "us.anthropic.claude-3-5-haiku-20241022-v1:0")
    chosen = make_chat_model(load_settings())
    assert isinstance(chosen, BedrockChatModel) and chosen.cache_prompt


def test_given_openai_chat_provider_without_a_key_when_a_chat_model_is_needed_then_invalid_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MEMSTACK_EMBEDDER", "bedrock")
    monkeypatch.setenv("MEMSTACK_CHAT_PROVIDER", "openai")
    with pytest.raises(InvalidInput) as err:
        chat_model_for(load_settings(), {"observational_memory": True})
    assert err.value.field == "OPENAI_API_KEY"
