"""Ports: the typed protocols of every outside thing the core uses.

The core (``memory.py``, ``context.py``, ``recall.py``, ``working_memory/``) imports only these, never an
adapter. Every store and index call takes the resource it acts for, and adapters build their keys and
filters from it, so a query that crosses resources cannot be written by accident. Ids of threads and
messages are scoped to their resource (the key is ``(resource_id, id)``).

Each port has one conformance suite in ``tests/contract/`` that every adapter runs unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from memstack.model import Message, ObservationRecord, Resource, Thread, ThreadPage

Vector = list[float]
"""An embedding: a list of floats, L2-normalised by the embedders shipped here."""

ThreadOrder = Literal["created_at", "updated_at"]
Direction = Literal["asc", "desc"]


@dataclass(frozen=True, slots=True)
class MessageWindow:
    """A message plus up to ``before`` earlier and ``after`` later messages of its thread (by ``seq``)."""

    thread_id: str
    seq: int
    before: int = 0
    after: int = 0


@dataclass(frozen=True, slots=True)
class ThreadErasure:
    """What ``MemoryStore.erase_thread`` deleted: the thread's messages and its thread-scope observation
    record (0 or 1)."""

    messages: int
    observation_records: int = 0


@runtime_checkable
class MemoryStore(Protocol):
    """Threads, messages and resources of every resource, always addressed through the resource.

    Access patterns are key lookups or one query each (no scans). Errors: adapters translate library
    errors to ``memstack.errors`` (``Conflict`` for lost conditional writes, ``Unavailable`` for
    throttling or an unreachable backend).
    """

    def create_thread(self, thread: Thread) -> Thread:
        """Store a new thread. Raises ``Conflict`` if the resource already has a thread with this id.

        Thread and message ids are scoped to their resource: two resources may use the same id for two
        different threads (or messages), so no call can tell a tenant whether an id exists elsewhere."""
        ...

    def get_thread(self, resource_id: str, thread_id: str) -> Thread | None:
        """The thread if it exists *and* belongs to ``resource_id``; ``None`` otherwise."""
        ...

    def list_threads(
        self,
        resource_id: str,
        *,
        order_by: ThreadOrder = "created_at",
        direction: Direction = "desc",
        limit: int = 100,
        cursor: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ThreadPage:
        """A page of the resource's threads, sorted by ``order_by`` then id, filtered by metadata equality
        (AND over top-level keys). ``cursor`` is the opaque ``next_cursor`` of the previous page; a
        malformed cursor raises ``InvalidInput``."""
        ...

    def update_thread(
        self,
        resource_id: str,
        thread_id: str,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        updated_at: datetime,
        expected_version: int | None = None,
        expected_title: str | None = None,
        expected_created_at: datetime | None = None,
        expected_messages: Mapping[str, int] | None = None,
    ) -> Thread:
        """Partial update: ``None`` leaves a field as it is; metadata is merged shallowly over the stored
        object; ``version`` increases by one.

        Args:
            expected_created_at: the thread's ``created_at`` as read: the write lands only on that thread,
                not on one deleted and made again under the same id since.
            expected_messages: ``{message id: seq}``: the write happens only while each of these messages
                is still stored in the thread at that seq, checked atomically with the write (a title made
                from them is not set once one of them is deleted).

        Raises:
            NotFound: the thread is missing or another resource's.
            Conflict: a condition does not hold, and nothing is written: ``expected_version`` differs from
                the stored version (field ``version``); ``expected_title`` from the stored title (field
                ``title``: a field-level compare-and-set — a background title is set only while the title
                is still ``""``, whatever else changed); ``expected_created_at`` from the stored one (field
                ``thread_id``); a message of ``expected_messages`` is gone (field ``messages``).
            InvalidInput: more ``expected_messages`` than the store checks in one write (DynamoDB: 99).
        """
        ...

    def delete_thread(self, resource_id: str, thread_id: str) -> bool:
        """Delete the thread and all its messages; ``False`` if it did not exist for this resource.
        The same deletion as ``erase_thread``."""
        ...

    def erase_thread(self, resource_id: str, thread_id: str) -> ThreadErasure | None:
        """Delete the thread and everything the store keeps under it: its record, its messages (with
        their bodies, id pointers and index marks) and its thread-scope observation record (so it also
        leaves ``list_observation_work``). Nothing keyed by the thread remains.

        Idempotent, and resumable: a deletion that failed midway is finished by the next call.

        Returns:
            How many messages and thread-scope observation records (0 or 1) were deleted; ``None`` when
            the resource has no such thread.
        """
        ...

    def delete_resource(self, resource_id: str) -> bool:
        """Delete the resource record (resource-scoped working memory and metadata). Threads and the
        resource-scope observation record are deleted by their own calls.

        Returns:
            ``True`` if a record was deleted, ``False`` if there was none (a second call).
        """
        ...

    def delete_observation_record(self, resource_id: str, thread_id: str | None) -> bool:
        """Delete the observation record of the thread ``thread_id`` of this resource (thread scope) or,
        with ``None``, of the resource (resource scope); it leaves ``list_observation_work`` with it.

        Returns:
            ``True`` if a record was deleted, ``False`` if there was none.
        """
        ...

    def save_messages(
        self,
        resource_id: str,
        thread_id: str,
        messages: Sequence[Message],
        *,
        create: Thread | None = None,
        expected_last_seq: int | None = None,
    ) -> list[Message]:
        """Save a batch atomically, in the given order.

        A new id gets the thread's next ``seq``; an existing id of this thread is updated in place and
        keeps its ``seq`` (and ``created_at``). The thread's ``updated_at`` becomes the latest
        ``created_at`` saved, or now. If the thread does not exist and ``create`` is given, it is created
        in the same write. The new messages of one batch get consecutive ``seq``s, whatever other writers
        do meanwhile.

        With ``expected_last_seq`` the save is a compare-and-set on the thread's last ``seq``
        (``Thread.last_seq``; 0 for a thread not created yet): optimistic concurrency for a caller that
        must not interleave two turns.

        Returns:
            The saved messages, with ``seq`` set, in the given order.

        Raises:
            NotFound: the thread is missing (and ``create`` is ``None``) or belongs to another resource.
            Conflict: an id belongs to a message of another thread of this resource; or
                ``expected_last_seq`` is given and the thread's last ``seq`` differs (nothing is written).
        """
        ...

    def list_messages(
        self,
        resource_id: str,
        thread_id: str,
        *,
        limit: int,
        after_seq: int | None = None,
        before_seq: int | None = None,
        newest_first: bool = False,
    ) -> list[Message]:
        """Up to ``limit`` messages of the thread with ``after_seq < seq < before_seq``, ordered by
        ``seq`` (descending if ``newest_first``). Another resource's thread yields ``[]``."""
        ...

    def get_thread_with_history(
        self, resource_id: str, thread_id: str, *, last: int
    ) -> tuple[Thread | None, list[Message]]:
        """The thread (``None`` if missing or another resource's) and its last ``last`` messages in
        ``seq`` order (``[]`` when the thread is ``None``), read together: the head of every turn's
        context, one query on a backend that keeps a thread and its messages in one partition."""
        ...

    def get_messages(self, resource_id: str, message_ids: Sequence[str]) -> list[Message]:
        """The messages of this resource with these ids (missing ids are left out), in no set order."""
        ...

    def message_windows(self, resource_id: str, windows: Sequence[MessageWindow]) -> list[Message]:
        """Every message of every window (the ``seq`` itself plus neighbours that exist), de-duplicated,
        ordered by thread then ``seq``. Gaps left by deletions are skipped, not counted."""
        ...

    def get_resource_and_windows(
        self, resource_id: str, windows: Sequence[MessageWindow]
    ) -> tuple[Resource | None, list[Message]]:
        """``get_resource`` and ``message_windows`` read together: the recall step of a turn's context
        fetches the resource's working memory with the recalled messages (one BatchGetItem on DynamoDB)."""
        ...

    def delete_messages(self, resource_id: str, message_ids: Sequence[str]) -> list[Message]:
        """Delete these messages of this resource; returns the ones that existed."""
        ...

    def get_index_marks(self, resource_id: str, message_ids: Sequence[str]) -> dict[str, str]:
        """Message id → the fingerprint recorded by ``set_index_marks`` for these messages of this resource.

        A message that was never marked, was saved again since (any save clears its mark), was deleted or
        is another resource's is left out. Indexers use the marks to index each content of a message
        exactly once, whatever the replays (on Serverless OpenSearch, ``_id`` cannot do it)."""
        ...

    def set_index_marks(
        self,
        resource_id: str,
        marks: dict[str, str],
        *,
        documents: Mapping[str, Sequence[str]] | None = None,
        expected: Mapping[str, str | None] | None = None,
    ) -> list[str]:
        """Record message id → fingerprint for messages of this resource that still exist (the others are
        skipped quietly: a message deleted while it was being indexed stays unmarked).

        Args:
            marks: message id → fingerprint.
            documents: message id → the ids of its documents in the search index, kept with the mark
                (``get_index_state``) and, unlike the fingerprint, kept across saves of the message, so the
                next indexer can delete exactly those documents (Serverless OpenSearch finds them by search
                only after a delay).
            expected: message id → the fingerprint the caller read (``None``: no mark). A message whose
                mark has changed since is not marked: two indexers of one batch both write documents,
                and only the first to mark keeps them.

        Returns:
            The ids not marked: gone, another resource's, or (with ``expected``) marked by someone else.
        """
        ...

    def get_index_state(self, resource_id: str, message_ids: Sequence[str]) -> dict[str, IndexState]:
        """Message id → its ``IndexState`` for these messages of this resource that exist (one read, as
        ``get_index_marks``)."""
        ...

    def get_resource(self, resource_id: str) -> Resource | None:
        """The resource record, or ``None`` if never written."""
        ...

    def put_resource(self, resource: Resource, *, expected_version: int) -> Resource:
        """Write the resource if its stored version equals ``expected_version`` (a resource never
        written has version 0). Returns it as stored, with ``version = expected_version + 1``.

        Raises:
            Conflict: the stored version differs (someone else wrote first).
        """
        ...

    def get_observation_record(self, resource_id: str, thread_id: str | None) -> ObservationRecord | None:
        """The observational-memory record (spec §2.9.2) of the thread ``thread_id`` of this resource
        (thread scope), or of the resource itself when ``thread_id`` is ``None`` (resource scope);
        ``None`` if never written, deleted with its thread, or the thread is another resource's.
        Thread- and resource-scoped records are separate: neither reads the other."""
        ...

    def put_observation_record(
        self, record: ObservationRecord, *, expected_version: int
    ) -> ObservationRecord:
        """Write ``record`` (owner: ``record.resource_id`` and, in thread scope, ``record.thread_id``) if
        the stored version equals ``expected_version`` (0: never written). Returns it as stored, with
        ``version = expected_version + 1`` and ``created_at`` (first write) / ``updated_at`` (now).

        Raises:
            Conflict: the stored version differs (someone else wrote first); nothing is written.
            NotFound: thread scope and the thread is missing or another resource's.
            PayloadTooLarge: the record is over ``MAX_OBSERVATION_RECORD_BYTES`` as JSON.
        """
        ...

    def list_observation_work(self, *, due_before: datetime, limit: int) -> list[tuple[str, str | None]]:
        """``(resource_id, thread_id)`` of observation records whose ``pending_since`` is set and at or
        before ``due_before``, oldest first, at most ``limit`` (1..1000; else ``InvalidInput``).
        ``thread_id`` is ``None`` for resource-scoped records.

        The one query that crosses resources: the periodic sweep of the background observation path
        (spec §2.9; DESIGN.md "Step Functions") uses it to restart work that went idle. It returns ids
        only, never content. Backed by an index (a sparse GSI on DynamoDB), never a scan."""
        ...

    # transfer: export, import and migration between backends (memstack.transfer) ---------------------

    def list_resource_ids(self, *, limit: int, cursor: str | None = None) -> ResourceIdPage:
        """A page of the ids of every resource that owns something here (a thread, a resource record or a
        resource-scope observation record), at most ``limit`` (1..1000, else ``InvalidInput``) per page.

        The one full read of the store, for operators' bulk jobs (``memstack export``, ``memstack
        reindex``), never on a request path: on DynamoDB it is a paginated Scan of keys. Within a page an
        id appears once; across pages an id may repeat (a Scan meets a resource's items in several places),
        so callers de-duplicate. A malformed ``cursor`` raises ``InvalidInput``."""
        ...

    def read_snapshot(self) -> AbstractContextManager[None]:
        """A block whose reads, made by the calling thread, see one state of the store where the backend
        has snapshots; elsewhere the reads inside it are the plain reads. ``memstack export`` reads a whole
        selection inside one, so a file taken while writers continue holds one moment of the store.

        SQLite: one read transaction (WAL mode gives it a snapshot that writers, in this or another
        process, do not disturb; the write-ahead log cannot be checkpointed past it until the block ends).
        An in-memory SQLite database has one connection, so there its reads and writes share it.
        DynamoDB: no snapshot exists across items (only ``TransactGetItems`` of up to 100 items), so the
        block adds nothing; a reader that needs agreement between items orders its reads (``transfer.exporter``).
        """
        ...

    def restore_thread(self, thread: Thread) -> Thread:
        """Write ``thread`` exactly as given — ``created_at``, ``updated_at``, ``version`` and ``last_seq``
        included — for an import. Idempotent: a stored thread equal to ``thread`` is left as it is (an
        interrupted import runs again).

        Raises:
            Conflict: the resource has a thread with this id that differs (field ``thread_id``).
        """
        ...

    def restore_messages(self, resource_id: str, thread_id: str, messages: Sequence[Message]) -> int:
        """Write messages with their own ids, ``seq`` and ``created_at`` into a thread written by
        ``restore_thread``, leaving the thread record (``last_seq``, ``updated_at``) as it is. A message
        stored exactly so already is left as it is, index mark included (so importing a file again writes
        and embeds nothing); one stored under the same id and ``seq`` with other content is overwritten.
        Written messages have no index mark, so the next indexing embeds them.

        Returns:
            How many messages were written (new or changed).

        Raises:
            NotFound: the thread is missing or another resource's.
            InvalidInput: a message of another thread or resource, a ``seq`` below 1 or above the thread's
                ``last_seq``, or an id or ``seq`` repeated in the batch.
            Conflict: an id stored in another thread or at another ``seq``, or a ``seq`` held by another
                message (nothing of a conflicting batch is written on SQLite; on DynamoDB each transaction
                of up to 49 messages is atomic).
        """
        ...

    def restore_resource(self, resource: Resource) -> Resource:
        """Write the resource record exactly as given (working memory, metadata, ``version``, timestamps;
        missing timestamps become now). Idempotent as ``restore_thread``.

        Raises:
            Conflict: a different record of this resource exists (field ``resource_id``).
        """
        ...

    def restore_observation_record(self, record: ObservationRecord) -> ObservationRecord:
        """Write the observation record exactly as given (``version`` and timestamps too; ``pending_since``
        keeps it in ``list_observation_work``). Idempotent as ``restore_thread``.

        Raises:
            Conflict: a different record of this owner exists.
            NotFound: thread scope and the thread is missing or another resource's.
            PayloadTooLarge: over ``MAX_OBSERVATION_RECORD_BYTES``.
        """
        ...

    def close(self) -> None:
        """Release connections."""
        ...


@dataclass(frozen=True, slots=True)
class ResourceIdPage:
    """A page of ``MemoryStore.list_resource_ids``: resource ids and the opaque cursor of the next page
    (``None`` on the last page)."""

    ids: tuple[str, ...]
    next_cursor: str | None = None


@runtime_checkable
class UnindexedMessages(Protocol):
    """A store that can list messages saved but never marked as indexed: the ones a crash between the
    store's commit and inline indexing left unsearchable, or whose stream records the indexer gave up on
    (its dead-letter queue). ``Memory.reconcile_index`` indexes them. SQLite and DynamoDB both implement
    it (the store conformance suite checks it on each); a store without it is simply not reconciled."""

    def list_unindexed(self, *, limit: int) -> list[tuple[str, str, str]]:
        """Up to ``limit`` ``(resource_id, thread_id, message_id)`` of messages without an index mark, each
        once, across resources (ids only, never content); ``[]`` for ``limit <= 0``.

        A save puts a message on the list (a save clears its mark), ``set_index_marks`` takes it off, a
        deletion (of the message, its thread or by TTL) removes it. The order is the adapter's: SQLite
        lists by resource, thread and ``seq``, DynamoDB oldest save first. Backed by an index of the
        unmarked rows (a partial index, a sparse GSI), never a scan; on DynamoDB the index is eventually
        consistent, so a message saved or marked a moment ago may still be missing or listed."""
        ...


@dataclass(frozen=True, slots=True)
class IndexState:
    """What the store knows of a message's place in the search index.

    Attributes:
        fingerprint: the mark of the content last indexed; ``None`` when never marked or saved since.
        documents: the search-index document ids of the message's chunks as last indexed (kept across
            saves; empty when none were recorded).
    """

    fingerprint: str | None = None
    documents: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One indexed chunk of a message: its text for keyword search and its vector.

    ``metadata`` is what a recall ``filter`` matches: the thread's metadata at save time merged with the
    message's, plus ``role`` and ``thread_id``. ``context`` is text the keyword side indexes with the
    chunk but the vector does not embed: for a message's first chunk, the text of the message before it
    in its thread (the turn it answers; docs/adr/0015-contextual-keyword-text.md), ``""`` for none.
    """

    message_id: str
    chunk: int
    thread_id: str
    resource_id: str
    role: str
    seq: int
    created_at: datetime
    text: str
    vector: Vector
    metadata: dict[str, Any] = field(default_factory=dict)
    context: str = ""


@dataclass(frozen=True, slots=True)
class IndexHit:
    """A message that matched, with the score of its best chunk (higher is better) and its ``seq``.

    Vector scores are cosine similarity in [-1, 1]; keyword scores are positive BM25 values.
    """

    message_id: str
    thread_id: str
    score: float
    seq: int = 0


@dataclass(frozen=True, slots=True)
class SearchResults:
    """Both result lists of one search call; a list is ``None`` when that retriever was not asked."""

    vector: list[IndexHit] | None
    keyword: list[IndexHit] | None


MAX_TOP_K = 10_000
"""Largest ``top_k`` a ``SearchIndex.search`` accepts; recall never asks for more, whatever its options."""


@runtime_checkable
class SearchIndex(Protocol):
    """Vector and keyword (BM25) search over message chunks, filtered inside the search.

    An adapter is built for one embedding dimension and refuses an existing index of another
    dimension at start-up (``InvalidInput``), never returning silently empty results.
    """

    dimension: int

    def upsert(self, entries: Sequence[IndexEntry], *, replace: bool = True) -> dict[str, list[str]]:
        """Index these chunks.

        Args:
            replace: for every message id in ``entries`` remove all previously indexed chunks, so
                re-indexing never duplicates. ``False`` when the caller removes the earlier documents itself
                by id (``delete_documents``, ids kept with the index marks): where document ids are
                assigned by the server (Serverless OpenSearch) finding them takes an eventually consistent
                search. Indexes with deterministic ids replace in either case.

        Returns:
            Message id → the ids of the documents written for it, in chunk order.
        """
        ...

    def delete_documents(self, resource_id: str, document_ids: Sequence[str]) -> None:
        """Remove these documents (ids ``upsert`` returned for this resource's messages, as the store's index
        marks keep them); unknown ids are ignored. Adapters whose ids are assigned by the server delete by
        id alone, so callers name only ids read from this resource's marks."""
        ...

    def delete_messages(self, resource_id: str, message_ids: Sequence[str]) -> None:
        """Remove every chunk of these messages of this resource."""
        ...

    def delete_thread(self, resource_id: str, thread_id: str) -> None:
        """Remove every chunk of the thread."""
        ...

    def delete_resource(self, resource_id: str) -> int:
        """Remove every chunk of every thread of the resource (idempotent: a second call returns 0).

        Returns:
            How many index documents (chunks) were removed.
        """
        ...

    def search(
        self,
        resource_id: str,
        *,
        top_k: int,
        vector: Vector | None = None,
        text: str | None = None,
        thread_id: str | None = None,
        filter: dict[str, Any] | None = None,
    ) -> SearchResults:
        """Search the resource (or one of its threads) by vector, by keywords, or both in one call.

        Each list holds up to ``top_k`` (1..``MAX_TOP_K``) distinct messages, best first, all matching ``filter``
        (a validated metadata filter, see ``memstack.filters``) — the filter applies inside the
        search, so a filtered query still returns up to ``top_k`` hits.
        """
        ...

    def close(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class RebuildableIndex(Protocol):
    """A ``SearchIndex`` that records the embedding model of its vectors and is moved to another model by a
    rebuild (``memstack reindex``). Opened for a rebuild (an adapter option the composition root sets:
    ``SqliteSearchIndex(rebuild=True)``) it drops the vectors of the model it recorded, records the new one
    and is marked as rebuilding; while so marked it refuses to open for anything but the rebuild, so a
    half-built index is never searched. An index per model needs none of this (OpenSearch: one index per
    model and dimension, chosen by the deployment's embedder), and does not implement it.

    Attributes:
        rebuilding: whether a rebuild is unfinished.
    """

    rebuilding: bool

    def finish_rebuild(self) -> None:
        """Mark the rebuild done: every message is indexed for the new model."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Turns text into vectors.

    Attributes:
        model_id: names the model and dimension; part of the embedding-cache key.
        dimension: length of every vector.
        symmetric: ``True`` when queries and documents are embedded the same way (so a query
            embedding can be reused for the same text saved as a message).

    An embedder may also declare ``fusion_weight: float``, the vector list's prior weight in hybrid fusion
    (optional, so not a member of the protocol; ``memstack.recall.engine.fusion_weight`` reads it, 1.0 when
    absent; docs/adr/0011-spread-weighted-fusion.md). A wrapper around an embedder should pass it on.
    Likewise optional, ``zero_for_words: bool``: ``True`` when the zero vector can be a real answer for a
    text with words (feature hashing); otherwise such an answer is refused as a fault, like NaN
    (``memstack.recall.engine.SemanticRecall.valid_vector``). And ``bounded_latency: bool``: ``True`` for
    in-process work whose time is bounded by its input (no I/O, no waiting); recall then calls it on the
    caller's thread. Any other embedder is called on a thread of its own and waited for only until the
    turn's deadline (``memstack.deadline.Guard``), so one that hangs, or a server that trickles its answer,
    cannot hold a save, a recall or a turn past ``context_timeout_ms``.
    """

    model_id: str
    dimension: int
    symmetric: bool

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """One vector of ``dimension`` finite floats per text, in order, the same for a text in any batch:
        unit length for a text with words, unit or zero for one without. ``[]`` for no texts, without a
        backend call.

        Raises:
            Unavailable: the backend failed.
            InvalidInput: the backend refused the input (too long a text) or the credentials.
        """
        ...

    def embed_query(self, text: str) -> Vector:
        """The unit vector of a search query, nearer to its own text's document vector than to unrelated
        texts' (equal to it when ``symmetric``). Raises as ``embed_documents``."""
        ...


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens the way the target model does (tiktoken ``o200k_base`` by default)."""

    name: str

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...


@dataclass(frozen=True, slots=True)
class ChatResult:
    """A chat model's answer: its text, tool calls (OpenAI function-call shape) and token usage."""

    text: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0


@runtime_checkable
class ChatModel(Protocol):
    """A chat-completions model (for the Observer, the Reflector and titles)."""

    model_id: str

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        """Answer an OpenAI-shaped message list; ``tools``, ``max_output_tokens`` and ``temperature`` are
        sent only when given. Tool calls come back as OpenAI dicts (``arguments`` a JSON string).

        Raises:
            Unavailable: throttling, 5xx or an unusable answer.
            InvalidInput: the endpoint refused the request, or the messages are not sendable text.
        """
        ...


@dataclass(frozen=True, slots=True)
class ObservationJob:
    """Background observational-memory work for one thread (ids only: Step Functions payloads stay
    far below their 256 KB limit).

    Attributes:
        resource_id, thread_id: the thread whose messages are observed (in resource scope the record is
            the resource's; the thread says whose messages triggered the work).
        key: an idempotency key built from the record's version and the thread's last ``seq`` at trigger
            time. Two triggers that see the same state make the same key, so a scheduler that refuses a
            repeated key (Step Functions execution names) never starts the same work twice. At most 80
            characters of ``[A-Za-z0-9_-]``.
        reason: why it was scheduled: ``buffer``, ``threshold``, ``reflect``, ``title``, ``sweep``.
    """

    resource_id: str
    thread_id: str
    key: str
    reason: str


@runtime_checkable
class ObservationScheduler(Protocol):
    """Runs ``ObservationJob``s in the background: in-process locally
    (``memstack.observation.scheduler.InProcessScheduler``), a Step Functions execution on AWS
    (``memstack.adapters.stepfunctions.StepFunctionsScheduler``)."""

    def submit(self, job: ObservationJob) -> None:
        """Start the job, or do nothing if a job with the same key was already started (whatever its
        reason). Never blocks on the job itself, except in a scheduler built to run jobs inline (tests,
        one-shot scripts). Raises ``Unavailable`` if the job cannot be started (then it is not started)."""
        ...


@runtime_checkable
class Clock(Protocol):
    """The time source (injected so tests can fix it)."""

    def now(self) -> datetime:
        """The current time, aware UTC."""
        ...
