"""``BedrockChatModel``: the ``ChatModel`` port over Amazon Bedrock's ``Converse`` API, for the Observer,
the Reflector and thread titles.

The port's OpenAI-shaped messages and tools become a Converse request through
``memstack.render.converse`` (the same conversion as ``ModelContext.to_bedrock()``). The Observer and
Reflector send a long, unchanging system prompt first, so a prompt-cache point is put right after it for
models that support Bedrock prompt caching (``cache_prompt``; Bedrock user guide, "Prompt caching":
Anthropic Claude 3.5 Haiku, 3.7 Sonnet and later, Amazon Nova): repeated observations then pay the
prefix's input tokens once per cache lifetime.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from memstack.adapters.bedrock.connection import BedrockConnection
from memstack.adapters.bedrock.embedder import base_model_id
from memstack.adapters.openai.connection import default_sleep
from memstack.errors import InvalidInput, Unavailable
from memstack.ports import ChatResult
from memstack.settings import DEFAULT_BEDROCK_CHAT_MODEL
from memstack.text import valid_json, valid_text

__all__ = ["DEFAULT_CHAT_MODEL", "BedrockChatModel", "supports_prompt_cache"]

DEFAULT_CHAT_MODEL = DEFAULT_BEDROCK_CHAT_MODEL
"""The Bedrock chat model when none is configured: on demand in-region (no inference profile), with prompt
caching, and a small price for the Observer's long inputs."""

_CACHING_PREFIXES = (
    "amazon.nova-",
    "anthropic.claude-3-5-haiku",
    "anthropic.claude-3-7-sonnet",
    "anthropic.claude-sonnet-4",
    "anthropic.claude-opus-4",
    "anthropic.claude-haiku-4",
)


def supports_prompt_cache(model: str) -> bool:
    """Whether Bedrock prompt caching (``cachePoint`` blocks) is offered for ``model`` (an id or inference
    profile id), per the Bedrock user guide's list of supported models."""
    return base_model_id(model).startswith(_CACHING_PREFIXES)


class BedrockChatModel:
    """One chat model on Amazon Bedrock, called through ``Converse``; nothing is imported or connected until
    the first ``complete``.

    Attributes:
        model_id: ``"bedrock/<model>"``.
        model: the Bedrock model id or inference profile id.
    """

    def __init__(
        self,
        model: str = DEFAULT_CHAT_MODEL,
        *,
        region: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 4,
        cache_prompt: bool | None = None,
        client: Any | None = None,
        sleep: Callable[[float], None] = default_sleep,
    ) -> None:
        """Check the options; imports and connects nothing.

        Args:
            model: a Bedrock model id (``amazon.nova-lite-v1:0``) or inference profile id
                (``us.anthropic.claude-3-5-haiku-20241022-v1:0``).
            region: the Bedrock region; ``None`` follows botocore's chain (``AWS_REGION``).
            timeout: seconds per request (a long answer must arrive within it).
            max_retries: retries after the first attempt on throttling, model-not-ready, 5xx and timeouts.
            cache_prompt: put a cache point after the system prompt; ``None``: when the model supports it.
            client: a ready ``bedrock-runtime`` client (tests: one under ``botocore.stub.Stubber``).
            sleep: the wait between attempts (tests inject a recorder).

        Raises:
            InvalidInput: empty model or a bad number.
        """
        if not model:
            raise InvalidInput("model must be a non-empty string", field="model")
        self._connection = BedrockConnection(
            region=region, timeout=timeout, max_retries=max_retries, client=client, sleep=sleep
        )
        self._cache_option = cache_prompt
        self.model = model
        self.model_id: str = f"bedrock/{model}"
        self.cache_prompt = supports_prompt_cache(model) if cache_prompt is None else cache_prompt

    def __repr__(self) -> str:
        return f"BedrockChatModel(model={self.model!r}, region={self._connection.region!r})"

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        """Answer an OpenAI-shaped message list through ``Converse``.

        Args:
            messages: chat-completions messages; leading system messages become Converse's ``system``.
            tools: chat-completions tool definitions, sent as ``toolConfig``.
            max_output_tokens: ``inferenceConfig.maxTokens``.
            temperature: ``inferenceConfig.temperature``; ``None`` leaves the model's default.

        Returns:
            The answer's text blocks joined (``""`` when the model only called tools; lone surrogates
            replaced, ``memstack.text.valid_text``, as the OpenAI adapter does), its ``toolUse``
            blocks as OpenAI tool calls (``{"id", "type": "function", "function": {"name", "arguments"}}``,
            ``arguments`` JSON text) and the token usage Bedrock reported.

        Raises:
            InvalidInput: access denied or unknown model (field ``model``), malformed messages, text that
                is not UTF-8 (a lone surrogate; nothing is sent) or a request Bedrock refused (field
                ``messages``).
            Unavailable: throttling, model-not-ready, 5xx or timeouts outlasted the retries, quota exceeded,
                or the response was malformed.
        """
        kwargs = self._converse_arguments(messages, tools, max_output_tokens, temperature)
        response = self._connection.call(
            lambda client: client.converse(**kwargs), what="converse", model=self.model, field="messages"
        )
        try:
            return _result(response)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise Unavailable(
                f"Bedrock converse ({self.model}) returned an unusable response: {type(exc).__name__}"
            ) from None

    def _converse_arguments(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        max_output_tokens: int | None,
        temperature: float | None,
    ) -> dict[str, Any]:
        """The keyword arguments of ``converse``; raises ``InvalidInput`` (field ``messages``) for messages
        that are not chat-completions messages or not valid text, before anything is sent."""
        from memstack.render.converse import to_converse_request

        try:
            request = to_converse_request(messages, tools or (), cache_system=self.cache_prompt)
        except (KeyError, TypeError, AttributeError) as exc:
            raise InvalidInput(
                f"messages are not chat-completions messages: {type(exc).__name__}", field="messages"
            ) from None
        try:  # botocore would send a lone surrogate as a JSON escape no model can read
            json.dumps(request, ensure_ascii=False, default=lambda value: "").encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                f"Bedrock converse ({self.model}): the messages are not valid text (a lone surrogate)",
                field="messages",
            ) from None
        kwargs: dict[str, Any] = {"modelId": self.model, "messages": request["messages"]}
        if request["system"]:
            kwargs["system"] = request["system"]
        if "toolConfig" in request:
            kwargs["toolConfig"] = request["toolConfig"]
        inference: dict[str, Any] = {}
        if max_output_tokens is not None:
            inference["maxTokens"] = max_output_tokens
        if temperature is not None:
            inference["temperature"] = temperature
        if inference:
            kwargs["inferenceConfig"] = inference
        return kwargs

    def with_model(self, model: str) -> BedrockChatModel:
        """The same region and client with another model (the Observer's and Reflector's own ``model``
        options, spec §2.9.1). Raises ``InvalidInput`` for an empty name."""
        if not model:
            raise InvalidInput("model must be a non-empty string", field="model")
        twin = object.__new__(BedrockChatModel)
        twin._connection = self._connection
        twin._cache_option = self._cache_option
        twin.model = model
        twin.model_id = f"bedrock/{model}"
        twin.cache_prompt = supports_prompt_cache(model) if self._cache_option is None else self._cache_option
        return twin


def _result(response: dict[str, Any]) -> ChatResult:
    """A ``Converse`` answer as a ``ChatResult``: text blocks joined, ``toolUse`` blocks as OpenAI tool
    calls, lone surrogates replaced in both (``valid_text``: Bedrock's JSON may carry half a pair). Raises
    ``KeyError``/``TypeError``/``ValueError`` on a malformed answer (the caller maps them)."""
    content = response["output"]["message"]["content"]
    calls = [
        valid_json(
            {
                "id": str(block["toolUse"]["toolUseId"]),
                "type": "function",
                "function": {
                    "name": str(block["toolUse"]["name"]),
                    "arguments": json.dumps(block["toolUse"].get("input", {}), ensure_ascii=False),
                },
            }
        )
        for block in content
        if "toolUse" in block
    ]
    usage = response.get("usage") or {}
    return ChatResult(
        text=valid_text("".join(block["text"] for block in content if "text" in block)),
        tool_calls=calls,
        input_tokens=int(usage.get("inputTokens") or 0),
        output_tokens=int(usage.get("outputTokens") or 0),
    )
