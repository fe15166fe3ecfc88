"""Response bodies of OpenAI's HTTP API, for tests that mock it with respx (shapes from the API reference:
"Create embeddings", "Create chat completion", error objects), and ``openai_http``: respx's router on the
transport the OpenAI adapter uses.

respx mocks ``httpx`` below the client, at ``httpcore``'s connection pool, so a request runs through the
real client (its hooks, redirects, timeouts) and only the network is replaced. ``openai`` 3.x runs on
``httpx2`` and ``httpcore2`` (memstack.adapters.openai.connection), which respx does not know:
``Httpcore2Mocker`` is respx's ``httpcore`` mocker aimed at ``httpcore2``'s pools, so the same routes,
``httpx.Response`` answers and ``httpx`` errors as side effects serve either stack.
"""

from __future__ import annotations

import json
from typing import Any

import httpcore2
import httpx
import respx
from respx.mocks import HTTPCoreMocker

from memstack.adapters.openai import connection


class Httpcore2Mocker(HTTPCoreMocker):
    """respx's ``httpcore`` mocker for ``httpcore2`` (the pools under ``httpx2``): a route's
    ``httpx.Response`` becomes an ``httpcore2.Response``, and an ``httpx`` transport error raised as a side
    effect (``httpx.ConnectError``, ``httpx.ReadTimeout``) becomes ``httpcore2``'s of the same name, which
    ``httpx2`` maps to its own as for a real network failure."""

    name = "httpcore2"
    targets = [
        "httpcore2._sync.connection.HTTPConnection",
        "httpcore2._sync.connection_pool.ConnectionPool",
        "httpcore2._sync.http_proxy.HTTPProxy",
        "httpcore2._async.connection.AsyncHTTPConnection",
        "httpcore2._async.connection_pool.AsyncConnectionPool",
        "httpcore2._async.http_proxy.AsyncHTTPProxy",
    ]

    @classmethod
    def handler(cls, httpx_request: httpx.Request) -> Any:
        try:
            return super().handler(httpx_request)
        except httpx.TransportError as exc:
            raise getattr(httpcore2, type(exc).__name__)(str(exc)) from exc

    @classmethod
    def from_sync_httpx_response(cls, httpx_response: httpx.Response, target: Any, **kwargs: Any) -> Any:
        return httpcore2.Response(
            status=httpx_response.status_code,
            headers=httpx_response.headers.raw,
            content=httpx_response.stream,
            extensions=httpx_response.extensions,
        )


def openai_http(**kwargs: Any) -> respx.MockRouter:
    """``respx.mock(**kwargs)`` on the transport of the installed OpenAI SDK (``httpcore`` under ``httpx``
    for ``openai`` 1.x-2.x, ``httpcore2`` under ``httpx2`` for 3.x)."""
    return respx.mock(
        using="httpcore2" if connection.transport_package() == "httpx2" else "httpcore", **kwargs
    )


def embeddings_body(vectors: list[list[float]], indexes: list[int] | None = None) -> dict[str, Any]:
    """An embeddings response: ``vectors[i]`` under ``indexes[i]`` (default: their positions), in that order."""
    indexes = list(range(len(vectors))) if indexes is None else indexes
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": v} for i, v in zip(indexes, vectors, strict=True)
        ],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }


def error_body(message: str, code: str | None = None, type_: str = "invalid_request_error") -> dict[str, Any]:
    """An error response's body."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def chat_body(message: dict[str, Any], usage: dict[str, int] | None = None) -> dict[str, Any]:
    """A chat completion with one choice holding ``message`` (an assistant message object)."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
        "usage": usage or {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }


def scripted_completion(scripted: Any, request: Any) -> Any:
    """The ``httpx.Response`` of a chat-completions ``request`` answered by ``scripted`` (a
    ``ScriptedChatModel``: the Observer, Reflector and title answers), with usage 100 in, 20 out."""
    body = json.loads(request.content)
    text = scripted.complete(body["messages"]).text
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    return httpx.Response(200, json=chat_body({"role": "assistant", "content": text}, usage))
