"""Response bodies of OpenAI's HTTP API, for tests that mock it with respx (shapes from the API reference:
"Create embeddings", "Create chat completion", error objects)."""

from __future__ import annotations

import json
from typing import Any


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
    import httpx

    body = json.loads(request.content)
    text = scripted.complete(body["messages"]).text
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    return httpx.Response(200, json=chat_body({"role": "assistant", "content": text}, usage))
