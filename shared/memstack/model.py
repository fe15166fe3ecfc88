"""Domain types: Thread, Resource, Message and its parts, Author.

Messages are ordered by ``seq``, a per-thread sequence number the store assigns on first save, never by
timestamp: equal ``created_at`` values must not reorder a turn (DESIGN.md "Data model").

All types are immutable pydantic models; adapters convert them to and from their own records and never
leak their types.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from memstack.limits import SizeLimit

Role = Literal["user", "assistant", "system", "tool"]
ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")

MAX_ID_LENGTH = 256
"""Longest accepted thread, resource or message id, in characters."""

MAX_JSON_DEPTH = 32
"""Deepest nesting of objects and arrays accepted in metadata, tool arguments and tool results: deeper
values serialise and validate by recursion (pydantic, json) and would fail on the way out, not in."""

MAX_METADATA_BYTES = 64 * 1024
"""Largest accepted metadata object, as compact JSON in UTF-8 bytes."""

MAX_AUTHOR_CHARS = 256
"""Longest ``Author.name`` and ``Author.role``, in characters."""


def new_id() -> str:
    """A fresh random id (UUID4, 36 characters)."""
    return str(uuid.uuid4())


def utcnow() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
"""A control character an id may not hold: C0 and DEL (one regex search: a generator over the characters
cost ~10x as much on every id of every call)."""


def check_id(value: object, field: str) -> str:
    """Validate an id: a non-empty string of at most 256 characters without control characters.

    Raises:
        InvalidInput: naming ``field``.
    """
    from memstack.errors import InvalidInput

    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{field} must be a non-empty string", field=field)
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInput(f"{field} is longer than the limit of {MAX_ID_LENGTH} characters", field=field)
    if _CONTROL.search(value):
        raise InvalidInput(f"{field} must not contain control characters", field=field)
    check_text(value, field)
    return value


ROUTABLE_SPECIALS = "-._~()'!*:@,;=+&$<> []{}|^"
"""The characters besides Unicode letters, digits and ``_`` a thread or resource id may hold (space
included): the ones the HTTP API's resolver matches a path parameter with (Powertools' ``_SAFE_URI`` and
``_UNSAFE_URI``) but ``%``. Without ``%`` in an id, percent-decoding a path is idempotent, so the API can
decode every path once before routing whether API Gateway delivered it encoded or decoded
(``memstack.api.app.MemstackResolver.resolve``). ``tests/unit/test_ids.py`` checks the set against
Powertools' character by character."""

ROUTABLE_ID = re.compile(r"[-._~()'!*:@,;=+&$<> \[\]{}|^\w]+")
"""A routable id (``fullmatch``); ``\\w`` is Unicode (letters, digits, ``_``)."""

ROUTABLE_RULE = (
    "may only hold letters, digits, '_' and the characters "
    f"{ROUTABLE_SPECIALS!r}, and may not be '.' or '..' (the HTTP API must be able to route it)"
)
"""The rule, as error messages state it."""

_DOT_SEGMENTS = frozenset({".", ".."})


def is_routable(value: str) -> bool:
    """Whether ``value`` can be a path segment of the HTTP API (``/v1/threads/<thread_id>``,
    ``/v1/resources/<resource_id>``): only ``ROUTABLE_ID`` characters, and not a dot segment (``.``/``..``,
    which HTTP clients collapse)."""
    return value not in _DOT_SEGMENTS and ROUTABLE_ID.fullmatch(value) is not None


def check_routable_id(value: object, field: str) -> str:
    """Validate a thread or resource id: ``check_id``, and routable (``is_routable``).

    Thread and resource ids travel in URL paths of the HTTP API, which percent-decodes a path before it
    routes it: an id holding ``/``, ``?``, ``#``, ``%``, an emoji or another character outside
    ``ROUTABLE_SPECIALS`` could be stored but never reached again over HTTP. Every surface — ``Memory``,
    ``AsyncMemory``, the API and both clients — refuses such ids with this one check (docs/api.md "Ids over
    HTTP"). Message ids travel in bodies and queries only: ``check_id``.

    Raises:
        InvalidInput: naming ``field`` and the rule.
    """
    from memstack.errors import InvalidInput

    checked = check_id(value, field)
    if not is_routable(checked):
        raise InvalidInput(f"{field} {ROUTABLE_RULE}", field=field)
    return checked


def check_text(value: str, field: str) -> str:
    """Validate that a string is encodable text (UTF-8, so no lone surrogates).

    Raises:
        InvalidInput: naming ``field``.
    """
    from memstack.errors import InvalidInput

    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{field} must be valid text (it has a lone surrogate)", field=field) from None
    return value


def json_depth(value: object) -> int:
    """Nesting depth of a JSON-like value: 0 for a scalar, 1 for a flat object or array (iterative)."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def check_json_depth(value: object, field: str) -> None:
    """Refuse values nested deeper than ``MAX_JSON_DEPTH``.

    Raises:
        InvalidInput: naming ``field`` and the limit.
    """
    from memstack.errors import InvalidInput

    if json_depth(value) > MAX_JSON_DEPTH:
        raise InvalidInput(f"{field} is nested deeper than the limit of {MAX_JSON_DEPTH} levels", field=field)


_METADATA_JSON = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)
"""Metadata as JSON, as ``json.dumps`` with these options writes it (one encoder, not one per call)."""


def check_metadata(value: object, field: str = "metadata") -> dict[str, Any]:
    """Validate metadata: a JSON object, serialisable, at most ``MAX_METADATA_BYTES`` as JSON.

    Raises:
        InvalidInput: not an object, not JSON-serialisable (sets, bytes, NaN, objects…).
        PayloadTooLarge: larger than the limit.
    """
    from memstack.errors import InvalidInput, PayloadTooLarge

    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"{field} must be a JSON object", field=field)
    if not value:
        return {}
    check_json_depth(value, field)
    try:
        encoded = _METADATA_JSON.encode(value)
        size = len(encoded.encode("utf-8"))
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        reason = "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InvalidInput(f"{field} is not JSON-serialisable: {reason}", field=field) from None
    if size > MAX_METADATA_BYTES:
        raise PayloadTooLarge(
            f"{field} is larger than the limit of {MAX_METADATA_BYTES} bytes as JSON", field=field
        )
    if any(not isinstance(k, str) for k in value):
        raise InvalidInput(f"{field} keys must be strings", field=field)
    result: dict[str, Any] = json.loads(encoded)
    return result


class _Frozen(BaseModel):
    # built at import, unlike the API's bodies (memstack.api.schemas): every request's core uses these, and
    # a deferred model nested in another's schema is generated again inside each (pydantic reuses the
    # schema of a complete model only)
    model_config = ConfigDict(frozen=True, extra="forbid")


class Author(_Frozen):
    """Who wrote a message in a thread shared by several people (Mastra's multi-user threads).

    The model is shown the author's name before the text, in history and in recall.
    """

    id: str
    name: Annotated[str, SizeLimit(MAX_AUTHOR_CHARS)] = ""
    role: Annotated[str, SizeLimit(MAX_AUTHOR_CHARS)] = ""

    @property
    def label(self) -> str:
        """The name shown to the model: ``name`` if set, else ``id``."""
        return self.name or self.id


class TextPart(_Frozen):
    """Plain text."""

    type: Literal["text"] = "text"
    text: str


class ReasoningPart(_Frozen):
    """The model's reasoning text (kept in storage, not sent back to chat-completions models)."""

    type: Literal["reasoning"] = "reasoning"
    text: str


class ToolCallPart(_Frozen):
    """A tool call made by the assistant: ``id`` pairs it with its ``ToolResultPart``."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ToolResultPart(_Frozen):
    """The result of a tool call, ``result`` being any JSON value."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    name: str = ""
    result: Any = None
    is_error: StrictBool = False
    """Whether the tool failed: a JSON boolean (``"no"`` or ``1`` are refused, not read as one)."""


class FilePart(_Frozen):
    """A file by reference (an URL or storage key), never inline bytes."""

    type: Literal["file"] = "file"
    url: str
    media_type: str = "application/octet-stream"
    name: str = ""


class ImagePart(_Frozen):
    """An image by reference, with an optional caption used as its text for search."""

    type: Literal["image"] = "image"
    url: str
    media_type: str = "image/*"
    caption: str = ""


Part = Annotated[
    TextPart | ReasoningPart | ToolCallPart | ToolResultPart | FilePart | ImagePart,
    Field(discriminator="type"),
]


class Message(_Frozen):
    """One stored message of a thread.

    Attributes:
        id: client-supplied or generated; saving an existing id updates the message in place.
        thread_id, resource_id: the thread and its owner.
        role: ``user | assistant | system | tool``.
        parts: at least one part.
        created_at: aware UTC datetime; informational, never used for ordering within a thread.
        seq: per-thread sequence number assigned by the store (0 until stored).
        metadata: JSON object.
        author: optional author for multi-user threads.
    """

    id: str
    thread_id: str
    resource_id: str
    role: Role
    parts: tuple[Part, ...]
    created_at: datetime
    seq: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
    author: Author | None = None

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    @property
    def text(self) -> str:
        """The text parts joined with a space (what recall and history rendering read first)."""
        return " ".join(p.text for p in self.parts if isinstance(p, TextPart))


class Thread(_Frozen):
    """One conversation, owned by exactly one resource (immutable ``resource_id``).

    ``title`` is the empty string while untitled, never a placeholder. ``version`` counts updates of the
    title and metadata (0 at creation) and guards compare-and-set updates (thread-scoped working memory).
    ``last_seq`` is the last ``seq`` the store handed out in the thread (0 before the first message; a
    deleted message does not lower it): ``save_messages(expected_last_seq=...)`` compares against it.
    """

    id: str
    resource_id: str
    title: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    version: int = 0
    last_seq: int = 0


class Resource(_Frozen):
    """The owner of threads (a user, org or project) and its resource-scoped working memory.

    ``version`` increases on every write and guards compare-and-set updates.
    """

    id: str
    working_memory: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    version: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None


class ThreadPage(_Frozen):
    """A page of threads and the opaque cursor of the next page (``None`` on the last page)."""

    threads: tuple[Thread, ...]
    next_cursor: str | None = None


class MessagePage(_Frozen):
    """A page of messages in chronological order and the opaque cursor of the next page."""

    messages: tuple[Message, ...]
    next_cursor: str | None = None


class SavedBatch(list[Message]):
    """What ``save_messages`` returns: the stored messages with their ``seq`` (a list, as before), and which
    of them are not searchable yet.

    A save is reported by what was stored: when the store committed the batch but indexing it failed (the
    embedder or index down, slow past the deadline, or answering malformed vectors), the save still
    succeeds and the ids are listed here. They stay marked unindexed in the store and are indexed without
    the caller (``Memory.reconcile_index``, run by the library's background retry, at ``memstack serve``'s
    start-up, and on AWS by the stream indexer's retries and the ``reconcile`` schedule). Saving them again
    with the same ids is also safe: a save with an existing id updates it in place.

    Attributes:
        unindexed: ids of stored messages not in the search index yet (empty when all were indexed, or
            indexing is not the save's job: a stream indexer does it).
        index_error: why they were not indexed (an error class and cause without message text), or
            ``None``.
    """

    def __init__(
        self,
        messages: Iterable[Message] = (),
        *,
        unindexed: Sequence[str] = (),
        index_error: str | None = None,
    ) -> None:
        super().__init__(messages)
        self.unindexed: tuple[str, ...] = tuple(unindexed)
        self.index_error = index_error


ERASE_COUNT_KEYS: tuple[str, ...] = (
    "threads",
    "messages",
    "working_memory",
    "observation_records",
    "index_documents",
)
"""The keys of ``EraseReceipt.counts``, in the order they are reported."""


@dataclass(frozen=True, slots=True)
class EraseReceipt:
    """What ``Memory.erase_resource`` deleted, counted per kind of stored thing.

    Attributes:
        resource_id: the erased resource.
        counts: ``threads`` (thread records), ``messages`` (message records, with their S3 bodies and id
            pointers), ``working_memory`` (resource records: resource-scoped working memory and metadata;
            0 or 1), ``observation_records`` (observational-memory records, pending work included: each
            thread's own and the resource's), ``index_documents``
            (search-index documents: message chunks). Every key is present; a second erasure of the same
            resource reports zeros.
    """

    resource_id: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ERASE_COUNT_KEYS, 0))

    def to_dict(self) -> dict[str, Any]:
        """``{"resource_id": ..., "counts": {...}}``, the JSON shape of the HTTP answer."""
        return {
            "resource_id": self.resource_id,
            "counts": {k: self.counts.get(k, 0) for k in ERASE_COUNT_KEYS},
        }


# observational memory (spec §2.9.2) ------------------------------------------------------------------

MAX_OBSERVATION_RECORD_BYTES = 360 * 1024
"""Largest observation record, as compact JSON in UTF-8 bytes (observations, chunks, cursor, hints).

About 90,000 tokens of English: the observations at the Reflector's default block-after point (48,000
tokens) plus a full buffer of chunks. The limit keeps a record inside one DynamoDB item (400 KB, less
keys and attributes); every adapter enforces it, so a record that fits one store fits all of them."""

MAX_BUFFERED_CHUNKS = 256
"""Most buffered observation chunks one record may hold."""

MAX_CURSOR_THREADS = 10_000
"""Most threads the cursor of a resource-scoped record may track."""

MAX_OBSERVATION_WORK = 1_000
"""Most records one ``MemoryStore.list_observation_work`` call may return."""


def check_observation_work_limit(limit: object) -> int:
    """``limit`` of ``list_observation_work`` checked (1..``MAX_OBSERVATION_WORK``). Raises ``InvalidInput``."""
    from memstack.errors import InvalidInput

    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_OBSERVATION_WORK:
        raise InvalidInput(f"limit must be between 1 and {MAX_OBSERVATION_WORK}", field="limit")
    return limit


MAX_ERROR_CHARS = 1_000
"""Longest ``last_error`` kept on an observation record, in characters."""

MAX_HINT_CHARS = 16_000
"""Longest current task, suggested response or thread-title hint, in characters."""


class ModelUsage(_Frozen):
    """Model calls made for an observation record and the tokens spent on them, by agent (what a thread —
    or, in resource scope, a resource — costs in Observer, Reflector, title and embedding calls).

    Every chat call counts, also one whose answer was refused (empty, degenerate, a bad reflection): those
    are paid for too. Chat tokens are the endpoint's own counts (``ChatResult.input_tokens``/
    ``output_tokens``; 0 when it reports none). Embedding calls are the embedder requests semantic recall
    made for the thread (indexing its messages, embedding its turns' queries; cache hits cost nothing and
    are not counted); ``embedding_texts`` the texts (chunks, queries) sent, ``embedding_tokens`` their
    tokens by Memstack's tokenizer (the context's, ``o200k_base`` by default): an estimate of what the
    embedding endpoint bills, since the ``Embedder`` port reports no usage.
    """

    observer_calls: int = Field(0, ge=0)
    observer_input_tokens: int = Field(0, ge=0)
    observer_output_tokens: int = Field(0, ge=0)
    reflector_calls: int = Field(0, ge=0)
    reflector_input_tokens: int = Field(0, ge=0)
    reflector_output_tokens: int = Field(0, ge=0)
    title_calls: int = Field(0, ge=0)
    title_input_tokens: int = Field(0, ge=0)
    title_output_tokens: int = Field(0, ge=0)
    embedding_calls: int = Field(0, ge=0)
    embedding_texts: int = Field(0, ge=0)
    embedding_tokens: int = Field(0, ge=0)

    @property
    def calls(self) -> int:
        """Every call counted, chat and embedding."""
        return self.observer_calls + self.reflector_calls + self.title_calls + self.embedding_calls

    def plus(self, other: ModelUsage) -> ModelUsage:
        """Field-by-field sum."""
        return ModelUsage(
            **{name: getattr(self, name) + getattr(other, name) for name in ModelUsage.model_fields}
        )


class BufferedChunk(_Frozen):
    """Observations of a range of one thread's messages, made in the background and not yet active
    (spec §2.9.2 ``bufferedObservationChunks``).

    Attributes:
        id: chunk id (a cycle's id: re-appending the same id is the caller's duplicate to drop).
        thread_id: the thread whose messages were observed.
        from_seq, to_seq: the observed messages' ``seq`` range, inclusive (1 ≤ from ≤ to).
        observations: the Observer's text for those messages.
        token_count: tokens of ``observations``.
        message_tokens: tokens of the observed messages (what activating the chunk takes off the
            pending count).
        created_at: aware UTC.
        current_task, suggested_response, thread_title: hints the Observer gave with the chunk.
    """

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    thread_id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    from_seq: int = Field(ge=1)
    to_seq: int = Field(ge=1)
    observations: str
    token_count: int = Field(0, ge=0)
    message_tokens: int = Field(0, ge=0)
    created_at: datetime
    current_task: str | None = Field(None, max_length=MAX_HINT_CHARS)
    suggested_response: str | None = Field(None, max_length=MAX_HINT_CHARS)
    thread_title: str | None = Field(None, max_length=MAX_HINT_CHARS)

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    @model_validator(mode="after")
    def _range(self) -> BufferedChunk:
        if self.from_seq > self.to_seq:
            raise ValueError(
                f"buffered chunk {self.id!r}: from_seq {self.from_seq} is after to_seq {self.to_seq}"
            )
        return self


class ObservationRecord(_Frozen):
    """The observational-memory state of one thread or one resource (spec §2.9.2).

    One record per scope owner, overwritten in place under optimistic concurrency: Mastra inserts a new
    record per reflection (a generation); Memstack keeps only the head and counts ``generation_count``.

    Attributes:
        scope: ``thread`` (owner: ``resource_id`` + ``thread_id``) or ``resource`` (``thread_id`` is
            ``None``).
        resource_id, thread_id: the owner.
        active_observations: the observation log the model sees.
        origin_type: ``initial`` or ``reflection`` (what produced the active observations).
        generation_count: reflections so far (0 before the first).
        cursor: thread id → the last observed ``seq`` of that thread (Mastra's ``lastObservedAt``, as
            sequence numbers, which never tie). A thread-scoped record has at most its own thread; a
            missing thread has observed nothing (0).
        observation_tokens: tokens of ``active_observations`` (``observationTokenCount``).
        pending_message_tokens: tokens of unobserved messages at the last count.
        total_tokens_observed: message tokens observed over the record's life.
        buffered_chunks: background observations after the cursor, in ``seq`` order per thread (the
            invariant "the buffered list continues right after the cursor": no chunk overlaps another
            or the observed range).
        buffered_reflection, buffered_reflection_tokens, reflected_line_count: a background reflection
            not yet active, its tokens, and how many leading lines of the observations it replaces.
        last_buffered_at_tokens: the pending count at the last buffering boundary.
        current_task, suggested_response, thread_title: the Observer's latest hints.
        reflected_threads: resource scope: the threads whose observations a reflection in the active log
            merged (a reflection cannot be split by thread, so deleting one of them drops it; see
            docs/adr/0004-layers-as-processors.md).
        pending_since: when work was left for later (buffered chunks not yet active, a failed
            observation or reflection); ``None`` when nothing is due. Stores index it so a periodic sweep
            (``MemoryStore.list_observation_work``) finds threads that went idle with work pending.
        failure_count, last_error: consecutive failed background runs and the last one's error (class
            and message, no conversation text); reset by the next success. A failed reflection of any
            kind is recorded as ``ReflectionFailed: …`` (the Reflector's stage backs off, observation
            goes on); any other failure is the Observer's.
        retry_at: when the backoff of the last failure ends (``None``: no failure, or one recorded before
            this field existed, whose end is computed from ``pending_since``): saves make no model call
            for the failed stage before it (docs/observational-memory.md "Scheduling").
        usage: model calls and tokens spent on this record (``ModelUsage``), kept across reflections.
        version: 0 until stored; each write adds one (compare-and-set, ``MemoryStore.put_observation_record``).
        created_at, updated_at: set by the store.

    Raises (on construction): ``pydantic.ValidationError`` for shape, scope and cursor rules. The size
    limit (``MAX_OBSERVATION_RECORD_BYTES``) is checked by ``check_size``, which stores call before writing.
    """

    scope: Literal["thread", "resource"]
    resource_id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    thread_id: str | None = Field(None, min_length=1, max_length=MAX_ID_LENGTH)
    active_observations: str = ""
    origin_type: Literal["initial", "reflection"] = "initial"
    generation_count: int = Field(0, ge=0)
    cursor: dict[str, int] = Field(default_factory=dict, max_length=MAX_CURSOR_THREADS)
    observation_tokens: int = Field(0, ge=0)
    pending_message_tokens: int = Field(0, ge=0)
    total_tokens_observed: int = Field(0, ge=0)
    buffered_chunks: tuple[BufferedChunk, ...] = Field((), max_length=MAX_BUFFERED_CHUNKS)
    buffered_reflection: str | None = None
    buffered_reflection_tokens: int = Field(0, ge=0)
    reflected_line_count: int = Field(0, ge=0)
    last_buffered_at_tokens: int = Field(0, ge=0)
    current_task: str | None = Field(None, max_length=MAX_HINT_CHARS)
    suggested_response: str | None = Field(None, max_length=MAX_HINT_CHARS)
    thread_title: str | None = Field(None, max_length=MAX_HINT_CHARS)
    reflected_threads: tuple[str, ...] = Field((), max_length=MAX_CURSOR_THREADS)
    pending_since: datetime | None = None
    failure_count: int = Field(0, ge=0)
    last_error: str | None = Field(None, max_length=MAX_ERROR_CHARS)
    retry_at: datetime | None = None
    usage: ModelUsage = ModelUsage()
    version: int = Field(0, ge=0)
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @model_validator(mode="after")
    def _rules(self) -> ObservationRecord:
        if self.scope == "thread" and self.thread_id is None:
            raise ValueError("a thread-scoped observation record requires a thread_id")
        if self.scope == "resource" and self.thread_id is not None:
            raise ValueError("a resource-scoped observation record has no thread_id")
        if self.scope == "thread" and set(self.cursor) - {self.thread_id}:
            raise ValueError("the cursor of a thread-scoped record may name its own thread only")
        if any(seq < 0 for seq in self.cursor.values()):
            raise ValueError("cursor seqs must be >= 0")
        last = dict(self.cursor)
        for chunk in self.buffered_chunks:
            if self.scope == "thread" and chunk.thread_id != self.thread_id:
                raise ValueError(f"buffered chunk {chunk.id!r} is of another thread")
            if chunk.from_seq <= last.get(chunk.thread_id, 0):
                raise ValueError(
                    f"buffered chunk {chunk.id!r} starts at seq {chunk.from_seq}, not after the cursor or the "
                    "previous chunk of its thread"
                )
            last[chunk.thread_id] = chunk.to_seq
        for name in ("active_observations", "buffered_reflection", "current_task", "suggested_response"):
            value = getattr(self, name)
            if value is not None:
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError(f"{name} must be valid text (it has a lone surrogate)") from None
        return self

    @field_validator("pending_since", "retry_at")
    @classmethod
    def _aware_pending(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def observed_seq(self, thread_id: str) -> int:
        """The last observed ``seq`` of ``thread_id`` (0: nothing observed yet)."""
        return self.cursor.get(thread_id, 0)

    def content_json(self) -> str:
        """The record without ``version`` and timestamps, as compact JSON (what stores keep)."""
        return self.model_dump_json(exclude={"version", "created_at", "updated_at"})

    def check_size(self) -> str:
        """``content_json()`` of a record validated again (``model_copy(update=…)`` skips validation),
        refused when over the limit. Stores call it before writing.

        Raises:
            InvalidInput: the record breaks a rule (e.g. a copy moved the cursor past a buffered chunk).
            PayloadTooLarge: over ``MAX_OBSERVATION_RECORD_BYTES``, naming the limit.
        """
        from pydantic import ValidationError

        from memstack.errors import InvalidInput, PayloadTooLarge

        encoded = self.content_json()
        try:
            ObservationRecord.model_validate_json(encoded)
        except ValidationError as exc:
            raise InvalidInput(
                f"observation record: {exc.errors()[0]['msg']}", field="observation_record"
            ) from None
        size = len(encoded.encode("utf-8"))
        if size > MAX_OBSERVATION_RECORD_BYTES:
            raise PayloadTooLarge(
                f"the observation record is {size} bytes as JSON, over the limit of "
                f"{MAX_OBSERVATION_RECORD_BYTES} bytes (MAX_OBSERVATION_RECORD_BYTES)",
                field="observation_record",
            )
        return encoded


def same_record(stored: BaseModel, given: BaseModel) -> bool:
    """Whether a stored thread, resource or observation record equals the one a restore writes (JSON
    forms compared, so equal timestamps in other time zones and key orders compare equal). Timestamps the
    given one leaves ``None`` are the store's to set, so they match any stored value."""
    old, new = stored.model_dump(mode="json"), given.model_dump(mode="json")
    for key in ("created_at", "updated_at"):
        if new.get(key, "") is None:
            old.pop(key, None)
            new.pop(key)
    return old == new
