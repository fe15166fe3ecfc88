"""The embedded default's ``SearchIndex``: cosine vector search and BM25 keyword search in one SQLite file.

Tables in the shared database file (``SqliteDatabase``):

* ``search_chunks`` — one row per indexed chunk: ``rowid``, ``resource_id``, ``thread_id``, ``message_id``,
  ``chunk``, ``role``, ``seq``, ``created_at`` (ISO-8601 UTC text), ``metadata`` (JSON text),
  ``embedding`` (little-endian float32 BLOB, the layout of ``sqlite_vec.serialize_float32``), and for the
  keyword index ``terms`` (the chunk's distinct terms) and ``length`` (its tokens). Indexes:
  ``(resource_id, thread_id)`` for the searches and ``(message_id, resource_id, chunk)`` (unique) for
  re-indexing and deletes. A new chunk's rowid is above every existing one (``max(rowid) + 1``), which
  the keyword postings and the vector cache rely on to append in rowid order.
* ``search_postings`` and ``search_keyword_stats`` — the keyword index, an inverted index sharded by
  resource with per-resource BM25 statistics (``memstack.adapters.sqlite.keywords``).
* ``search_generations`` — a counter per resource, bumped by every write of that resource's chunks; it
  tells the in-process vector cache whether it is current, even when another process wrote.
  Erasing a resource deletes its counter; a new counter starts above ``generation_floor`` (below), so it
  never repeats a generation some cache still holds.
* ``search_meta`` — key/value facts about the index: the embedding ``dimension``, the schema version,
  ``generation_floor``, the ``model_id``, and ``rebuilding_for`` while a rebuild (``memstack reindex``) is
  unfinished.
  Opening an index whose stored dimension differs raises ``InvalidInput`` (``SearchIndex`` contract).

**Vector search** ranks the resource's (or thread's) chunks by cosine similarity, with the metadata filter
applied inside the search, so it never returns fewer than ``top_k`` hits while more matching messages exist
(DESIGN.md "The layers"). Two paths:

* SQL: ``MIN(vec_distance_cosine(embedding, ?)) … WHERE resource_id = ? [AND thread_id = ?] [AND filter]
  GROUP BY message_id ORDER BY distance LIMIT top_k``. sqlite-vec's cosine is a scalar loop and every row
  is read from the B-tree, which costs about 1.5 ms for 600 chunks of 384 dimensions.
* Cache (default): the resource's vectors in memory (``memstack.adapters.sqlite.vector_cache``), one
  matrix-vector product per search; from ``quantised_min_rows`` rows on, a scan of int8 copies with error
  bounds first, then float32 scores for the few rows the bounds keep (ADR 0009: the same results, a
  quarter of the bytes read). Scope and filter still run in SQL,
  as ``SELECT rowid … WHERE <the same scope and filter>`` (skipped when there is neither), and only the
  allowed rows are scored. Writes through this index patch the cached data in place; a write by anyone
  else bumps the resource's generation and the next search reloads it. The cache is bounded
  (``vector_cache_bytes``, least recently used resources leave first); a resource larger than the bound,
  or ``vector_cache_bytes=0``, uses the SQL path.

**Keyword search** is BM25 over the resource's own postings and statistics (``keywords.score``): a
resource's ranking depends on its chunks alone, and its cost on its own posting lists, never on other
resources in the file (ADR 0006). The postings of the terms searched are kept in memory per resource
(``memstack.adapters.sqlite.posting_cache``, ADR 0013), current by the same generation as the vector cache:
this process's saves append to them, anyone else's write makes the next search read them again. The text is pre-segmented like OpenSearch's (:func:`fts_text`: CJK
characters spaced apart, emoji as words), then folded and Porter-stemmed (``keywords.tokens``):
conversational recall asks about the same thing in another inflection far more often than it needs exact
word forms ("my dogs" → "the dog"), and OpenSearch's ``english`` analyzer does the same, so both back ends
rank alike. Free text is never query syntax: ``search_text.query_terms`` splits it into words (stop words
dropped unless nothing else is left); BM25 then ranks chunks that contain more, and rarer, terms first.
Chunks are mapped to messages best first (``_keyword_search``), with thread and filter tests applied there.

Every user value reaches SQL as a bound parameter; the metadata filter is compiled into ``json_type`` /
``json_extract`` / ``json_each`` calls whose JSON paths are bound parameters too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from memstack.adapters.index_input import check_entry, check_top_k
from memstack.adapters.search_text import keyword_text, query_terms
from memstack.adapters.sqlite import keywords
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.adapters.sqlite.posting_cache import DEFAULT_KEYWORD_CACHE_BYTES, PostingCache
from memstack.adapters.sqlite.selection import count_th_largest
from memstack.adapters.sqlite.vector_cache import QUANTISED_MIN_ROWS, Added, ResourceVectors, VectorCache
from memstack.errors import InvalidInput, Unavailable
from memstack.filters import kind, validate_filter
from memstack.model import check_id
from memstack.ports import IndexEntry, IndexHit, SearchResults, Vector

SCHEMA_VERSION = 4
"""Version of the tables' layout, recorded in ``search_meta`` (1: keywords in an FTS5 table ``search_fts``;
2: the per-resource inverted index of ``keywords``; 3: its terms folded for compatibility forms and case,
``keywords.fold``; 4: its pending postings one row a chunk, ``search_pending_chunks``)."""

REBUILD_KEY = "rebuilding_for"
"""``search_meta`` key present while a rebuild (``memstack reindex``) is unfinished: the model it is for."""

MAX_DIMENSION = 8192
"""Largest accepted embedding dimension (sqlite-vec's limit for vector functions)."""


DEFAULT_VECTOR_CACHE_BYTES = 256 * 1024 * 1024
"""Default bound of the in-memory vector cache: about 195k chunks of 256 dimensions, 135k of 384
(``vector_cache.row_bytes``: the float32 row, its int8 copy and per-row overhead)."""

_FTS5_BM25_SCALE = 2.2
"""FTS5's ``bm25()`` formula (``keywords.score``) keeps BM25's ``k1 + 1`` factor (k1 = 1.2) that Lucene
dropped; keyword scores are divided by it so both backends report BM25 on one scale
(``memstack.fusion.keyword_relevance``)."""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS search_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS search_chunks (
        rowid INTEGER PRIMARY KEY,
        resource_id TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        chunk INTEGER NOT NULL,
        role TEXT NOT NULL,
        seq INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        metadata TEXT NOT NULL,
        embedding BLOB NOT NULL,
        terms TEXT NOT NULL DEFAULT '',
        length INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX IF NOT EXISTS search_chunks_scope ON search_chunks (resource_id, thread_id)",
    "CREATE UNIQUE INDEX IF NOT EXISTS search_chunks_message ON search_chunks (message_id, resource_id, chunk)",
    """CREATE TABLE IF NOT EXISTS search_generations (
        resource_id TEXT PRIMARY KEY,
        generation INTEGER NOT NULL
    ) WITHOUT ROWID""",
    *keywords.SCHEMA,
)

_INSERT_CHUNK = """INSERT INTO search_chunks
    (rowid, resource_id, thread_id, message_id, chunk, role, seq, created_at, metadata, embedding, terms, length)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
# Each delete returns what the keyword index needs to drop the chunks' postings (keywords.remove).
_DELETE_MESSAGE_CHUNKS = """DELETE FROM search_chunks WHERE message_id = ? AND resource_id = ?
    RETURNING resource_id, rowid, terms, length"""
_DELETE_CHUNK = """DELETE FROM search_chunks WHERE message_id = ? AND resource_id = ? AND chunk = ?
    RETURNING resource_id, rowid, terms, length"""
_DELETE_THREAD_CHUNKS = """DELETE FROM search_chunks WHERE resource_id = ? AND thread_id = ?
    RETURNING resource_id, rowid, terms, length"""
_BUMP_GENERATION = """INSERT INTO search_generations (resource_id, generation)
    VALUES (?, 1 + coalesce((SELECT CAST(value AS INTEGER) FROM search_meta WHERE key = 'generation_floor'), 0))
    ON CONFLICT (resource_id) DO UPDATE SET generation = generation + 1 RETURNING generation"""
_RAISE_GENERATION_FLOOR = """INSERT INTO search_meta (key, value) VALUES ('generation_floor', ?)
    ON CONFLICT (key) DO UPDATE SET value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))"""
_DELETE_RESOURCE_CHUNKS = "DELETE FROM search_chunks WHERE resource_id = ?"
_GET_GENERATION = "SELECT generation FROM search_generations WHERE resource_id = ?"
_MODEL_FACTS = f"""(SELECT value FROM search_meta WHERE key = 'model_id'),
    (SELECT value FROM search_meta WHERE key = '{REBUILD_KEY}')"""
_GET_MODEL = f"SELECT {_MODEL_FACTS}"
_GET_GENERATION_AND_MODEL = (
    f"SELECT (SELECT generation FROM search_generations WHERE resource_id = ?), {_MODEL_FACTS}"
)

_Floats = npt.NDArray[np.float32]
_Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ModelMismatch:
    """Why the file's index refused the embedding model asked for, carried by the ``InvalidInput`` it raises
    (as its ``model_mismatch`` attribute) so that an entry point can name its own fix (``bootstrap`` names
    the ``--embedder``): the file, the model it holds (or, ``rebuilding``, is being rebuilt for) and the
    dimension of its vectors."""

    path: str
    stored_model: str | None
    stored_dimension: int | None
    rebuilding: bool = False

    def refuse(self, message: str, field: str) -> InvalidInput:
        """The ``InvalidInput`` to raise, carrying these facts."""
        error = InvalidInput(message, field=field)
        error.model_mismatch = self  # type: ignore[attr-defined]
        return error


@dataclass(frozen=True, slots=True)
class _Row:
    """One chunk of a validated entry, ready to insert (``rowid`` assigned in the write transaction)."""

    resource_id: str
    thread_id: str
    message_id: str
    chunk: int
    role: str
    seq: int
    created_at: str
    metadata: str
    vector: _Floats
    analysed: keywords.Analysed


class SqliteSearchIndex:
    """``SearchIndex`` over the shared SQLite file: exact cosine search plus FTS5 BM25, filters inside.

    Args:
        db: the shared database (its lock serialises every call; the index never closes it).
        dimension: the length of every vector this index stores and searches.
        model_id: the embedding model the vectors come from (``Embedder.model_id``). Recorded on first
            use; a file that records another model is refused, since two models of one dimension embed
            into unrelated spaces and mixing them returns wrong neighbours silently. ``None`` skips the
            check (tests that store hand-made vectors).
        vector_cache_bytes: bound of the in-memory vector cache in bytes; ``0`` turns it off (every vector
            search then runs in SQL).
        quantised_min_rows: rows of a cached resource (or of a thread or filter's share of it) from which
            a vector search first scans the int8 copies and scores only the rows its error bounds cannot
            rule out (ADR 0009). The results are the same either way; ``0`` takes that path always.
        keyword_cache_bytes: bound in bytes of the searched terms' postings held in memory
            (``posting_cache.PostingCache``, ADR 0013); ``0`` reads every keyword search's postings from
            the file. The results are the same either way.
        rebuild: open the index for a rebuild (``memstack reindex``, ``ports.RebuildableIndex``): a file
            that records another model or dimension drops every chunk and records ``model_id`` and
            ``dimension`` instead, marked as rebuilding until ``finish_rebuild``. While it is so marked the
            index opens only for the rebuild, which resumes where it stopped: the store's index marks carry
            the model, so messages already embedded for it are skipped.

    Raises:
        InvalidInput: ``dimension`` is not an integer in ``1..MAX_DIMENSION``, or the file already holds
            an index of another dimension or another embedding model (the message names both and the way
            out, ``memstack reindex``), or a rebuild of it has not finished (field ``embedder``).
    """

    def __init__(
        self,
        db: SqliteDatabase,
        dimension: int,
        *,
        model_id: str | None = None,
        vector_cache_bytes: int = DEFAULT_VECTOR_CACHE_BYTES,
        quantised_min_rows: int = QUANTISED_MIN_ROWS,
        keyword_cache_bytes: int = DEFAULT_KEYWORD_CACHE_BYTES,
        rebuild: bool = False,
    ) -> None:
        if (
            isinstance(dimension, bool)
            or not isinstance(dimension, int)
            or not 1 <= dimension <= MAX_DIMENSION
        ):
            raise InvalidInput(f"dimension must be an integer from 1 to {MAX_DIMENSION}", field="dimension")
        self._db = db
        self.dimension = dimension
        self.model_id = model_id
        self._cache = VectorCache(
            dimension, max(0, vector_cache_bytes), quantised_min_rows=max(0, quantised_min_rows)
        )
        self._postings = PostingCache(keyword_cache_bytes)
        with db.transaction() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)
            _migrate(conn)
            facts = dict(conn.execute("SELECT key, value FROM search_meta").fetchall())
            facts = _rebuild_facts(conn, db.path, facts, dimension, model_id, rebuild)
            self.rebuilding = REBUILD_KEY in facts
            if "dimension" not in facts:
                conn.executemany(
                    "INSERT INTO search_meta (key, value) VALUES (?, ?)",
                    [("dimension", str(dimension)), ("schema_version", str(SCHEMA_VERSION))],
                )
            elif int(facts["dimension"]) != dimension:
                raise ModelMismatch(db.path, facts.get("model_id"), int(facts["dimension"])).refuse(
                    f"the search index in {db.path} holds {int(facts['dimension'])}-dimensional vectors, but "
                    f"{dimension}-dimensional ones were asked for; use the embedder the index was built with, "
                    "another database file, or rebuild the index with `memstack reindex`",
                    "dimension",
                )
            if model_id is not None:
                self._check_model(
                    conn, db.path, facts.get("model_id"), model_id, int(facts.get("dimension", dimension))
                )

    @staticmethod
    def _check_model(conn: Any, path: str, stored: str | None, model_id: str, dimension: int) -> None:
        if stored is None:
            # A file from before the model was recorded: its vectors are taken to be this model's, the
            # only model its dimension check let in until now.
            conn.execute("INSERT INTO search_meta (key, value) VALUES ('model_id', ?)", (model_id,))
        elif stored != model_id:
            raise ModelMismatch(path, stored, dimension).refuse(
                f"the search index in {path} was built with the embedding model {stored!r}, but "
                f"{model_id!r} was asked for: their vectors are not comparable. Use {stored!r}, another "
                f"database file, or rebuild the index for {model_id!r} with `memstack reindex`",
                "embedder",
            )

    def finish_rebuild(self) -> None:
        """End a rebuild (``rebuild=True``): the index opens normally again, for its new model."""
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM search_meta WHERE key = ?", (REBUILD_KEY,))
        self.rebuilding = False

    def _check_current(self, conn: Any, facts: tuple[str | None, str | None] | None = None) -> None:
        """Refuse to write or vector-search once another process switched the file's index to another
        embedding model (``memstack reindex`` while this process runs): this process would write its
        model's vectors into the other model's space and rank the other model's vectors against its own
        query, wrong both ways and silently. The model is checked when the index opens; this catches the
        switch afterwards, inside the caller's transaction: ``facts`` (the stored ``model_id`` and
        ``rebuilding_for``) when the caller read them with its own statement, else one lookup here.

        Raises:
            Unavailable: the file now records another model, or a rebuild for another model is
                unfinished; the message names the model and the fix (restart with that embedder). A save
                keeps its messages (not indexed: the next start-up with the right embedder indexes them,
                ``Memory.reconcile_index``).
        """
        if self.model_id is None:
            return
        stored, rebuilding_for = facts if facts is not None else conn.execute(_GET_MODEL).fetchone()
        if self.rebuilding:
            if rebuilding_for == self.model_id or (rebuilding_for is None and stored == self.model_id):
                return
        elif stored in (None, self.model_id) and rebuilding_for is None:
            return
        now = rebuilding_for or stored
        error = Unavailable(
            f"the search index in {self._db.path} was switched to the embedding model {now!r} by another "
            f"process (memstack reindex) while this one uses {self.model_id!r}: restart this process with "
            f"the embedder of {now!r}"
        )
        error.model_mismatch = ModelMismatch(  # type: ignore[attr-defined]
            self._db.path, now, self.dimension, rebuilding=rebuilding_for is not None
        )
        raise error

    # ------------------------------------------------------------------------------------------- writes

    def upsert(self, entries: Sequence[IndexEntry], *, replace: bool = True) -> dict[str, list[str]]:
        """Index these chunks in one transaction, replacing every earlier chunk of each message.

        For each ``(resource_id, message_id)`` in ``entries`` all stored chunks are deleted first, so a
        message re-indexed with fewer chunks leaves none behind (``replace`` changes nothing here: the
        transaction makes it free). A repeated ``(message_id, chunk)`` in the batch keeps the last one.

        Returns:
            Message id → its document ids, ``{message_id}#{chunk}`` (``delete_documents`` takes them).

        Raises:
            InvalidInput: naming ``entries[i].<field>``: a bad id, a negative or non-integer chunk or seq,
                a vector that is not ``dimension`` finite numbers, metadata that is not a JSON object.
                An all-zero vector (an embedder's answer for text without words, e.g. only emoji) is
                accepted: the chunk is found by keywords but never by vector search, where cosine
                similarity is undefined.
            PayloadTooLarge: metadata over ``memstack.model.MAX_METADATA_BYTES``.
            Unavailable: another process switched the file to another embedding model since this index
                opened (``_check_current``); nothing is written.
        """
        by_key: dict[tuple[str, str, int], _Row] = {}
        for i, entry in enumerate(entries):
            row = self._row(entry, f"entries[{i}]")
            key = (row.resource_id, row.message_id, row.chunk)
            by_key.pop(key, None)
            by_key[key] = row
        if not by_key:
            return {}
        rows = list(by_key.values())
        messages = list(dict.fromkeys((row.message_id, row.resource_id) for row in rows))
        with self._db.lock:
            with self._db.transaction() as conn:
                self._check_current(conn)
                shrunk = _delete_chunks(conn, _DELETE_MESSAGE_CHUNKS, messages)
                first = int(
                    conn.execute("SELECT coalesce(max(rowid), 0) + 1 FROM search_chunks").fetchone()[0]
                )
                conn.executemany(
                    _INSERT_CHUNK,
                    (
                        (
                            first + n,
                            r.resource_id,
                            r.thread_id,
                            r.message_id,
                            r.chunk,
                            r.role,
                            r.seq,
                            r.created_at,
                            r.metadata,
                            r.vector.astype("<f4", copy=False).tobytes(),
                            r.analysed.terms,
                            r.analysed.length,
                        )
                        for n, r in enumerate(rows)
                    ),
                )
                by_resource: dict[str, list[tuple[int, keywords.Analysed]]] = {}
                for n, r in enumerate(rows):
                    by_resource.setdefault(r.resource_id, []).append((first + n, r.analysed))
                merged = {rid: keywords.add(conn, rid, chunks) for rid, chunks in by_resource.items()}
                generations = _bump(conn, {r.resource_id for r in rows})
            for resource_id, generation in generations.items():
                replaced = {m for m, r in messages if r == resource_id}
                added = [
                    Added(first + n, r.message_id, r.thread_id, r.seq, r.vector)
                    for n, r in enumerate(rows)
                    if r.resource_id == resource_id
                ]
                self._cache.patch(resource_id, generation, messages=replaced, added=added)
                if resource_id in shrunk:  # a message re-indexed: its old postings are gone from the file
                    self._postings.drop(resource_id)
                else:
                    self._postings.added(
                        resource_id, generation, by_resource[resource_id], merged[resource_id]
                    )
        written: dict[str, list[str]] = {}
        for r in sorted(rows, key=lambda r: r.chunk):
            written.setdefault(r.message_id, []).append(f"{r.message_id}#{r.chunk}")
        return written

    def delete_documents(self, resource_id: str, document_ids: Sequence[str]) -> None:
        """Remove these chunks (``{message_id}#{chunk}``, as ``upsert`` returns them) of this resource.

        Raises:
            InvalidInput: ``resource_id`` is not a valid id, or ``document_ids`` is one string.
        """
        check_id(resource_id, "resource_id")
        if isinstance(document_ids, str):
            raise InvalidInput("document_ids must be a list of ids, not one string", field="document_ids")
        keys = []
        for doc in set(document_ids):
            message_id, _, chunk = doc.rpartition("#")
            if message_id and chunk.isdigit():
                keys.append((message_id, resource_id, int(chunk)))
        if not keys:
            return
        with self._db.lock:
            with self._db.transaction() as conn:
                _delete_chunks(conn, _DELETE_CHUNK, keys)
                _bump(conn, {resource_id})  # other processes' caches see the change
            self._cache.drop(resource_id)
            self._postings.drop(resource_id)

    def _row(self, entry: IndexEntry, path: str) -> _Row:
        e = check_entry(entry, path)
        return _Row(
            resource_id=e.resource_id,
            thread_id=e.thread_id,
            message_id=e.message_id,
            chunk=e.chunk,
            role=e.role,
            seq=e.seq,
            created_at=e.created_at.isoformat(),
            metadata=json.dumps(e.metadata, ensure_ascii=False, separators=(",", ":")),
            vector=self._vector(entry.vector, f"{path}.vector", allow_zero=True),
            analysed=keywords.Analysed.of(fts_text(e.text, e.created_at, e.context)),
        )

    def _vector(self, vector: object, path: str, *, allow_zero: bool = False) -> _Floats:
        try:
            with np.errstate(over="ignore"):  # beyond float32's range becomes inf, refused below
                array = np.asarray(vector, dtype=np.float32)
        except (TypeError, ValueError, OverflowError):
            raise InvalidInput(f"{path} must be a list of numbers", field=path) from None
        if array.shape != (self.dimension,):
            raise InvalidInput(
                f"{path} must have {self.dimension} numbers, not shape {array.shape}", field=path
            )
        if not np.isfinite(array).all():
            raise InvalidInput(f"{path} must contain only finite numbers (as float32)", field=path)
        if not allow_zero and not array.any():
            raise InvalidInput(f"{path} must not be all zeros (cosine similarity is undefined)", field=path)
        return array

    def delete_messages(self, resource_id: str, message_ids: Sequence[str]) -> None:
        """Remove every chunk (and its keyword entry) of these messages of this resource.

        Ids of other resources and unknown ids are ignored.

        Raises:
            InvalidInput: ``resource_id`` is not a valid id.
        """
        check_id(resource_id, "resource_id")
        if isinstance(message_ids, str):
            raise InvalidInput("message_ids must be a list of ids, not one string", field="message_ids")
        ids = set(message_ids)
        if not ids:
            return
        pairs = [(message_id, resource_id) for message_id in ids]
        with self._db.lock:
            with self._db.transaction() as conn:
                _delete_chunks(conn, _DELETE_MESSAGE_CHUNKS, pairs)
                generation = _bump(conn, {resource_id})[resource_id]
            self._cache.patch(resource_id, generation, messages=ids)
            self._postings.drop(resource_id)

    def delete_thread(self, resource_id: str, thread_id: str) -> None:
        """Remove every chunk of the thread, only if it belongs to ``resource_id``.

        Raises:
            InvalidInput: ``resource_id`` or ``thread_id`` is not a valid id.
        """
        params = (check_id(resource_id, "resource_id"), check_id(thread_id, "thread_id"))
        with self._db.lock:
            with self._db.transaction() as conn:
                _delete_chunks(conn, _DELETE_THREAD_CHUNKS, [params])
                generation = _bump(conn, {resource_id})[resource_id]
            self._cache.patch(resource_id, generation, thread_id=thread_id)
            self._postings.drop(resource_id)

    def delete_resource(self, resource_id: str) -> int:
        """Remove every chunk (and its keyword entry) of the resource, and its generation counter.

        The counter goes too (it is keyed by the resource id). So that a vector cache of another process
        never takes a later generation of a re-created resource for the one it holds (nor patches its
        stale snapshot as "one generation behind"), ``generation_floor`` in ``search_meta`` is raised past
        the deleted counter and new counters start above the floor.

        The resource's postings and keyword statistics go with it (they are keyed by the resource, so this
        is one range delete, whatever the size of the file).

        Returns:
            How many chunks were removed (0 on a second call).

        Raises:
            InvalidInput: ``resource_id`` is not a valid id.
        """
        check_id(resource_id, "resource_id")
        with self._db.lock:
            with self._db.transaction() as conn:
                keywords.drop_resource(conn, resource_id)
                removed = int(conn.execute(_DELETE_RESOURCE_CHUNKS, (resource_id,)).rowcount)
                row = conn.execute(
                    "DELETE FROM search_generations WHERE resource_id = ? RETURNING generation",
                    (resource_id,),
                ).fetchone()
                if row is not None:
                    conn.execute(_RAISE_GENERATION_FLOOR, (str(int(row[0]) + 1),))
            self._cache.drop(resource_id)
            self._postings.drop(resource_id)
        return removed

    # ------------------------------------------------------------------------------------------- search

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

        Args:
            resource_id: the owner searched; nothing of another resource is ever returned.
            top_k: how many distinct messages each list holds at most, ``1..MAX_TOP_K``.
            vector: the query embedding (``dimension`` floats, not all zero), or ``None`` to skip the
                vector search.
            text: free text for the keyword search, or ``None`` to skip it. Text without word tokens
                gives an empty list.
            thread_id: restrict both searches to this thread of the resource.
            filter: a metadata filter (``memstack.filters``), applied inside both searches.

        Returns:
            ``SearchResults``: each list best first, one hit per message scored by its best chunk —
            cosine similarity in [-1, 1] for vectors, ``-bm25() / 2.2`` (positive; Lucene's scale) for keywords; ties broken by
            message id. A list is ``None`` when its retriever was not asked.

        Raises:
            InvalidInput: a bad ``resource_id``/``thread_id``, ``top_k`` out of range or not an integer,
                a malformed ``vector`` or ``filter`` (``field`` names the fault), or ``text`` not a string.
            Unavailable: a vector search after another process switched the file to another embedding
                model (``_check_current``); a keyword-only search still answers.
        """
        check_id(resource_id, "resource_id")
        if thread_id is not None:
            check_id(thread_id, "thread_id")
        check_top_k(top_k)
        checked = validate_filter(filter) or None
        query = None if vector is None else self._vector(vector, "vector")
        if text is not None and not isinstance(text, str):
            raise InvalidInput("text must be a string", field="text")
        terms = None if text is None else keywords.query_tokens(query_terms(text))

        with self._db.read() as conn:
            # Read once for both halves: the caches check their data against it in this snapshot.
            vector_hits = None
            cached = None
            if query is not None:  # a vector search also checks the file's model, in the same statement
                found, *facts = conn.execute(_GET_GENERATION_AND_MODEL, (resource_id,)).fetchone()
                generation = 0 if found is None else int(found)
                self._check_current(conn, (facts[0], facts[1]))
                cached = self._cache.get(conn, resource_id, generation)
                vector_hits = self._vector_search(conn, query, cached, resource_id, thread_id, checked, top_k)
            else:
                row = conn.execute(_GET_GENERATION, (resource_id,)).fetchone()
                generation = 0 if row is None else int(row[0])
            keyword_hits = None
            if terms is not None:
                rowids, scores = self._postings.score(conn, resource_id, generation, terms)
                # the chunks' messages from the vector cache when it holds this snapshot (no filter to test)
                known = (
                    None
                    if cached is None or checked
                    else partial(_held_chunks, cached, generation, thread_id)
                )
                keyword_hits = _keyword_search(
                    conn, rowids, scores, resource_id, thread_id, checked, top_k, known=known
                )
        return SearchResults(vector=vector_hits, keyword=keyword_hits)

    def _vector_search(
        self,
        conn: Any,
        query: _Floats,
        cached: ResourceVectors | None,
        resource_id: str,
        thread_id: str | None,
        filter: dict[str, Any] | None,
        top_k: int,
    ) -> list[IndexHit]:
        if cached is None:
            sql, params = _vector_sql(query, resource_id, thread_id, filter, top_k)
            return [
                IndexHit(message_id=m, thread_id=t, score=max(-1.0, min(1.0, 1.0 - d)), seq=q)
                for m, t, q, d in conn.execute(sql, params)
            ]
        allowed = None
        if thread_id is not None or filter:
            p = _Params()
            where = _scope_sql(p, resource_id, thread_id, filter)
            rows = conn.execute(f"SELECT c.rowid FROM search_chunks AS c WHERE {where}", p.values).fetchall()
            allowed = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        with cached.lock:
            return cached.search(
                query, allowed, top_k, floats=lambda rowids: _embeddings(conn, rowids, self.dimension)
            )

    def close(self) -> None:
        """Drop the vector cache. The shared ``SqliteDatabase`` is closed by whoever opened it."""
        with self._db.lock:
            self._cache.clear()
            self._postings.clear()


def _rebuild_facts(
    conn: Any, path: str, facts: dict[str, str], dimension: int, model_id: str | None, rebuild: bool
) -> dict[str, str]:
    """``search_meta`` as the index opens it, inside the opening transaction: unchanged without
    ``rebuild`` (refused while a rebuild is unfinished); with it, switched to ``dimension`` and
    ``model_id`` (every chunk dropped when either differs) and marked as rebuilding.

    Raises:
        InvalidInput: a rebuild is unfinished and this is not it (field ``embedder``); a rebuild without
            a ``model_id``.
    """
    pending = facts.get(REBUILD_KEY)
    if not rebuild:
        if pending is not None:
            held = int(facts["dimension"]) if "dimension" in facts else None
            raise ModelMismatch(path, pending, held, rebuilding=True).refuse(
                f"the search index in {path} is being rebuilt for the embedding model {pending!r} and the "
                "rebuild has not finished: run `memstack reindex` with that embedder again to finish it",
                "embedder",
            )
        return facts
    if model_id is None:
        raise InvalidInput("a rebuild needs the embedding model's id (model_id)", field="model_id")
    switched = facts.get("dimension") not in (None, str(dimension)) or facts.get("model_id") not in (
        None,
        model_id,
    )
    if switched or pending not in (None, model_id):
        keywords.drop_all(conn)
        conn.execute("DELETE FROM search_chunks")
        # Every index mark now points at a chunk that is gone, whatever model it names (a rebuild back to
        # the model of a half-finished one would otherwise skip the messages still marked for it and leave
        # them unsearchable): the store's marks go in the same transaction.
        marks = {row[1] for row in conn.execute("PRAGMA table_info(messages)")} & {"indexed", "index_docs"}
        if marks:
            conn.execute(f"UPDATE messages SET {', '.join(f'{c} = NULL' for c in sorted(marks))}")
        top = conn.execute("SELECT max(generation) FROM search_generations").fetchone()[0]
        conn.execute("DELETE FROM search_generations")
        if top is not None:  # other processes' caches must never take a new counter for one they hold
            conn.execute(_RAISE_GENERATION_FLOOR, (str(int(top) + 1),))
    updates = {"dimension": str(dimension), "model_id": model_id, REBUILD_KEY: model_id}
    if "schema_version" not in facts:
        updates["schema_version"] = str(SCHEMA_VERSION)
    conn.executemany(
        "INSERT INTO search_meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        list(updates.items()),
    )
    return {**facts, **updates}


def _migrate(conn: Any) -> None:
    """Bring an earlier file's tables to ``SCHEMA_VERSION``, in the open transaction: schema 1 to 2
    (``_migrate_fts``), 3 to 4 (``keywords.migrate_pending``: the pending postings regrouped by chunk, the
    same postings), then 2 to 3 (``keywords.refold``: terms written before compatibility forms and case
    were folded are re-derived, and their resources' generations advanced so every process's caches
    re-read them)."""
    _migrate_fts(conn)
    keywords.migrate_pending(conn)
    facts = dict(
        conn.execute("SELECT key, value FROM search_meta WHERE key IN ('dimension', 'schema_version')")
    )
    if "dimension" not in facts or int(facts.get("schema_version", 2)) >= SCHEMA_VERSION:
        return  # a new file (its version is written with its dimension), or a current one
    if int(facts.get("schema_version", 2)) < 3:
        _bump(conn, keywords.refold(conn))
    conn.execute(
        "INSERT INTO search_meta (key, value) VALUES ('schema_version', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(SCHEMA_VERSION),),
    )


def _migrate_fts(conn: Any) -> None:
    """Bring a schema-1 file (keywords in FTS5's ``search_fts``) to schema 2, in the open transaction.

    The chunk table gains ``terms`` and ``length``; the postings are rebuilt from FTS5's own index
    (``fts5vocab`` ``instance`` rows of the ``text`` column: the chunk's terms with their positions, hence
    frequencies and length), since the contentless FTS5 table never kept the text; then ``search_fts`` is
    dropped. FTS5's Porter stems and ``keywords.tokens``' agree on English words; ``memstack reindex``
    rebuilds from the stored messages for an exact match.
    """
    columns = {row[1] for row in conn.execute("PRAGMA table_info(search_chunks)")}
    for name, sql in (
        ("terms", "terms TEXT NOT NULL DEFAULT ''"),
        ("length", "length INTEGER NOT NULL DEFAULT 0"),
    ):
        if name not in columns:
            conn.execute(f"ALTER TABLE search_chunks ADD COLUMN {sql}")
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'search_fts'").fetchone() is None:
        return
    conn.execute("CREATE VIRTUAL TABLE temp.search_fts_instances USING fts5vocab(main, search_fts, instance)")
    counts: dict[int, dict[str, int]] = {}
    for term, doc, n in conn.execute(
        "SELECT term, doc, count(*) FROM temp.search_fts_instances WHERE col = 'text' GROUP BY doc, term"
    ):
        counts.setdefault(int(doc), {})[term] = int(n)
    conn.execute("DROP TABLE temp.search_fts_instances")
    by_resource: dict[str, list[tuple[int, keywords.Analysed]]] = {}
    for rowid, resource_id in conn.execute("SELECT rowid, resource_id FROM search_chunks ORDER BY rowid"):
        terms = counts.get(int(rowid), {})
        analysed = keywords.Analysed(terms, sum(terms.values()))
        conn.execute(
            "UPDATE search_chunks SET terms = ?, length = ? WHERE rowid = ?",
            (analysed.terms, analysed.length, rowid),
        )
        by_resource.setdefault(resource_id, []).append((int(rowid), analysed))
    for resource_id, chunks in by_resource.items():
        keywords.add(conn, resource_id, chunks)
    conn.execute("DROP TABLE search_fts")
    conn.execute("UPDATE search_meta SET value = '2' WHERE key = 'schema_version'")


def _embeddings(conn: Any, rowids: _Ints, dimension: int) -> _Floats:
    """The stored float32 vectors of these chunks, one row per rowid in the given order (each present)."""
    found = dict(
        conn.execute(
            "SELECT rowid, embedding FROM search_chunks WHERE rowid IN (SELECT value FROM json_each(?))",
            (json.dumps(rowids.tolist()),),
        ).fetchall()
    )
    blob = b"".join(found[r] for r in rowids.tolist())
    return np.frombuffer(blob, dtype="<f4").reshape(len(rowids), dimension).astype(np.float32)


def _delete_chunks(conn: Any, statement: str, keys: Iterable[tuple[Any, ...]]) -> set[str]:
    """Run a ``DELETE … RETURNING resource_id, rowid, terms, length`` per key, then drop the deleted
    chunks' postings (inside the caller's write transaction); returns the resources that lost chunks."""
    by_resource: dict[str, list[tuple[int, str, int]]] = {}
    for key in keys:
        for resource_id, rowid, terms, length in conn.execute(statement, key).fetchall():
            by_resource.setdefault(resource_id, []).append((rowid, terms, length))
    for resource_id, chunks in by_resource.items():
        keywords.remove(conn, resource_id, chunks)
    return set(by_resource)


def _bump(conn: Any, resource_ids: Iterable[str]) -> dict[str, int]:
    """Advance the generation of each resource (inside the caller's write transaction)."""
    return {r: int(conn.execute(_BUMP_GENERATION, (r,)).fetchone()[0]) for r in sorted(resource_ids)}


# ---------------------------------------------------------------------------------------- query building


class _Params:
    """Numbered SQL parameters (``?1``, ``?2``…), so a value can be referenced more than once."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def bind(self, value: Any) -> str:
        self.values.append(value)
        return f"?{len(self.values)}"


def _scope_sql(
    p: _Params,
    resource_id: str,
    thread_id: str | None,
    filter: dict[str, Any] | None,
    *,
    indexed: bool = True,
) -> str:
    """The SQL test of the scope and filter over ``search_chunks AS c``; ``indexed=False`` writes the ids as
    ``+c.resource_id`` so that the planner keeps the rowid look-up the caller drives."""
    plus = "" if indexed else "+"
    where = f"{plus}c.resource_id = {p.bind(resource_id)}"
    if thread_id is not None:
        where += f" AND {plus}c.thread_id = {p.bind(thread_id)}"
    if filter:
        where += f" AND {compile_filter(filter, p, 'c.metadata')}"
    return where


def _vector_sql(
    query: _Floats, resource_id: str, thread_id: str | None, filter: dict[str, Any] | None, top_k: int
) -> tuple[str, list[Any]]:
    p = _Params()
    blob = p.bind(query.astype("<f4", copy=False).tobytes())
    where = _scope_sql(p, resource_id, thread_id, filter)
    sql = (
        f"SELECT c.message_id, c.thread_id, c.seq, MIN(vec_distance_cosine(c.embedding, {blob})) AS d "
        f"FROM search_chunks AS c WHERE {where} "
        f"GROUP BY c.message_id HAVING d IS NOT NULL ORDER BY d, c.message_id LIMIT {p.bind(top_k)}"
    )
    return sql, p.values


def _held_chunks(
    cached: ResourceVectors, generation: int, thread_id: str | None, rowids: list[int]
) -> list[tuple[int, str, str, int]] | None:
    """``ResourceVectors.chunk_messages`` when the cached data is still at ``generation`` (a write of
    this process may have moved it on since the search's snapshot), else ``None``."""
    with cached.lock:
        if cached.generation != generation:
            return None
        return cached.chunk_messages(rowids, thread_id)


def _keyword_search(
    conn: Any,
    rowids: npt.NDArray[np.int64],
    scores: npt.NDArray[np.float64],
    resource_id: str,
    thread_id: str | None,
    filter: dict[str, Any] | None,
    top_k: int,
    *,
    known: Callable[[list[int]], list[tuple[int, str, str, int]] | None] | None = None,
) -> list[IndexHit]:
    """The ``top_k`` best messages by BM25 among the scope's chunks that pass ``filter``, given every
    matching chunk of the resource (``rowids`` with their ``scores``: ``keywords.score``'s result).

    Chunks are visited best first, in batches that double (``2 * top_k + 8`` first), each batch looked up
    by rowid with the thread and filter tests; a message scores by its best chunk. The walk stops when the
    chunks run out or every chunk not yet visited scores strictly below the ``top_k``-th message found: none
    could enter or tie (ties break by message id). The order is taken a prefix at a time
    (``_best_first``: the best ``2 * top_k + 8`` chunks, then 16 times as many, then all), so a search that
    settles early never sorts every match (about 35k chunks for a question naming a speaker, in a resource
    of 100k messages).

    The look-up names ``+c.resource_id`` and ``+c.thread_id`` (not indexable): SQLite otherwise plans it on
    the ``(resource_id, thread_id)`` index and reads the whole resource (11.8 ms rather than 0.17 ms for a
    batch in a 100k-chunk resource, measured). ``known`` answers that look-up from memory when it can
    (``_held_chunks``: the vector cache holds every chunk's message, thread and seq), the same rows; when it
    answers ``None`` the batch is read from the file.
    """
    p = _Params()
    batch_param = p.bind("")
    where = _scope_sql(p, resource_id, thread_id, filter, indexed=False)
    sql = (
        "SELECT c.rowid, c.message_id, c.thread_id, c.seq FROM search_chunks AS c "
        f"WHERE c.rowid IN (SELECT value FROM json_each({batch_param})) AND {where}"
    )
    best: dict[str, tuple[float, str, int]] = {}
    first = 2 * top_k + 8
    start, size = 0, first
    for count in (first, 16 * first, None):
        listed, listed_scores, floor = _best_first(rowids, scores, count)
        while start < len(listed):  # each prefix extends the one before: chunks already visited are skipped
            batch = listed[start : start + size]
            score_of = dict(zip(batch, listed_scores[start : start + size], strict=True))
            rows = None if known is None else known(batch)
            if rows is None:
                p.values[0] = json.dumps(batch)
                rows = conn.execute(sql, p.values)
            for rowid, message_id, tid, seq in rows:
                found = score_of[rowid]
                if message_id not in best or found > best[message_id][0]:
                    best[message_id] = (found, tid, seq)
            start += len(batch)
            size *= 2
            kth = _kth(best, top_k)
            if kth is not None and start < len(listed) and listed_scores[start] < kth:
                break  # the rest of the list scores no more than its next chunk
        kth = _kth(best, top_k)
        if floor == 0.0 or (kth is not None and kth >= floor) or start < len(listed):
            break  # every chunk not visited scores below the k-th message
    ordered = sorted(best.items(), key=lambda item: (-item[1][0], item[0]))[:top_k]
    return [
        IndexHit(message_id=m, thread_id=t, score=s / _FTS5_BM25_SCALE, seq=q) for m, (s, t, q) in ordered
    ]


def _best_first(
    rowids: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], count: int | None
) -> tuple[list[int], list[float], float]:
    """The ``count`` best chunks (every chunk with ``None``) and any tying with the last, ordered by score
    (descending) then rowid, and the floor every chunk left out scores strictly below (``0.0``: none left
    out). A selection (``selection.count_th_largest``: a sampled threshold, then a partition of what passes
    it), then a sort of what it kept: O(n) with one comparison per match rather than a sort of them all."""
    floor = 0.0
    if count is not None and count < len(scores):
        floor, kept = count_th_largest(scores, count)
        rowids, scores = rowids[kept], scores[kept]
    order = np.lexsort((rowids, -scores))
    listed: list[int] = rowids[order].tolist()
    listed_scores: list[float] = scores[order].tolist()
    return listed, listed_scores, floor


def _kth(best: dict[str, tuple[float, str, int]], top_k: int) -> float | None:
    """The ``top_k``-th best message score found so far, or ``None`` while fewer messages are found."""
    if len(best) < top_k:
        return None
    return sorted((s for s, _, _ in best.values()), reverse=True)[top_k - 1]


# ----------------------------------------------------------------------------------- filter compilation

_SQL_COMPARE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}

_Branches = dict[str, Callable[[str], str]]
"""A test on one JSON scalar: for each ``json_type`` name that can pass, the SQL test of its value."""


def json_path(key: str) -> str:
    """The SQLite JSON path of a dotted filter key: ``"a.b"`` → ``$."a"."b"`` (labels JSON-escaped)."""
    return "$" + "".join("." + json.dumps(segment, ensure_ascii=False) for segment in key.split("."))


def compile_filter(filter: dict[str, Any], params: _Params, column: str) -> str:
    """Compile a validated filter into a SQL boolean expression over a JSON ``column``.

    The expression never evaluates to NULL (every leaf is a ``CASE`` with ``ELSE 0``), so ``NOT``
    keeps two-valued logic and the semantics of ``memstack.filters`` (missing keys, type-strict
    comparisons, any-element matching of arrays) carry over exactly.

    Args:
        filter: a filter that passed ``validate_filter``.
        params: a ``_Params`` collecting the bound values (JSON paths and operands).
        column: the SQL expression of the metadata (JSON text or JSONB).

    Returns:
        SQL text containing only numbered placeholders, operators and function names.
    """
    return _Compiler(params, column).filter(filter)


class _Compiler:
    def __init__(self, params: _Params, column: str) -> None:
        self.p = params
        self.column = column

    def filter(self, filter: dict[str, Any]) -> str:
        parts: list[str] = []
        for key, operand in filter.items():
            if key == "$and":
                parts.append("(" + " AND ".join(self.filter(f) for f in operand) + ")")
            elif key == "$or":
                parts.append("(" + " OR ".join(self.filter(f) for f in operand) + ")")
            elif key == "$not":
                parts.append(f"(NOT {self.filter(operand)})")
            else:
                parts.append(self.condition(self.p.bind(json_path(key)), operand))
        return "(" + " AND ".join(parts) + ")" if parts else "1"

    def condition(self, path: str, condition: Any) -> str:
        if not isinstance(condition, dict):
            return self.any_value(path, self.eq_branches(condition))
        return "(" + " AND ".join(self.operator(path, op, v) for op, v in condition.items()) + ")"

    def operator(self, path: str, op: str, operand: Any) -> str:
        if op == "$eq":
            return self.any_value(path, self.eq_branches(operand))
        if op == "$ne":
            return f"(NOT {self.any_value(path, self.eq_branches(operand))})"
        if op == "$in":
            return self.any_value(path, self.in_branches(operand))
        if op == "$nin":
            return f"(NOT {self.any_value(path, self.in_branches(operand))})"
        if op == "$exists":
            null = "IS NOT NULL" if operand else "IS NULL"
            return f"(json_type({self.column}, {path}) {null})"
        if op == "$not":
            return f"(NOT {self.condition(path, operand)})"
        return self.any_value(path, self.compare_branches(_SQL_COMPARE[op], operand))

    def any_value(self, path: str, branches: _Branches) -> str:
        """True when the value at ``path`` passes ``branches`` — or, for an array, any element does.

        One ``CASE`` on ``json_type`` picks the branch, so each row costs one type look-up plus at most
        one value look-up; a missing key (``json_type`` is NULL), an object or an unlisted type gives 0.
        """
        m = self.column

        def case(type_sql: str, value_sql: str, extra: str = "") -> str:
            whens = " ".join(f"WHEN '{name}' THEN {test(value_sql)}" for name, test in branches.items())
            return f"(CASE {type_sql} {whens}{extra} ELSE 0 END)"

        element = case("e.type", "e.value")
        array = f" WHEN 'array' THEN EXISTS (SELECT 1 FROM json_each({m}, {path}) AS e WHERE {element})"
        return case(f"json_type({m}, {path})", f"json_extract({m}, {path})", array)

    def eq_branches(self, operand: Any) -> _Branches:
        return self.in_branches([operand])

    def in_branches(self, operands: list[Any]) -> _Branches:
        branches: _Branches = {}
        for names, want in ((("integer", "real"), "number"), (("text",), "string")):
            values = [o for o in operands if kind(o) == want]
            if values:
                placeholders = ", ".join(self.p.bind(v) for v in values)
                test = _value_test(f"IN ({placeholders})")
                branches.update({name: test for name in names})
        for operand in operands:
            if operand is None:
                branches["null"] = _TRUE
            elif isinstance(operand, bool):
                branches["true" if operand else "false"] = _TRUE
        return branches

    def compare_branches(self, sql_op: str, operand: Any) -> _Branches:
        k = kind(operand)
        names = {"bool": ("true", "false"), "number": ("integer", "real"), "string": ("text",)}[k or ""]
        test = _value_test(f"{sql_op} {self.p.bind(int(operand) if k == 'bool' else operand)}")
        return {name: test for name in names}


def _TRUE(value_sql: str) -> str:
    return "1"


def _value_test(predicate: str) -> Callable[[str], str]:
    """A branch test ``<value> <predicate>``, e.g. ``json_extract(…) IN (?3, ?4)``."""
    return lambda value_sql: f"{value_sql} {predicate}"


# ------------------------------------------------------------------------------------------ text handling


def fts_text(text: str, created_at: datetime, context: str = "") -> str:
    """The text as handed to the keyword analyser: the entry's context (the previous message's text) first,
    CJK characters spaced apart, emoji spelled as words, the message's date in words at the end
    (``memstack.adapters.search_text.keyword_text``)."""
    return keyword_text(text, created_at, context)
