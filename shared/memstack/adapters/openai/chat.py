"""``OpenAIChatModel``: the ``ChatModel`` port over OpenAI's chat-completions API (or a compatible endpoint),
used by the Observer, the Reflector and thread titles."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memstack.adapters.openai.connection import OpenAIConnection, default_sleep
from memstack.errors import InvalidInput, Unavailable
from memstack.ports import ChatResult
from memstack.text import valid_json, valid_text

if TYPE_CHECKING:
    import openai

__all__ = ["OpenAIChatModel", "sanitize_text"]

sanitize_text = valid_text
"""Kept for callers of the adapter: ``memstack.text.valid_text``."""


class OpenAIChatModel:
    """One chat model at an OpenAI (or OpenAI-compatible) endpoint; nothing is imported or connected until
    the first ``complete``.

    Attributes:
        model_id: ``"openai/<model>"``.
        model: the model's name at the endpoint.
    """

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        client: openai.OpenAI | None = None,
        sleep: Callable[[float], None] = default_sleep,
    ) -> None:
        """Check the options; imports and connects nothing.

        Args:
            model: the chat model's name at the endpoint.
            api_key: the API key; required unless ``client`` is given. Not read from the environment here.
            base_url: API root of an OpenAI-compatible endpoint; ``None`` means ``https://api.openai.com/v1``.
            timeout: seconds per HTTP request (a long answer must arrive within it).
            max_retries: retries after the first attempt on 429, 5xx, connection errors and timeouts.
            client: a ready ``openai.OpenAI`` client (built with ``max_retries=0``) to use instead.
            sleep: the wait between attempts (tests inject a recorder).

        Raises:
            InvalidInput: empty model, no key and no client, or a bad number.
        """
        if not model:
            raise InvalidInput("model must be a non-empty string", field="model")
        self._connection = OpenAIConnection(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            client=client,
            sleep=sleep,
        )
        self.model = model
        self.model_id: str = f"openai/{model}"

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self._connection.base_url!r})"

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        """Answer an OpenAI-shaped message list (one choice, not streamed).

        Args:
            messages: chat-completions messages (``{"role", "content", ...}``), as ``ModelContext.to_openai``
                gives them.
            tools: chat-completions tool definitions (``{"type": "function", "function": {...}}``).
            max_output_tokens: cap on generated tokens, sent as ``max_completion_tokens`` (the API's current
                name; ``max_tokens`` is deprecated and refused by reasoning models).
            temperature: sampling temperature; ``None`` leaves the model's default.

        Returns:
            The answer's text (``""`` when the model only called tools; lone surrogates replaced,
            ``memstack.text.valid_text``), its tool calls as OpenAI dicts
            (``{"id", "type": "function", "function": {"name", "arguments"}}``, ``arguments`` a JSON string)
            and the token usage the endpoint reported (0 when it reports none).

        Raises:
            InvalidInput: the key was rejected (field ``api_key``), the model is unknown (field ``model``)
                or the API refused the request, e.g. too long a context (field ``messages``).
            PayloadTooLarge: the endpoint answered 413.
            Unavailable: throttling, 5xx or connection failures outlasted the retries, or the response was
                malformed.
        """
        kwargs: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if tools:
            kwargs["tools"] = list(tools)
        if max_output_tokens is not None:
            # Through extra_body: the SDK's keyword exists only from openai 1.45; the JSON is the same.
            kwargs["extra_body"] = {"max_completion_tokens": max_output_tokens}
        if temperature is not None:
            kwargs["temperature"] = temperature
        response = self._connection.call(
            lambda client: client.chat.completions.create(**kwargs),
            what="chat completion",
            model=self.model,
            field="messages",
        )
        try:  # the SDK does not validate responses: a compatible server may send anything
            message = response.choices[0].message
            tool_calls = [
                valid_json(call.model_dump(mode="json", exclude_none=True))
                for call in message.tool_calls or []
            ]
            usage = response.usage
            return ChatResult(
                text=valid_text(message.content or ""),
                tool_calls=tool_calls,
                input_tokens=int(usage.prompt_tokens or 0) if usage else 0,
                output_tokens=int(usage.completion_tokens or 0) if usage else 0,
            )
        except (TypeError, ValueError, AttributeError, IndexError) as exc:
            raise Unavailable(
                f"OpenAI chat completion ({self.model}) returned an unusable response: {type(exc).__name__}"
            ) from None

    def with_model(self, model: str) -> OpenAIChatModel:
        """The same endpoint, key and connection with another model (the Observer's and Reflector's own
        ``model`` options, spec §2.9.1). Raises ``InvalidInput`` for an empty name."""
        if not model:
            raise InvalidInput("model must be a non-empty string", field="model")
        twin = object.__new__(OpenAIChatModel)
        twin._connection = self._connection
        twin.model = model
        twin.model_id = f"openai/{model}"
        return twin

    def close(self) -> None:
        """Close the HTTP connection pool (a later call opens a new one)."""
        self._connection.close()
