"""The one rule for when a chat model is needed: observational memory (Observer, Reflector) and
``generate_title`` call one; nothing else does. ``Memory``, ``bootstrap``, the stream indexer and the
engine all ask here."""

from __future__ import annotations

from memstack.config import MemoryOptions
from memstack.errors import InvalidInput
from memstack.ports import ChatModel


def needs_chat_model(options: MemoryOptions) -> bool:
    """Whether these options call a chat model (observational memory or thread titles)."""
    return options.observational_memory.enabled or options.generate_title.enabled


def missing_chat_model() -> InvalidInput:
    """The error for a chat model that is needed and not configured (field ``chat_model``)."""
    return InvalidInput(
        "observational memory and title generation need a chat model: set OPENAI_API_KEY (or "
        "OPENAI_BASE_URL for a compatible endpoint) or pass chat_model",
        field="chat_model",
    )


def require_chat_model(chat_model: ChatModel | None, options: MemoryOptions) -> None:
    """Raises ``missing_chat_model()`` when ``options`` need a chat model and ``chat_model`` is ``None``."""
    if chat_model is None and needs_chat_model(options):
        raise missing_chat_model()
