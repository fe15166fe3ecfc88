"""The ``Layer`` protocol: what one memory layer does for a turn and at each lifecycle event.

A layer is processor-shaped (Mastra gives each memory layer a processor with an input and an output side;
spec §2.10): it declares what it needs read for a turn (``needs``), contributes to what the model sees
(``contribute``), rewrites a batch before it is stored (``before_save``), does its follow-up work after
(``after_save``), and answers the lifecycle events — a thread deleted, a thread cloned, a resource erased.

Unlike Mastra's processors a layer never reads the store on the turn's path itself: one read plan per turn
(``memstack.turn.reads``) fetches what every layer declared, in as few round trips as a turn had before
layers existed (2 store requests on DynamoDB). The one exception is observational memory's ``prepare``,
which may have to observe synchronously before the history tail is read (spec §2.9.1 ``blockAfter``).

``LayerBase`` gives every hook a no-op default, so a layer writes only the hooks it answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from memstack.config import MemoryOptions
from memstack.context import SystemKind, SystemMessage
from memstack.model import Message, Resource, Thread
from memstack.scope import Scope

if TYPE_CHECKING:
    from memstack.recall import RecallResult


@dataclass(frozen=True, slots=True)
class Turn:
    """One ``context()`` call, validated.

    Attributes:
        scope: the thread and its resource (the thread may not exist yet).
        options: the configured options with the call's overrides merged in.
        now: the turn's time (aware UTC).
        new: the new user message, if any (never saved by ``context()``).
        extra: call-time context messages (never saved).
    """

    scope: Scope
    options: MemoryOptions
    now: datetime
    new: Message | None
    extra: tuple[Message, ...] = ()

    @property
    def query(self) -> str:
        """The text recall searches for: the new message's text, or ``""``."""
        return self.new.text if self.new is not None else ""


@dataclass(frozen=True, slots=True)
class Needs:
    """What a layer wants read for a turn; the read plan merges every layer's needs.

    Attributes:
        last_messages: the thread's newest N messages (message history).
        tail: the history is this list, read by a layer's ``prepare`` (observational memory's unobserved
            tail); it replaces ``last_messages``.
        resource: the resource record (resource-scoped working memory).
        recall_query: search the index for this text (semantic recall).
        thread: ``(thread,)`` when a layer's ``prepare`` already read the thread (``(None,)``: it does not
            exist), so the read plan does not read it again.
    """

    last_messages: int = 0
    tail: Sequence[Message] | None = None
    thread: tuple[Thread | None] | None = None
    resource: bool = False
    recall_query: str | None = None


@dataclass(frozen=True, slots=True)
class TurnReads:
    """What the read plan fetched for a turn.

    Attributes:
        thread: the thread (``None`` when new, or another resource's: the two read the same).
        history: the thread's messages for the conversation, oldest first.
        resource: the resource record, when a layer asked for it (``None`` if never written).
        recall: semantic recall's result, when asked for and it did not fail.
        prepared: what each layer's ``prepare`` returned, by layer name.
    """

    thread: Thread | None
    history: list[Message]
    resource: Resource | None = None
    recall: RecallResult | None = None
    prepared: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Block:
    """A system message rendered from stored messages, which the token budget trims oldest first once the
    conversation alone cannot fit (the cross-thread recall block, spec §3.5)."""

    kind: SystemKind
    messages: list[Message]
    render: Callable[[list[Message]], str]


MarkerFactory = Callable[[Message | None, Message | None], Message | None]
"""``(last conversation message, new message) → a message shown right before the new one``, or ``None``."""


@dataclass(frozen=True, slots=True)
class Contribution:
    """What one layer adds to a turn.

    Attributes:
        system: system messages, placed in layer order after the caller's instructions.
        block: a trimmable system block, placed after this layer's ``system`` messages.
        tools: tool definitions (OpenAI function-calling shape).
        lead: messages shown before the conversation (the continuation reminder).
        conversation: stored messages of this thread, merged with other layers' by ``seq`` and
            de-duplicated by id; the token budget trims them oldest first.
        recalled: messages semantic recall brought in (``ModelContext.recalled``).
        marker: builds a message shown right before the new one (temporal gap markers).
        versions: what this layer showed, as versions a later write checks against (by name, e.g.
            ``working_memory``); they reach ``ModelContext.versions``.
    """

    system: list[SystemMessage] = field(default_factory=list)
    block: Block | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    lead: list[Message] = field(default_factory=list)
    conversation: list[Message] = field(default_factory=list)
    recalled: list[Message] = field(default_factory=list)
    marker: MarkerFactory | None = None
    versions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ThreadDeleted:
    """A thread being deleted (``delete_thread``) or erased with its resource (``erasing``)."""

    scope: Scope
    options: MemoryOptions
    erasing: bool = False


@dataclass(frozen=True, slots=True)
class MessagesDeleted:
    """Messages deleted by id (``delete_messages``), after the store deleted them.

    Attributes:
        scope: the resource (``scope.thread`` is not set: the messages may belong to several threads).
        messages: the messages that existed and are now gone (with their ``thread_id`` and ``seq``).
    """

    scope: Scope
    options: MemoryOptions
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class ThreadCloned:
    """A thread copied into a new one (``clone_thread``), after the copies were saved.

    Attributes:
        source: the source thread; ``clone``: the new thread (same or another resource).
        id_map: source message id → copy's id; ``seq_map``: source ``seq`` → copy's ``seq`` (copied
            messages only: ``message_limit`` may have left the oldest behind).
        complete: every message of the source was copied.
    """

    source: Thread
    clone: Thread
    options: MemoryOptions
    id_map: Mapping[str, str]
    seq_map: Mapping[int, int]
    complete: bool = True


class Layer(Protocol):
    """One memory layer. Hooks run in the order of the facade's layer tuple (teardown hooks too: message
    history comes first, so a thread is gone from the store before the other layers clean up after it)."""

    name: str

    def prepare(self, turn: Turn) -> Any:
        """Work that must happen before the turn's reads; the result reaches ``needs`` and
        ``TurnReads.prepared``. Must degrade, never fail the turn."""
        ...

    def needs(self, turn: Turn, prepared: Any) -> Needs:
        """What this layer wants read for the turn."""
        ...

    def contribute(self, turn: Turn, reads: TurnReads) -> Contribution:
        """What this layer adds to the turn, from the reads."""
        ...

    def before_save(self, thread: Thread, options: MemoryOptions, messages: list[Message]) -> list[Message]:
        """The batch as it is to be stored (may drop parts or messages). Raises ``InvalidInput`` to refuse
        the batch before anything is written."""
        ...

    def after_save(self, thread: Thread, options: MemoryOptions, saved: Sequence[Message]) -> None:
        """Follow-up work on a stored batch (indexing, scheduling)."""
        ...

    def on_thread_deleted(self, event: ThreadDeleted) -> Mapping[str, int]:
        """Remove everything of the thread this layer keeps; returns counts for the erasure receipt."""
        ...

    def on_thread_cloned(self, event: ThreadCloned) -> None:
        """Copy what this layer keeps of the source thread to the clone."""
        ...

    def on_messages_deleted(self, event: MessagesDeleted) -> None:
        """Forget what this layer derived from the deleted messages and has not committed yet."""
        ...

    def on_resource_erased(self, scope: Scope, options: MemoryOptions) -> Mapping[str, int]:
        """Remove everything of the resource this layer keeps (its threads are already deleted); returns
        counts for the erasure receipt."""
        ...


class NotIndexed(Exception):  # noqa: N818 - a signal between a layer and the save, not an error to raise
    """Raised by a layer's ``after_save`` when the stored batch could not be indexed: the save still
    succeeds and reports the ids (``SavedBatch.unindexed``).

    Attributes:
        message_ids: the stored messages left unindexed.
        reason: the cause, without message text (error class and message of a ``MemstackError``).
        retryable: ``False`` for a deterministic refusal of the text (``InvalidInput``, ``PayloadTooLarge``),
            which no retry can change; ``True`` when a later try may succeed (``Unavailable``, a deadline).
    """

    def __init__(self, message_ids: Sequence[str], reason: str, *, retryable: bool) -> None:
        super().__init__(reason)
        self.message_ids = tuple(message_ids)
        self.reason = reason
        self.retryable = retryable


class LayerBase:
    """No-op defaults for every ``Layer`` hook."""

    name = "layer"

    def prepare(self, turn: Turn) -> Any:
        return None

    def needs(self, turn: Turn, prepared: Any) -> Needs:
        return Needs()

    def contribute(self, turn: Turn, reads: TurnReads) -> Contribution:
        return Contribution()

    def before_save(self, thread: Thread, options: MemoryOptions, messages: list[Message]) -> list[Message]:
        return messages

    def after_save(self, thread: Thread, options: MemoryOptions, saved: Sequence[Message]) -> None:
        return None

    def on_thread_deleted(self, event: ThreadDeleted) -> Mapping[str, int]:
        return {}

    def on_thread_cloned(self, event: ThreadCloned) -> None:
        return None

    def on_messages_deleted(self, event: MessagesDeleted) -> None:
        return None

    def on_resource_erased(self, scope: Scope, options: MemoryOptions) -> Mapping[str, int]:
        return {}
