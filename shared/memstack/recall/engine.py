"""Semantic recall (spec §2.8, doing the right thing at each GOTCHA of §7.1–7.2):

* indexing: every non-system message, chunked, tool calls and results included as text, the thread's
  metadata snapshotted into each chunk so ``filter`` can match it, chunk ids derived from the message id
  (re-indexing replaces, never duplicates);
* search: ``vector``, ``keyword`` or ``hybrid`` (weighted fusion in the core, ``memstack.fusion``), the
  scope and the user's filter applied inside the search;
* an embedding cache shared by queries and documents (a query's embedding is reused when the same text is
  saved, for symmetric embedders);
* every embedder request made for a thread is reported to an ``EmbeddingMeter`` (cost accounting,
  ``ModelUsage.embedding_*``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from memstack import deadline
from memstack.config import SemanticRecallOptions
from memstack.dates import TimeRange, keyword_query, query_time_range, time_zone
from memstack.errors import Unavailable
from memstack.fusion import FusedHit, fuse, keyword_relevance
from memstack.model import Message, Resource, Thread
from memstack.ports import (
    MAX_TOP_K,
    Clock,
    Embedder,
    IndexEntry,
    IndexHit,
    IndexState,
    MemoryStore,
    MessageWindow,
    SearchIndex,
    Vector,
)
from memstack.recall import window
from memstack.text import chunk_text, searchable_text
from memstack.working_memory import THREAD_METADATA_KEY

logger = logging.getLogger(__name__)

_BACKFILL_ROUNDS = 3
"""How many times recall searches again to replace hits whose messages are gone from the store."""


EmbeddingMeter = Callable[[str, str, Sequence[str]], None]
"""Told of each embedder request made for a thread: ``(resource_id, thread_id, texts sent)``."""

ThreadKey = tuple[str, str]
"""``(resource_id, thread_id)``: the thread an embedding is made for."""

INDEX_TEXT_VERSION = 2
"""The version of what ``index_messages`` writes for a message, part of every index mark's fingerprint, so
marks made by another version read as stale (``Memory.index_health``) and ``memstack reindex`` rewrites
them: 1 — the message's chunks; 2 — the first chunk's keyword side also carries the previous message's
text (``keyword_context``; docs/adr/0015-contextual-keyword-text.md)."""

INDEX_EXCLUDED_THREAD_KEYS = frozenset({THREAD_METADATA_KEY, "clone"})
"""Thread metadata keys not copied into index entries: working memory and clone bookkeeping are not
something to filter recall by, and copying them into every chunk would bloat the index."""


def entry_metadata(thread: Thread, message: Message) -> dict[str, Any]:
    """What a recall ``filter`` matches for a message: the thread's metadata (at save time) merged with the
    message's, plus ``role`` and ``thread_id``."""
    base = {k: v for k, v in thread.metadata.items() if k not in INDEX_EXCLUDED_THREAD_KEYS}
    return {**base, **message.metadata, "role": message.role, "thread_id": thread.id}


def keyword_context(previous: Message | None, options: SemanticRecallOptions) -> str:
    """What a message's first chunk indexes on the keyword side besides its own text: the last chunk of the
    previous message's searchable text in its thread (the part nearest the message; at most
    ``options.chunk_chars`` characters), ``""`` when there is none.

    A reply's words are often not the question's ("Yes, adoption agencies!" answers "What did you
    research?"), and a fact told over two turns has half its words in each; indexing the turn it follows
    lets BM25 match both halves (docs/adr/0015: evidence recall at Mastra's budget 0.714 → 0.755 on LoCoMo
    dev, 0.792 → 0.865 on LongMemEval dev). The vector side embeds the message alone: the same context
    there helped LoCoMo and cost LongMemEval.
    """
    if previous is None:
        return ""
    text = searchable_text(previous, options.tool_text_chars)
    chunks = chunk_text(text, options.chunk_chars) if text else []
    return chunks[-1] if chunks else ""


_V = TypeVar("_V")

FLOAT32_MAX = 3.4028234663852886e38
"""The largest finite float32: the indexes store vectors as float32."""

FLOAT32_ROUNDS_TO_ZERO = 7.006492321624085e-46
"""Half float32's smallest subnormal: a value of smaller magnitude rounds to 0 in float32 (ties to even)."""


class EmbeddingCache:
    """A bounded, thread-safe LRU of embeddings keyed by (model, kind, sha1 of text).

    Args:
        max_entries: how many vectors to keep (default 4,096; about 4 MB at 256 dimensions).
    """

    def __init__(self, max_entries: int = 4_096) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[tuple[str, str, bytes], Vector] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(embedder: Embedder, kind: str, text: str) -> tuple[str, str, bytes]:
        """The cache key; queries and documents share keys when the embedder is symmetric."""
        k = "d" if embedder.symmetric else kind
        return (embedder.model_id, k, hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest())

    def get(self, key: tuple[str, str, bytes]) -> Vector | None:
        """The cached vector, or ``None``."""
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: tuple[str, str, bytes], vector: Vector) -> None:
        """Remember a vector, evicting the least recently used beyond ``max_entries``."""
        with self._lock:
            self._data[key] = vector
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


@dataclass(frozen=True, slots=True)
class IndexPlan:
    """What indexing a message makes: its number of chunks (0: nothing searchable) and the fingerprint
    the store marks it with (``MemoryStore.set_index_marks``)."""

    chunks: int
    fingerprint: str


@dataclass(frozen=True, slots=True)
class RecallResult:
    """What recall found: the fused hits (best first) and the messages around them (by thread, seq)."""

    hits: list[FusedHit]
    messages: list[Message]
    resource: Resource | None = None
    """The resource record, when asked for with ``with_resource`` (read with the messages)."""


class SemanticRecall:
    """Indexes messages and searches them. Knows only ports.

    Args:
        store: where messages live (for neighbours and to drop hits the index still has but the store
            no longer does).
        index: the vector + keyword index.
        embedder: turns text into vectors.
        cache: the embedding cache (a new one if omitted).
        meter: told of every embedder request made for a thread (cache hits make none).
        clock: the time a query's relative dates are read against when the options give no ``now``
            (the system clock if omitted).
    """

    def __init__(
        self,
        store: MemoryStore,
        index: SearchIndex,
        embedder: Embedder,
        cache: EmbeddingCache | None = None,
        meter: EmbeddingMeter | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.store = store
        self.index = index
        self.embedder = embedder
        self.cache = cache or EmbeddingCache()
        self.meter = meter
        self.clock = clock
        self._guard = deadline.Guard(f"the embedder ({embedder.model_id})")

    def _embedder_call(self, fn: Callable[..., _V], *args: Any) -> _V:
        """An embedder request, waited for until the turn's deadline (``deadline.Guard``) unless the
        embedder declares ``bounded_latency`` (in-process work bounded by its input: no thread needed)."""
        if getattr(self.embedder, "bounded_latency", False):
            return fn(*args)
        return self._guard.call(fn, *args)

    def time_range(self, query: str, options: SemanticRecallOptions) -> TimeRange | None:
        """The time ``query`` names, read in ``options.time_zone`` against ``options.now`` (else the
        clock): ``memstack.dates.query_time_range``."""
        now = options.now or (self.clock.now() if self.clock is not None else datetime.now(UTC))
        return query_time_range(query, now, time_zone(options.time_zone))

    # embedding -----------------------------------------------------------------------------------

    def embed_query(self, text: str, *, thread: ThreadKey | None = None) -> Vector:
        """The query vector of ``text``, through the cache; an embedder request is metered for ``thread``
        when given (answered requests count, a malformed answer too).

        Raises:
            Unavailable: the embedder answered a malformed vector (``valid_vector``); nothing is cached.
            Whatever else the embedder raises.
        """
        key = self.cache.key(self.embedder, "q", text)
        vector = self.cache.get(key)
        if vector is None:
            answer = self._embedder_call(self.embedder.embed_query, text)
            self._metered(thread, [text])
            vector = self.valid_vector(answer, text)
            self.cache.put(key, vector)
        return vector

    def embed_documents(self, texts: Sequence[str], *, thread: ThreadKey | None = None) -> list[Vector]:
        """Document vectors of ``texts``, embedding only cache misses, in one batch (metered for
        ``thread`` when given).

        Raises:
            Unavailable: the embedder answered another number of vectors than texts, or a malformed vector
                (``valid_vector``); none of the answer is cached, so the next try embeds again.
            Whatever else the embedder raises.
        """
        keys = [self.cache.key(self.embedder, "d", t) for t in texts]
        out: list[Vector | None] = [self.cache.get(k) for k in keys]
        missing = [i for i, v in enumerate(out) if v is None]
        if missing:
            sent = [texts[i] for i in missing]
            vectors = self._embedder_call(self.embedder.embed_documents, sent)
            self._metered(thread, sent)
            if len(vectors) != len(missing):
                raise Unavailable(
                    f"the embedder ({self.embedder.model_id}) answered {len(vectors)} vectors for "
                    f"{len(missing)} texts"
                )
            checked = [self.valid_vector(v, t) for v, t in zip(vectors, sent, strict=True)]
            for i, vec in zip(missing, checked, strict=True):
                out[i] = vec
                self.cache.put(keys[i], vec)
        return [v for v in out if v is not None]

    def _metered(self, thread: ThreadKey | None, texts: Sequence[str]) -> None:
        if self.meter is not None and thread is not None:
            self.meter(thread[0], thread[1], texts)

    def valid_vector(self, vector: Vector, text: str | None = None) -> Vector:
        """``vector`` if it is ``embedder.dimension`` finite numbers, and not all zero when ``text`` has
        words; a malformed answer is treated as a transient failure of the embedder and must never be
        cached (it would stick until restart).

        The ``Embedder`` port promises a unit vector for a text with words and allows the zero vector only
        for a text without (empty, only punctuation or emoji: stored without a vector, found by keywords).
        A remote model's all-zero answer for words is a fault like NaN: kept, it would be a chunk no vector
        search can ever find while index health counts it indexed. An embedder whose sums can cancel for
        real words (feature hashing) declares ``zero_for_words = True`` and its zero is accepted.

        Args:
            vector: the embedder's answer.
            text: the text it was asked to embed (``None``: the zero check is skipped).

        Vectors are checked as the indexes keep them, float32: a value float64 holds but float32 does not
        (beyond ±3.4e38) is not finite, and a vector whose values all round to 0 in float32 (below ~7e-46)
        is all zero — else the index would refuse it as a caller's error on a save, and on a turn's query.

        Raises:
            Unavailable: wrong length, a value that is not a finite float32, or all zero for words.
        """
        try:
            # one sum: NaN and infinities propagate, huge values overflow to infinity, non-numbers raise
            finite = (
                len(vector) == self.embedder.dimension
                and math.isfinite(sum(vector))
                and min(vector) >= -FLOAT32_MAX
                and max(vector) <= FLOAT32_MAX
            )
        except (TypeError, OverflowError, ValueError):
            finite = False
        if not finite:
            raise Unavailable(
                f"the embedder ({self.embedder.model_id}) answered a malformed vector "
                f"({len(vector)} values, {self.embedder.dimension} expected, or not all finite float32 numbers)"
            )
        zero = min(vector) > -FLOAT32_ROUNDS_TO_ZERO and max(vector) < FLOAT32_ROUNDS_TO_ZERO
        if text is not None and zero and _has_words(text) and not _zero_for_words(self.embedder):
            raise Unavailable(
                f"the embedder ({self.embedder.model_id}) answered an all-zero vector for a text with words "
                "(a zero vector is valid only for a text without words)"
            )
        return vector

    # indexing ------------------------------------------------------------------------------------

    def index_messages(
        self,
        thread: Thread,
        messages: Sequence[Message],
        options: SemanticRecallOptions,
        *,
        once: bool = False,
        metered: bool = True,
    ) -> int:
        """Index (or re-index) these messages of ``thread``; returns the number of chunks written.

        A message's first chunk carries the previous message's text on the keyword side
        (``keyword_context``), read from the batch or the store; a message the batch re-indexes makes the
        message after it (when that exists and is not in the batch) be indexed again ``once``, since its
        context is the re-indexed text.

        Messages without searchable text are removed from the index instead. Every indexed message is
        marked in the store (``MemoryStore.set_index_marks``) with the fingerprint of what was indexed and
        the ids of the documents written, and the documents of its previous indexing are deleted by those
        ids — on Serverless OpenSearch the search that could find them lags the writes, so an update
        within the lag would otherwise keep the old chunk.

        With ``once`` each content of a message is indexed exactly once: a message whose mark equals the
        fingerprint of what would be indexed is skipped, and marking is a compare-and-set on the mark that
        was read — of two indexers of one stream batch only the first to mark keeps its documents, the
        other deletes its own (on Serverless OpenSearch the document ``_id`` cannot de-duplicate).
        ``metered=False`` leaves the embedding calls out of the thread's usage (``ModelUsage``): an
        operator's bulk job (``memstack import``, ``memstack reindex``) is not what the conversation cost.
        Raises what the embedder, index or store raises (the caller decides whether that fails the call).
        """
        return self._index(thread, messages, options, once=once, metered=metered, follow=True)

    def _index(
        self,
        thread: Thread,
        messages: Sequence[Message],
        options: SemanticRecallOptions,
        *,
        once: bool,
        metered: bool,
        follow: bool,
    ) -> int:
        """``index_messages``; with ``follow`` the messages after the batch are refreshed too."""
        rid = thread.resource_id
        previous, following = self._neighbours(thread, messages, follow=follow)
        planned: dict[str, tuple[Message, list[str], str, str]] = {}
        for message in messages:
            text = searchable_text(message, options.tool_text_chars)
            chunks = chunk_text(text, options.chunk_chars) if text else []
            context = keyword_context(previous.get(message.id), options) if chunks else ""
            planned[message.id] = (
                message,
                chunks,
                context,
                self._fingerprint(thread, message, chunks, context),
            )
        if not planned:
            return 0
        states = self.store.get_index_state(rid, list(planned))
        if once:
            planned = {mid: p for mid, p in planned.items() if _state(states, mid).fingerprint != p[3]}
        drop = [mid for mid, (_, chunks, _, _) in planned.items() if not chunks]
        if drop:
            self.index.delete_messages(rid, drop)
        entries = self._entries(thread, planned.values(), metered=metered)
        # Documents of a message marked before their ids were recorded can only be found by search.
        unknown = any(
            _state(states, mid).fingerprint and not _state(states, mid).documents for mid in planned
        )
        written = self.index.upsert(entries, replace=unknown) if entries else {}
        documents = {mid: written.get(mid, []) for mid in planned}
        expected = {mid: _state(states, mid).fingerprint for mid in planned} if once else None
        lost = self.store.set_index_marks(
            rid, {mid: p[3] for mid, p in planned.items()}, documents=documents, expected=expected
        )
        self._delete_replaced(rid, states, documents, lost)
        if following:
            # Their keyword text holds the text of a message just indexed again (an edit): refresh it.
            return len(entries) + self._index(
                thread, following, options, once=True, metered=metered, follow=False
            )
        return len(entries)

    def _neighbours(
        self, thread: Thread, messages: Sequence[Message], *, follow: bool = True
    ) -> tuple[dict[str, Message], list[Message]]:
        """Each message's previous message in its thread (``keyword_context``), and — with ``follow`` — the
        messages after the batch's messages that the batch does not hold (their context is a message of
        the batch, which may have changed).

        Neighbours within the batch are taken from it; the others are read in one ``message_windows``
        request (gaps left by deletions are skipped). Appended messages need only their predecessor:
        a message whose ``seq`` is past ``thread.last_seq`` as read before the save has no successor.
        """
        by_seq = {m.seq: m for m in messages}
        previous: dict[str, Message] = {}
        asked: list[tuple[Message, bool, bool]] = []
        for m in messages:
            before = by_seq.get(m.seq - 1)
            if before is not None:
                previous[m.id] = before
            want_before = before is None and m.seq > 1
            want_after = follow and m.seq < thread.last_seq and (m.seq + 1) not in by_seq
            if want_before or want_after:
                asked.append((m, want_before, want_after))
        if not asked:
            return previous, []
        windows = [MessageWindow(thread.id, m.seq, int(b), int(a)) for m, b, a in asked]
        read = [
            m for m in self.store.message_windows(thread.resource_id, windows) if m.thread_id == thread.id
        ]
        seqs = [m.seq for m in read]  # the thread's order; each window holds its message's neighbours
        following: dict[str, Message] = {}
        for m, want_before, want_after in asked:
            if want_before and (at := bisect_left(seqs, m.seq)) > 0:
                previous[m.id] = read[at - 1]
            if want_after and (at := bisect_right(seqs, m.seq)) < len(read) and read[at].seq not in by_seq:
                following.setdefault(read[at].id, read[at])
        return previous, list(following.values())

    def _entries(
        self, thread: Thread, planned: Iterable[tuple[Message, list[str], str, str]], *, metered: bool = True
    ) -> list[IndexEntry]:
        entries_meta = [
            (m, n, chunk, context if n == 0 else "")
            for m, chunks, context, _ in planned
            for n, chunk in enumerate(chunks)
        ]
        if not entries_meta:
            return []
        vectors = self.embed_documents(
            [c for _, _, c, _ in entries_meta], thread=(thread.resource_id, thread.id) if metered else None
        )
        return [
            IndexEntry(
                message_id=m.id,
                chunk=n,
                thread_id=thread.id,
                resource_id=thread.resource_id,
                role=m.role,
                seq=m.seq,
                created_at=m.created_at,
                text=chunk,
                vector=vec,
                metadata=entry_metadata(thread, m),
                context=context,
            )
            for (m, n, chunk, context), vec in zip(entries_meta, vectors, strict=True)
        ]

    def _delete_replaced(
        self,
        resource_id: str,
        states: dict[str, IndexState],
        documents: dict[str, list[str]],
        lost: list[str],
    ) -> None:
        """Delete by id what the marks no longer name: a marked message's previous documents, and the
        documents of a message whose mark another indexer set first (keeping the ones that mark names —
        with deterministic ids both indexers wrote the same documents) or that is gone."""
        stale: set[str] = set()
        for mid, docs in documents.items():
            if mid not in lost:
                stale |= set(_state(states, mid).documents) - set(docs)
        if lost:
            winners = self.store.get_index_state(resource_id, lost)
            for mid in lost:
                stale |= set(documents[mid]) - set(_state(winners, mid).documents)
        if stale:
            self.index.delete_documents(resource_id, sorted(stale))

    def planned_mark(
        self,
        thread: Thread,
        message: Message,
        options: SemanticRecallOptions,
        previous: Message | None = None,
    ) -> IndexPlan:
        """What ``index_messages`` would index for ``message`` now and the mark it would set: a mark in the
        store that differs was made from other content, context, thread metadata, embedder or
        ``INDEX_TEXT_VERSION`` (index health).

        Args:
            previous: the message before it in its thread (its keyword context), ``None`` for the first.
        """
        text = searchable_text(message, options.tool_text_chars)
        chunks = chunk_text(text, options.chunk_chars) if text else []
        context = keyword_context(previous, options) if chunks else ""
        return IndexPlan(chunks=len(chunks), fingerprint=self._fingerprint(thread, message, chunks, context))

    def _fingerprint(self, thread: Thread, message: Message, chunks: list[str], context: str) -> str:
        """What an index entry of the message is made of (version, embedder, chunks, context, order,
        metadata), hashed."""
        data = json.dumps(
            [
                INDEX_TEXT_VERSION,
                context,
                self.embedder.model_id,
                thread.id,
                message.role,
                message.seq,
                str(message.created_at),
                chunks,
                entry_metadata(thread, message),
            ],
            ensure_ascii=False,
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:32]

    # search --------------------------------------------------------------------------------------

    def search(
        self,
        resource_id: str,
        thread_id: str,
        query: str,
        options: SemanticRecallOptions,
        *,
        limit: int | None = None,
        when: TimeRange | None = None,
    ) -> list[FusedHit]:
        """The best ``top_k`` messages for ``query`` in the options' scope, filter and mode.

        Args:
            limit: how many to return instead of ``options.top_k`` (recall asks for more when hits it was
                given have no message any more).
            when: the time the query names (``time_range``); its date words that the query lacks are
                added to the keyword query, which indexes each message's date in words
                (``memstack.dates.keyword_query``).
        """
        if not query.strip():
            return []
        keywords = keyword_query(query, when)
        top_k = options.top_k if limit is None else limit
        scope_thread = thread_id if options.scope == "thread" else None
        want_vector = options.mode in ("vector", "hybrid")
        want_keyword = options.mode in ("keyword", "hybrid")
        per_list = list_depth(options, top_k)
        vector = (
            self._query_vector(query, (resource_id, thread_id), keywords_too=want_keyword)
            if want_vector
            else None
        )
        if vector is not None and not any(vector):
            vector = None  # text without words (only emoji, punctuation): no direction to search by
        results = self.index.search(
            resource_id,
            top_k=per_list,
            vector=vector,
            text=keywords if want_keyword else None,
            thread_id=scope_thread,
            filter=options.filter,
        )
        return rank_hits(
            list(results.vector or []),
            list(results.keyword or []),
            options,
            limit=top_k,
            vector_prior=fusion_weight(self.embedder),
        )

    def _query_vector(self, query: str, thread: ThreadKey, *, keywords_too: bool) -> Vector | None:
        """The query's vector; in hybrid mode (``keywords_too``) ``None`` when the embedder is unavailable
        (down, past the deadline, a malformed answer), so recall degrades to its keyword list instead of
        failing the turn. Raises ``Unavailable`` in vector mode."""
        try:
            return self.embed_query(query, thread=thread)
        except Unavailable as exc:
            if not keywords_too:
                raise
            logger.warning(
                "query embedding failed (%s); hybrid recall answers from keywords alone",
                type(exc).__name__,
                extra={"thread_id": thread[1], "error": type(exc).__name__},
            )
            return None

    def recall(
        self,
        resource_id: str,
        thread_id: str,
        query: str,
        options: SemanticRecallOptions,
        *,
        with_resource: bool = False,
    ) -> RecallResult:
        """Search, then load the best hits with their neighbours, within the message budget
        (``memstack.recall.window``: ``top_k × (before + 1 + after)`` messages at most; a short reply shows
        one more neighbour on each side with neighbours when that fits; neighbours shared by overlapping
        windows go to further hits; the best hit is always shown). When
        the query names a time (``memstack.dates``), hits from that time are shown before the others,
        chosen among all the candidates of the retrievers' lists (``list_depth``).

        Hits whose message no longer exists in the store (the index lags the store: a TTL expiry, a
        crash between a delete and its index clean-up) are dropped, their orphaned entries removed, and
        the search asked for that many more, so recall still returns ``top_k`` hits when the index holds
        them (at most ``_BACKFILL_ROUNDS`` extra searches, each one store read more). With
        ``with_resource`` the resource record is read in the same store request as the messages.
        """
        want = window.candidate_count(options)
        when = self.time_range(query, options)
        if when is not None:
            # A query naming a time prefers that time's hits among every candidate the retrievers gave,
            # not only among the budget's best: with a small budget the fused order alone decided.
            want = list_depth(options, want)
        hits = self.search(resource_id, thread_id, query, options, limit=want, when=when)
        if not hits:
            resource = self.store.get_resource(resource_id) if with_resource else None
            return RecallResult([], [], resource)
        before, after = window.fetch_span(options)
        windows = [MessageWindow(h.thread_id, h.seq, before, after) for h in hits]
        resource = None
        if with_resource:
            resource, messages = self.store.get_resource_and_windows(resource_id, windows)
        else:
            messages = self.store.message_windows(resource_id, windows)
        gone: set[str] = set()
        for _ in range(_BACKFILL_ROUNDS):
            present = {m.id for m in messages}
            missing = [h.message_id for h in hits if h.message_id not in present]
            if not missing:
                break
            self._drop_orphans(resource_id, missing)
            gone.update(missing)
            full = len(hits) >= want
            hits = [h for h in hits if h.message_id in present]
            if full:
                # Orphaned entries may still be visible (eventually consistent deletes), so they are
                # skipped by id rather than trusted to be gone from the next search.
                more = self.search(resource_id, thread_id, query, options, limit=want + len(gone), when=when)
                hits = [h for h in more if h.message_id not in gone][:want]
            windows = [MessageWindow(h.thread_id, h.seq, before, after) for h in hits]
            messages = self.store.message_windows(resource_id, windows) if windows else []
        if when is not None:
            hits = window.in_range_first(hits, messages, when)
        chosen = window.select(hits, messages, options)
        return RecallResult(chosen.hits, chosen.messages, resource)

    def _drop_orphans(self, resource_id: str, message_ids: list[str]) -> None:
        """Remove index entries of messages the store no longer has, so they never come back."""
        try:
            self.index.delete_messages(resource_id, message_ids)
        except Exception as exc:
            logger.warning("could not remove orphaned index entries (%s)", type(exc).__name__)


DEFAULT_FUSION_WEIGHT = 1.0
"""The vector list's prior weight in hybrid fusion for an embedder that declares no ``fusion_weight``: as
much as the keyword list's, since a semantic embedder's similarity is a signal BM25 does not have; the
per-query spread weighting then decides which list leads (docs/adr/0011-spread-weighted-fusion.md)."""


def fusion_weight(embedder: Embedder) -> float:
    """The embedder's prior weight for the vector list in hybrid fusion: its optional ``fusion_weight``
    attribute, else ``DEFAULT_FUSION_WEIGHT``. The feature-hashing embedder declares 0.5: its similarity is
    word overlap without IDF, a weaker copy of what the keyword list already measures."""
    weight = getattr(embedder, "fusion_weight", DEFAULT_FUSION_WEIGHT)
    return float(weight) if isinstance(weight, int | float) and weight >= 0 else DEFAULT_FUSION_WEIGHT


def list_depth(options: SemanticRecallOptions, limit: int) -> int:
    """How many hits recall asks each retriever for: in ``hybrid`` mode ``top_k × hybrid.candidates`` (at
    least ``limit``), else ``limit``. The length follows ``options.top_k``, not ``limit``: asking for more
    hits must not change how the best ones rank (neighbour support and spread weighting read every
    candidate of the lists). At most ``ports.MAX_TOP_K``, what an index search returns."""
    if options.mode == "hybrid":
        return min(max(options.top_k * options.hybrid.candidates, limit), MAX_TOP_K)
    return min(limit, MAX_TOP_K)


def rank_hits(
    vector: Sequence[IndexHit],
    keyword: Sequence[IndexHit],
    options: SemanticRecallOptions,
    *,
    limit: int,
    vector_prior: float = DEFAULT_FUSION_WEIGHT,
) -> list[FusedHit]:
    """Recall's ranking of the retrievers' lists (best first, at most ``limit`` hits), in the options' mode.

    Pure: the same lists and options give the same hits on every backend. The relevance floor
    (``options.threshold``, docs/adr/0005) applies to each retriever's own score first; in ``hybrid`` mode
    a vector hit without similarity (cosine ``<= 0``) is no evidence and never enters fusion
    (``memstack.fusion.fuse``).

    Args:
        vector: the vector retriever's hits, best first (cosine similarity scores).
        keyword: the keyword retriever's hits, best first (BM25 scores, Lucene scale).
        options: mode, threshold, fusion weights and ``message_range`` (neighbour support).
        limit: how many hits to return.
        vector_prior: the vector list's prior weight when ``options.hybrid.vector_weight`` is ``None``
            (``fusion_weight`` of the embedder).
    """
    vhits = list(vector)
    khits = list(keyword)
    if options.mode == "hybrid":
        vhits = [h for h in vhits if h.score > 0]
    if options.threshold is not None:
        vhits = [h for h in vhits if h.score >= options.threshold]
        khits = [h for h in khits if keyword_relevance(h.score) >= options.threshold]
    if options.mode == "vector":
        return [
            FusedHit(h.message_id, h.thread_id, h.score, vector_rank=i + 1, seq=h.seq, vector_score=h.score)
            for i, h in enumerate(vhits[:limit])
        ]
    if options.mode == "keyword":
        return [
            FusedHit(h.message_id, h.thread_id, h.score, keyword_rank=i + 1, seq=h.seq, keyword_score=h.score)
            for i, h in enumerate(khits[:limit])
        ]
    h = options.hybrid
    return fuse(
        vhits,
        khits,
        top_k=limit,
        vector_weight=vector_prior if h.vector_weight is None else h.vector_weight,
        keyword_weight=h.keyword_weight,
        rank_constant=h.rank_constant,
        neighbour_weight=h.neighbour_weight,
        before=options.message_range.before,
        after=options.message_range.after,
        spread_depth=list_depth(options, limit) if h.weighting == "spread" else None,
    )


_WORD = re.compile(r"[^\W_]")
"""A letter or a number (``str.isalnum``): what makes a text one with words for the ``Embedder`` port."""


def _has_words(text: str) -> bool:
    return _WORD.search(text) is not None


def _zero_for_words(embedder: Embedder) -> bool:
    """Whether the embedder declares that its zero vector can be a real answer for words (optional
    ``zero_for_words`` attribute, ``False`` when absent)."""
    return getattr(embedder, "zero_for_words", False) is True


def _state(states: dict[str, IndexState], message_id: str) -> IndexState:
    return states.get(message_id) or IndexState()
