"""Memstack: agent memory — message history, working memory, semantic recall and observational memory — on
an embedded default
(SQLite + an offline embedder) or on AWS.

Start with ``Memory.local()``::

    from memstack import Memory
    memory = Memory.local()                       # .memstack/memory.db, offline embedder
    memory.save_messages(thread_id="t1", resource_id="user-1", messages=[{"role": "user", "content": "Hi"}])
    ctx = memory.context(thread_id="t1", resource_id="user-1", message="What did I say?")
    ctx.to_openai()                               # {"messages": [...], "tools": [...]}
"""

import logging as _logging
from importlib import import_module as _import_module
from typing import TYPE_CHECKING, Any

# The public names load on first use (PEP 562): ``import memstack.api`` in a Lambda handler pulls in only
# what the handler needs, not every model, the Observer and the option models (their pydantic schemas
# cost most of a cold start's import time).
_WHERE: dict[str, str] = {
    "Author": "memstack.model",
    "CloneResult": "memstack.memory",
    "Conflict": "memstack.errors",
    "EraseReceipt": "memstack.model",
    "FilePart": "memstack.model",
    "Forbidden": "memstack.errors",
    "GenerateTitleOptions": "memstack.config",
    "HybridOptions": "memstack.config",
    "ImagePart": "memstack.model",
    "Include": "memstack.memory",
    "InvalidInput": "memstack.errors",
    "Memory": "memstack.memory",
    "MemoryOptions": "memstack.config",
    "MemstackError": "memstack.errors",
    "Message": "memstack.model",
    "MessageHistoryOptions": "memstack.config",
    "MessagePage": "memstack.model",
    "MessageRange": "memstack.config",
    "ModelContext": "memstack.context",
    "NotFound": "memstack.errors",
    "ObservationFailed": "memstack.observation.engine",
    "ObservationRecord": "memstack.model",
    "ObservationalMemoryOptions": "memstack.config",
    "ObserveResult": "memstack.observation.engine",
    "PayloadTooLarge": "memstack.errors",
    "ReasoningPart": "memstack.model",
    "RecallResult": "memstack.recall",
    "ReflectResult": "memstack.observation.engine",
    "ReflectionFailed": "memstack.observation.engine",
    "Resource": "memstack.model",
    "SavedBatch": "memstack.model",
    "SemanticRecallOptions": "memstack.config",
    "SystemMessage": "memstack.context",
    "TextPart": "memstack.model",
    "Thread": "memstack.model",
    "ThreadPage": "memstack.model",
    "Throttled": "memstack.errors",
    "ToolCallFilterOptions": "memstack.config",
    "ToolCallPart": "memstack.model",
    "ToolResultPart": "memstack.model",
    "Unavailable": "memstack.errors",
    "WorkingMemoryOptions": "memstack.config",
}

if TYPE_CHECKING:
    from memstack.config import (
        GenerateTitleOptions,
        HybridOptions,
        MemoryOptions,
        MessageHistoryOptions,
        MessageRange,
        ObservationalMemoryOptions,
        SemanticRecallOptions,
        ToolCallFilterOptions,
        WorkingMemoryOptions,
    )
    from memstack.context import ModelContext, SystemMessage
    from memstack.errors import (
        Conflict,
        Forbidden,
        InvalidInput,
        MemstackError,
        NotFound,
        PayloadTooLarge,
        Throttled,
        Unavailable,
    )
    from memstack.memory import CloneResult, Include, Memory
    from memstack.model import (
        Author,
        EraseReceipt,
        FilePart,
        ImagePart,
        Message,
        MessagePage,
        ObservationRecord,
        ReasoningPart,
        Resource,
        SavedBatch,
        TextPart,
        Thread,
        ThreadPage,
        ToolCallPart,
        ToolResultPart,
    )
    from memstack.observation.engine import ObservationFailed, ObserveResult, ReflectionFailed, ReflectResult
    from memstack.recall import RecallResult


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use.

    Raises:
        AttributeError: ``name`` is not public.
    """
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'memstack' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "Author",
    "CloneResult",
    "Conflict",
    "EraseReceipt",
    "FilePart",
    "Forbidden",
    "GenerateTitleOptions",
    "HybridOptions",
    "ImagePart",
    "Include",
    "InvalidInput",
    "Memory",
    "MemoryOptions",
    "MemstackError",
    "Message",
    "MessageHistoryOptions",
    "MessagePage",
    "MessageRange",
    "ModelContext",
    "NotFound",
    "ObservationFailed",
    "ObservationRecord",
    "ObservationalMemoryOptions",
    "ObserveResult",
    "PayloadTooLarge",
    "ReasoningPart",
    "RecallResult",
    "ReflectResult",
    "ReflectionFailed",
    "Resource",
    "SavedBatch",
    "SemanticRecallOptions",
    "SystemMessage",
    "TextPart",
    "Thread",
    "ThreadPage",
    "Throttled",
    "ToolCallFilterOptions",
    "ToolCallPart",
    "ToolResultPart",
    "Unavailable",
    "WorkingMemoryOptions",
]

# A library never configures logging; with no handler anywhere, Python's last-resort handler would print
# our warnings (already reported as exceptions) to stderr. Applications that configure logging see them.
_logging.getLogger("memstack").addHandler(_logging.NullHandler())
