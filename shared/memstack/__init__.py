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
    TextPart,
    Thread,
    ThreadPage,
    ToolCallPart,
    ToolResultPart,
)
from memstack.observation.engine import ObservationFailed, ObserveResult, ReflectionFailed, ReflectResult
from memstack.recall import RecallResult

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
