"""The embedded default's ``SearchIndex``: exact vector search and BM25 (FTS5) in one SQLite file.

Four tables live in the shared database file (``SqliteDatabase``):

* ``search_chunks`` — one row per indexed chunk: ``rowid``, ``resource_id``, ``thread_id``, ``message_id``,
  ``chunk``, ``role``, ``seq``, ``created_at`` (ISO-8601 UTC text), ``metadata`` (JSON text) and
  ``embedding`` (little-endian float32 BLOB, the layout of ``sqlite_vec.serialize_float32``). Indexes:
  ``(resource_id, thread_id)`` for the searches and ``(message_id, resource_id, chunk)`` (unique) for
  re-indexing and deletes.
* ``search_fts`` — an FTS5 table keyed by the chunk's ``rowid`` with two columns: ``text`` (the chunk text,
  pre-segmented by :func:`fts_text`) and ``scope`` (two tokens naming the chunk's resource and thread, see
  :func:`scope_token`). It is **contentless** (``content=''``, ``contentless_delete=1``, SQLite ≥ 3.43):
  the message text already lives in the store, so the index keeps only the inverted index, not a second
  copy of every message, and rows can still be deleted by ``rowid``.
* ``search_generations`` — a counter per resource, bumped by every write of that resource's chunks; it
  tells the in-process vector cache (below) whether it is current, even when another process wrote.
  Erasing a resource deletes its counter; a new counter starts above ``generation_floor`` (below), so it
  never repeats a generation some cache still holds.
* ``search_meta`` — key/value facts about the index: the embedding ``dimension``, the schema version,
  ``generation_floor``, the ``model_id``, and ``rebuilding_for`` while a rebuild (``memstack reindex``) is
  unfinished.
  Opening an index whose stored dimension differs raises ``InvalidInput`` (``SearchIndex`` contract).

**Vector search** is exact cosine similarity over the resource's (or thread's) chunks, with the metadata
filter applied inside the search, so it never returns fewer than ``top_k`` hits while more matching
messages exist (DESIGN.md "The layers"). Two paths give the same results:

* SQL: ``MIN(vec_distance_cosine(embedding, ?)) … WHERE resource_id = ? [AND thread_id = ?] [AND filter]
  GROUP BY message_id ORDER BY distance LIMIT top_k``. sqlite-vec's cosine is a scalar loop and every row
  is read from the B-tree, which costs about 1.5 ms for 600 chunks of 384 dimensions.
* Cache (default): the resource's vectors are kept in memory as one L2-normalised float32 matrix, so the
  search is one matrix-vector product (tens of microseconds). Scope and filter still run in SQL, as
  ``SELECT rowid … WHERE <the same scope and filter>`` (skipped when there is neither), and only the
  allowed rows are scored. Writes through this index patch the cached matrix in place; a write by anyone
  else (another process, another index object) bumps the resource's generation and the next search rebuilds
  the matrix from SQL. The cache is bounded (``vector_cache_bytes``, least recently used resources leave
  first); a resource larger than the bound, or ``vector_cache_bytes=0``, uses the SQL path.

**Keyword search** is FTS5 ``MATCH`` ranked by ``bm25()``. The tokenizer is ``porter unicode61
remove_diacritics 2``:

* ``unicode61 remove_diacritics 2`` folds case and diacritics (``café`` finds ``cafe``; decomposed and
  precomposed accents agree).
* ``porter`` stems English words. Conversational recall asks about the same thing in another inflection
  far more often than it needs exact word forms ("my dogs" → "the dog", "hiking" → "hike"); stemming is
  the standard BM25 set-up on conversational benchmarks (Lucene's English analyzer does the same), and a
  non-English word passes through unchanged. The OpenSearch adapter should use an analyzer with the same
  effect (``english``) so both back ends rank alike.
* Before the tokenizer sees it, text is pre-segmented (:func:`fts_text`): each Han ideograph and
  Hiragana character becomes its own token (as Lucene's standard tokenizer, hence OpenSearch, does), since
  Chinese and Japanese are written without spaces and ``unicode61`` would otherwise index a whole sentence as
  one token; and each emoji becomes a word token (``emoji127829`` for 🍕), which ``unicode61`` would
  otherwise drop as punctuation.

Free-text queries are never passed to FTS5 as syntax (:func:`fts_query`): the text is split into word
tokens, each is quoted as an FTS5 string (so ``AND``, ``NOT``, ``NEAR``, ``*``, ``:``, ``^`` or brackets are
literal text), English stop words are dropped (unless nothing else is left), and the tokens are OR-ed;
BM25 then ranks chunks that contain more, and rarer, terms first. The query is
``scope : "<resource or thread token>" AND text : (<terms>)``, so FTS5 only visits — and ``bm25()`` only
scores — the chunks of the searched scope; the SQL scope test still applies. ``bm25()`` costs about 2–3 µs
per matching chunk (FTS5 has no top-k pruning), which is what a keyword search costs. BM25's document
frequencies are computed over the whole table (every resource), as OpenSearch computes them per shard.

Every user value reaches SQL as a bound parameter; the metadata filter is compiled into ``json_type`` /
``json_extract`` / ``json_each`` calls whose JSON paths are bound parameters too.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from memstack.adapters.index_input import check_entry, check_top_k
from memstack.adapters.search_text import indexed_text, query_terms
from memstack.adapters.sqlite.db import SqliteDatabase
from memstack.errors import InvalidInput
from memstack.filters import kind, validate_filter
from memstack.model import check_id
from memstack.ports import IndexEntry, IndexHit, SearchResults, Vector

SCHEMA_VERSION = 1
"""Version of the tables' layout, recorded in ``search_meta``."""

REBUILD_KEY = "rebuilding_for"
"""``search_meta`` key present while a rebuild (``memstack reindex``) is unfinished: the model it is for."""

MAX_DIMENSION = 8192
"""Largest accepted embedding dimension (sqlite-vec's limit for vector functions)."""


FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
"""The FTS5 tokenizer (see the module docstring for why)."""

DEFAULT_VECTOR_CACHE_BYTES = 256 * 1024 * 1024
"""Default bound of the in-memory vector cache: about 170k chunks of 384 dimensions."""

_FTS5_BM25_SCALE = 2.2
"""FTS5's ``bm25()`` keeps BM25's ``k1 + 1`` factor (k1 = 1.2) that Lucene dropped; keyword scores are
divided by it so both backends report BM25 on one scale (``memstack.fusion.keyword_relevance``)."""

_ROW_OVERHEAD_BYTES = 120
"""Estimated cache bytes per chunk besides its vector (ids in Python lists, index arrays)."""

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
        embedding BLOB NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS search_chunks_scope ON search_chunks (resource_id, thread_id)",
    "CREATE UNIQUE INDEX IF NOT EXISTS search_chunks_message ON search_chunks (message_id, resource_id, chunk)",
    f"""CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5(
        text, scope, content='', contentless_delete=1, tokenize='{FTS_TOKENIZER}'
    )""",
    """CREATE TABLE IF NOT EXISTS search_generations (
        resource_id TEXT PRIMARY KEY,
        generation INTEGER NOT NULL
    ) WITHOUT ROWID""",
)

_INSERT_CHUNK = """INSERT INTO search_chunks
    (rowid, resource_id, thread_id, message_id, chunk, role, seq, created_at, metadata, embedding)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
_INSERT_FTS = "INSERT INTO search_fts (rowid, text, scope) VALUES (?, ?, ?)"
_DELETE_MESSAGE_FTS = """DELETE FROM search_fts WHERE rowid IN
    (SELECT rowid FROM search_chunks WHERE message_id = ? AND resource_id = ?)"""
_DELETE_MESSAGE_CHUNKS = "DELETE FROM search_chunks WHERE message_id = ? AND resource_id = ?"
_DELETE_CHUNK_FTS = """DELETE FROM search_fts WHERE rowid IN
    (SELECT rowid FROM search_chunks WHERE message_id = ? AND resource_id = ? AND chunk = ?)"""
_DELETE_CHUNK = "DELETE FROM search_chunks WHERE message_id = ? AND resource_id = ? AND chunk = ?"
_DELETE_THREAD_FTS = """DELETE FROM search_fts WHERE rowid IN
    (SELECT rowid FROM search_chunks WHERE resource_id = ? AND thread_id = ?)"""
_DELETE_THREAD_CHUNKS = "DELETE FROM search_chunks WHERE resource_id = ? AND thread_id = ?"
_BUMP_GENERATION = """INSERT INTO search_generations (resource_id, generation)
    VALUES (?, 1 + coalesce((SELECT CAST(value AS INTEGER) FROM search_meta WHERE key = 'generation_floor'), 0))
    ON CONFLICT (resource_id) DO UPDATE SET generation = generation + 1 RETURNING generation"""
_RAISE_GENERATION_FLOOR = """INSERT INTO search_meta (key, value) VALUES ('generation_floor', ?)
    ON CONFLICT (key) DO UPDATE SET value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))"""
_DELETE_RESOURCE_FTS = """DELETE FROM search_fts WHERE rowid IN
    (SELECT rowid FROM search_chunks WHERE resource_id = ?)"""
_DELETE_RESOURCE_CHUNKS = "DELETE FROM search_chunks WHERE resource_id = ?"
_GET_GENERATION = "SELECT generation FROM search_generations WHERE resource_id = ?"

_Floats = npt.NDArray[np.float32]
_Ints = npt.NDArray[np.int64]


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
    fts: str


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
        self._cache = _VectorCache(dimension, max(0, vector_cache_bytes))
        with db.transaction() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)
            facts = dict(conn.execute("SELECT key, value FROM search_meta").fetchall())
            facts = _rebuild_facts(conn, db.path, facts, dimension, model_id, rebuild)
            self.rebuilding = REBUILD_KEY in facts
            if "dimension" not in facts:
                conn.executemany(
                    "INSERT INTO search_meta (key, value) VALUES (?, ?)",
                    [("dimension", str(dimension)), ("schema_version", str(SCHEMA_VERSION))],
                )
            elif int(facts["dimension"]) != dimension:
                raise InvalidInput(
                    f"the search index in {db.path} holds {int(facts['dimension'])}-dimensional vectors, but "
                    f"{dimension}-dimensional ones were asked for; use the embedder the index was built with, "
                    "another database file, or rebuild the index with `memstack reindex`",
                    field="dimension",
                )
            if model_id is not None:
                self._check_model(conn, db.path, facts.get("model_id"), model_id)

    @staticmethod
    def _check_model(conn: Any, path: str, stored: str | None, model_id: str) -> None:
        if stored is None:
            # A file from before the model was recorded: its vectors are taken to be this model's, the
            # only model its dimension check let in until now.
            conn.execute("INSERT INTO search_meta (key, value) VALUES ('model_id', ?)", (model_id,))
        elif stored != model_id:
            raise InvalidInput(
                f"the search index in {path} was built with the embedding model {stored!r}, but "
                f"{model_id!r} was asked for: their vectors are not comparable. Use {stored!r}, another "
                f"database file, or rebuild the index for {model_id!r} with `memstack reindex`",
                field="embedder",
            )

    def finish_rebuild(self) -> None:
        """End a rebuild (``rebuild=True``): the index opens normally again, for its new model."""
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM search_meta WHERE key = ?", (REBUILD_KEY,))
        self.rebuilding = False

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
                conn.executemany(_DELETE_MESSAGE_FTS, messages)
                conn.executemany(_DELETE_MESSAGE_CHUNKS, messages)
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
                        )
                        for n, r in enumerate(rows)
                    ),
                )
                conn.executemany(
                    _INSERT_FTS,
                    (
                        (
                            first + n,
                            r.fts,
                            f"{scope_token(r.resource_id)} {scope_token(r.resource_id, r.thread_id)}",
                        )
                        for n, r in enumerate(rows)
                    ),
                )
                generations = _bump(conn, {r.resource_id for r in rows})
            for resource_id, generation in generations.items():
                replaced = {m for m, r in messages if r == resource_id}
                added = [(first + n, r) for n, r in enumerate(rows) if r.resource_id == resource_id]
                self._cache.patch(resource_id, generation, messages=replaced, added=added)
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
                conn.executemany(_DELETE_CHUNK_FTS, keys)
                conn.executemany(_DELETE_CHUNK, keys)
                _bump(conn, {resource_id})  # other processes' caches see the change
            self._cache.drop(resource_id)

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
            fts=fts_text(e.text),
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
                conn.executemany(_DELETE_MESSAGE_FTS, pairs)
                conn.executemany(_DELETE_MESSAGE_CHUNKS, pairs)
                generation = _bump(conn, {resource_id})[resource_id]
            self._cache.patch(resource_id, generation, messages=ids)

    def delete_thread(self, resource_id: str, thread_id: str) -> None:
        """Remove every chunk of the thread, only if it belongs to ``resource_id``.

        Raises:
            InvalidInput: ``resource_id`` or ``thread_id`` is not a valid id.
        """
        params = (check_id(resource_id, "resource_id"), check_id(thread_id, "thread_id"))
        with self._db.lock:
            with self._db.transaction() as conn:
                conn.execute(_DELETE_THREAD_FTS, params)
                conn.execute(_DELETE_THREAD_CHUNKS, params)
                generation = _bump(conn, {resource_id})[resource_id]
            self._cache.patch(resource_id, generation, thread_id=thread_id)

    def delete_resource(self, resource_id: str) -> int:
        """Remove every chunk (and its keyword entry) of the resource, and its generation counter.

        The counter goes too (it is keyed by the resource id). So that a vector cache of another process
        never takes a later generation of a re-created resource for the one it holds (nor patches its
        stale snapshot as "one generation behind"), ``generation_floor`` in ``search_meta`` is raised past
        the deleted counter and new counters start above the floor.

        The keyword index is then merged (FTS5 ``optimize``) so the words of the removed chunks leave its
        pages too, not only its live rows; this rewrites the keyword index, in time proportional to its size.

        Returns:
            How many chunks were removed (0 on a second call).

        Raises:
            InvalidInput: ``resource_id`` is not a valid id.
        """
        check_id(resource_id, "resource_id")
        with self._db.lock:
            with self._db.transaction() as conn:
                conn.execute(_DELETE_RESOURCE_FTS, (resource_id,))
                removed = int(conn.execute(_DELETE_RESOURCE_CHUNKS, (resource_id,)).rowcount)
                row = conn.execute(
                    "DELETE FROM search_generations WHERE resource_id = ? RETURNING generation",
                    (resource_id,),
                ).fetchone()
                if row is not None:
                    conn.execute(_RAISE_GENERATION_FLOOR, (str(int(row[0]) + 1),))
                if removed:
                    # FTS5 only marks deleted rows; their words stay in its index pages until segments are
                    # merged. An erasure merges them now (about 1.3 s per 100k chunks, measured).
                    conn.execute("INSERT INTO search_fts (search_fts) VALUES ('optimize')")
            self._cache.drop(resource_id)
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
        """
        check_id(resource_id, "resource_id")
        if thread_id is not None:
            check_id(thread_id, "thread_id")
        check_top_k(top_k)
        checked = validate_filter(filter) or None
        query = None if vector is None else self._vector(vector, "vector")
        if text is not None and not isinstance(text, str):
            raise InvalidInput("text must be a string", field="text")
        match = None if text is None else fts_query(text)

        with self._db.read() as conn:
            vector_hits = None
            if query is not None:
                vector_hits = self._vector_search(conn, query, resource_id, thread_id, checked, top_k)
            keyword_hits = None
            if text is not None:
                keyword_hits = []
                if match is not None and not checked:
                    keyword_hits = self._keyword_ranked_first(conn, match, resource_id, thread_id, top_k)
                elif match is not None:
                    sql, params = _keyword_sql(match, resource_id, thread_id, checked, top_k)
                    keyword_hits = [
                        IndexHit(message_id=m, thread_id=t, score=-r / _FTS5_BM25_SCALE, seq=q)
                        for m, t, q, r in conn.execute(sql, params)
                    ]
        return SearchResults(vector=vector_hits, keyword=keyword_hits)

    def _keyword_ranked_first(
        self, conn: Any, terms: str, resource_id: str, thread_id: str | None, top_k: int
    ) -> list[IndexHit]:
        """Keyword search without a metadata filter: FTS5 ranks its own rows (``ORDER BY r LIMIT n``),
        and only those ``n`` rows are joined with their chunks, instead of every matching row (3× faster on
        a LoCoMo conversation). ``n`` doubles until ``top_k`` distinct messages are found or the matches
        run out; the result equals ``_keyword_sql``'s (a test checks both paths against each other)."""
        match = f'scope : "{scope_token(resource_id, thread_id)}" AND text : ({terms})'
        limit = 2 * top_k + 8
        while True:
            ranked = conn.execute(
                "SELECT rowid, bm25(search_fts, 1.0, 0.0) AS r FROM search_fts WHERE search_fts MATCH ? "
                "ORDER BY r, rowid LIMIT ?",
                (match, limit),
            ).fetchall()
            rank = {rowid: r for rowid, r in ranked}
            marks = ",".join("?" * len(rank))
            where = "resource_id = ?" + (" AND thread_id = ?" if thread_id is not None else "")
            scope = (resource_id,) if thread_id is None else (resource_id, thread_id)
            best: dict[str, tuple[float, str, int]] = {}
            for rowid, message_id, tid, seq in conn.execute(
                f"SELECT rowid, message_id, thread_id, seq FROM search_chunks WHERE rowid IN ({marks}) AND {where}",
                (*rank, *scope),
            ):
                r = rank[rowid]
                if message_id not in best or r < best[message_id][0]:
                    best[message_id] = (r, tid, seq)
            # Done when the matches ran out, or when the last row fetched ranks strictly below the top_k-th
            # message: every row that could tie with it (ties break by message id) has then been seen.
            kth = sorted(r for r, _, _ in best.values())[top_k - 1] if len(best) >= top_k else None
            if len(ranked) < limit or (kth is not None and ranked[-1][1] > kth):
                ordered = sorted(best.items(), key=lambda item: (item[1][0], item[0]))[:top_k]
                return [
                    IndexHit(message_id=m, thread_id=t, score=-r / _FTS5_BM25_SCALE, seq=q)
                    for m, (r, t, q) in ordered
                ]
            limit *= 2

    def _vector_search(
        self,
        conn: Any,
        query: _Floats,
        resource_id: str,
        thread_id: str | None,
        filter: dict[str, Any] | None,
        top_k: int,
    ) -> list[IndexHit]:
        cached = self._cache.get(conn, resource_id)
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
        return cached.search(query, allowed, top_k)

    def close(self) -> None:
        """Drop the vector cache. The shared ``SqliteDatabase`` is closed by whoever opened it."""
        with self._db.lock:
            self._cache.clear()


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
            raise InvalidInput(
                f"the search index in {path} is being rebuilt for the embedding model {pending!r} and the "
                "rebuild has not finished: run `memstack reindex` with that embedder again to finish it",
                field="embedder",
            )
        return facts
    if model_id is None:
        raise InvalidInput("a rebuild needs the embedding model's id (model_id)", field="model_id")
    switched = facts.get("dimension") not in (None, str(dimension)) or facts.get("model_id") not in (
        None,
        model_id,
    )
    if switched or pending not in (None, model_id):
        conn.execute("DELETE FROM search_fts")
        conn.execute("DELETE FROM search_chunks")
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


def _bump(conn: Any, resource_ids: Iterable[str]) -> dict[str, int]:
    """Advance the generation of each resource (inside the caller's write transaction)."""
    return {r: int(conn.execute(_BUMP_GENERATION, (r,)).fetchone()[0]) for r in sorted(resource_ids)}


# ------------------------------------------------------------------------------------------ vector cache


class _ResourceVectors:
    """The chunks of one resource in memory: a snapshot of ``search_chunks`` for vector search.

    Rows are in no particular order. ``matrix`` is a view of the first ``n`` rows of ``buffer``, which has
    spare capacity so that appending chunks does not copy the whole matrix.

    Attributes:
        generation: the resource's ``search_generations`` value this snapshot corresponds to.
        rowids: ``(n,)`` chunk rowids; ``matrix``: ``(n, dimension)`` L2-normalised float32 rows.
        message_ids, thread_ids, seqs: per chunk, aligned with ``rowids``.
        codes: ``(n,)`` the message ordinal of each chunk; ``names[code]`` is its id, ``threads[code]`` its
            thread.
    """

    def __init__(
        self,
        generation: int,
        rowids: _Ints,
        message_ids: list[str],
        thread_ids: list[str],
        seqs: list[int],
        buffer: _Floats,
    ) -> None:
        self.generation = generation
        self.rowids = rowids
        self.message_ids = message_ids
        self.thread_ids = thread_ids
        self.seqs = seqs
        self.buffer = buffer
        self.matrix: _Floats = buffer[: len(rowids)]
        ordinal: dict[str, int] = {}
        self.codes: _Ints = np.fromiter(
            (ordinal.setdefault(m, len(ordinal)) for m in message_ids), dtype=np.int64, count=len(message_ids)
        )
        self.names = list(ordinal)
        threads = dict(zip(message_ids, thread_ids, strict=True))
        self.threads = [threads[m] for m in self.names]
        seq_of = dict(zip(message_ids, seqs, strict=True))
        self.message_seqs = [seq_of[m] for m in self.names]
        self.by_rowid: _Ints = np.argsort(rowids).astype(np.int64)
        self.sorted_rowids: _Ints = rowids[self.by_rowid]

    @property
    def nbytes(self) -> int:
        return int(self.buffer.nbytes) + len(self.rowids) * _ROW_OVERHEAD_BYTES

    def search(self, query: _Floats, allowed: _Ints | None, top_k: int) -> list[IndexHit]:
        """The ``top_k`` best messages among the ``allowed`` chunk rowids (all chunks when ``None``).

        A message scores by its best chunk; equal scores are ordered by message id.
        """
        unit = (query / np.float32(np.linalg.norm(query))).astype(np.float32)
        # Every row (cheaper than gathering the allowed ones first). einsum rather than BLAS: OpenBLAS would
        # spread a product this small over threads that then spin, slowing the SQL that runs next.
        scores = np.einsum("ij,j->i", self.matrix, unit)
        # all-zero rows (text without words) have no direction: never a vector hit
        scores[~self.matrix.any(axis=1)] = -np.inf
        codes = self.codes
        if allowed is not None:
            index = np.searchsorted(self.sorted_rowids, allowed)
            inside = index < len(self.sorted_rowids)
            index, allowed = index[inside], allowed[inside]
            positions = self.by_rowid[index[self.sorted_rowids[index] == allowed]]
            scores, codes = scores[positions], codes[positions]
        if len(scores) == 0:
            return []
        best = np.full(len(self.names), -np.inf, dtype=np.float32)
        np.maximum.at(best, codes, scores)
        candidates = np.flatnonzero(best > -np.inf)
        if len(candidates) > 4 * top_k:  # keep the top_k best, and everything tied with the last of them
            kept = best[candidates]
            candidates = candidates[kept >= np.partition(kept, len(kept) - top_k)[len(kept) - top_k]]
        ranked = sorted(candidates.tolist(), key=lambda c: (-float(best[c]), self.names[c]))[:top_k]
        return [
            IndexHit(
                message_id=self.names[c],
                thread_id=self.threads[c],
                score=max(-1.0, min(1.0, float(best[c]))),
                seq=self.message_seqs[c],
            )
            for c in ranked
        ]

    def patched(
        self,
        generation: int,
        *,
        messages: set[str],
        thread_id: str | None,
        added: Sequence[tuple[int, _Row]],
    ) -> _ResourceVectors:
        """A new snapshot without the chunks of ``messages`` / ``thread_id`` and with ``added`` appended."""
        keep = np.fromiter(
            (
                m not in messages and t != thread_id
                for m, t in zip(self.message_ids, self.thread_ids, strict=True)
            ),
            dtype=bool,
            count=len(self.message_ids),
        )
        rowids, message_ids, thread_ids, buffer = self.rowids, self.message_ids, self.thread_ids, self.buffer
        seqs = self.seqs
        if not keep.all():
            rowids = rowids[keep]
            message_ids = [m for m, k in zip(message_ids, keep.tolist(), strict=True) if k]
            thread_ids = [t for t, k in zip(thread_ids, keep.tolist(), strict=True) if k]
            seqs = [q for q, k in zip(seqs, keep.tolist(), strict=True) if k]
            buffer = self.matrix[keep]
        if added:
            n, extra = len(rowids), len(added)
            if n + extra > len(buffer):
                grown = np.empty((max(n + extra, 2 * n, 64), buffer.shape[1]), dtype=np.float32)
                grown[:n] = buffer[:n]
                buffer = grown
            # Appending past n writes only rows that no earlier snapshot's matrix view covers.
            buffer[n : n + extra] = _unit_rows(np.stack([row.vector for _, row in added]))
            rowids = np.concatenate([rowids, np.fromiter((r for r, _ in added), dtype=np.int64, count=extra)])
            message_ids = message_ids + [row.message_id for _, row in added]
            thread_ids = thread_ids + [row.thread_id for _, row in added]
            seqs = seqs + [row.seq for _, row in added]
        return _ResourceVectors(generation, rowids, message_ids, thread_ids, seqs, buffer)


class _VectorCache:
    """Per-resource ``_ResourceVectors``, least recently used first out, within a byte bound.

    Thread-safe: searches read through their own connections while the writer patches, so every method
    holds the cache's lock (a snapshot, once returned, is never mutated and is searched outside it).
    """

    def __init__(self, dimension: int, max_bytes: int) -> None:
        self.dimension = dimension
        self.max_bytes = max_bytes
        self.entries: OrderedDict[str, _ResourceVectors] = OrderedDict()
        self.nbytes = 0
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()
            self.nbytes = 0

    def get(self, conn: Any, resource_id: str) -> _ResourceVectors | None:
        """The resource's current vectors (loaded if stale or absent), or ``None`` to use SQL instead.

        ``conn`` reads in one snapshot (``SqliteDatabase.read``), and the generation is read before the
        rows: a snapshot is never newer than its label's data (a reader on an older snapshot may replace a
        newer entry with its own; the next search at the newer generation reloads it, never the reverse).
        """
        if self.max_bytes == 0:
            return None
        with self._lock:
            return self._get(conn, resource_id)

    def _get(self, conn: Any, resource_id: str) -> _ResourceVectors | None:
        row = conn.execute(_GET_GENERATION, (resource_id,)).fetchone()
        generation = 0 if row is None else int(row[0])
        entry = self.entries.get(resource_id)
        if entry is not None and entry.generation == generation:
            self.entries.move_to_end(resource_id)
            return entry
        count = int(
            conn.execute(
                "SELECT count(*) FROM search_chunks WHERE resource_id = ?", (resource_id,)
            ).fetchone()[0]
        )
        if count * (self.dimension * 4 + _ROW_OVERHEAD_BYTES) > self.max_bytes:
            self._drop(resource_id)
            return None
        rows = conn.execute(
            "SELECT rowid, message_id, thread_id, embedding, seq FROM search_chunks WHERE resource_id = ?",
            (resource_id,),
        ).fetchall()
        matrix = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").reshape(len(rows), self.dimension)
        rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        entry = _ResourceVectors(
            generation,
            rowids,
            [r[1] for r in rows],
            [r[2] for r in rows],
            [r[4] for r in rows],
            _unit_rows(matrix),
        )
        self._store(resource_id, entry)
        return entry if resource_id in self.entries else None

    def patch(
        self,
        resource_id: str,
        generation: int,
        *,
        messages: set[str] | None = None,
        thread_id: str | None = None,
        added: Sequence[tuple[int, _Row]] = (),
    ) -> None:
        """Apply this process's own committed write to a cached resource: drop the chunks of ``messages``
        or of ``thread_id``, then add ``added`` (``(rowid, row)`` pairs).

        Only a snapshot exactly one generation behind is patched (nobody else wrote in between);
        otherwise it is dropped and the next search reloads it.
        """
        with self._lock:
            self._patch(resource_id, generation, messages=messages, thread_id=thread_id, added=added)

    def _patch(
        self,
        resource_id: str,
        generation: int,
        *,
        messages: set[str] | None,
        thread_id: str | None,
        added: Sequence[tuple[int, _Row]],
    ) -> None:
        entry = self.entries.get(resource_id)
        if entry is None:
            return
        if entry.generation != generation - 1:
            self._drop(resource_id)
            return
        self._store(
            resource_id,
            entry.patched(generation, messages=messages or set(), thread_id=thread_id, added=added),
        )

    def _store(self, resource_id: str, entry: _ResourceVectors) -> None:
        self._drop(resource_id)
        if entry.nbytes > self.max_bytes:
            return
        self.entries[resource_id] = entry
        self.nbytes += entry.nbytes
        while self.nbytes > self.max_bytes:
            _, evicted = self.entries.popitem(last=False)
            self.nbytes -= evicted.nbytes

    def drop(self, resource_id: str) -> None:
        """Forget the resource's vectors (the next search reloads them)."""
        with self._lock:
            self._drop(resource_id)

    def _drop(self, resource_id: str) -> None:
        entry = self.entries.pop(resource_id, None)
        if entry is not None:
            self.nbytes -= entry.nbytes


def _unit_rows(matrix: npt.NDArray[Any]) -> _Floats:
    """The rows scaled to unit length, as float32 (a zero row stays zero)."""
    rows = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms == 0, 1, norms)).astype(np.float32)


# ---------------------------------------------------------------------------------------- query building


class _Params:
    """Numbered SQL parameters (``?1``, ``?2``…), so a value can be referenced more than once."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def bind(self, value: Any) -> str:
        self.values.append(value)
        return f"?{len(self.values)}"


def _scope_sql(p: _Params, resource_id: str, thread_id: str | None, filter: dict[str, Any] | None) -> str:
    where = f"c.resource_id = {p.bind(resource_id)}"
    if thread_id is not None:
        where += f" AND c.thread_id = {p.bind(thread_id)}"
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


def _keyword_sql(
    terms: str, resource_id: str, thread_id: str | None, filter: dict[str, Any] | None, top_k: int
) -> tuple[str, list[Any]]:
    # The scope token makes FTS5 intersect the terms with the resource's (or thread's) own postings, so
    # bm25() is computed only for this scope's matches; the SQL scope test stays as the guarantee.
    # The scope column has weight 0 in bm25(). bm25() cannot sit inside an aggregate, so per-chunk ranks
    # are materialised first. CROSS JOIN makes FTS5 drive the join (one MATCH, then rowid look-ups).
    p = _Params()
    match_param = p.bind(f'scope : "{scope_token(resource_id, thread_id)}" AND text : ({terms})')
    where = _scope_sql(p, resource_id, thread_id, filter)
    sql = (
        "WITH hits AS MATERIALIZED ("
        "SELECT c.message_id AS message_id, c.thread_id AS thread_id, c.seq AS seq, "
        "bm25(search_fts, 1.0, 0.0) AS r "
        "FROM search_fts CROSS JOIN search_chunks AS c ON c.rowid = search_fts.rowid "
        f"WHERE search_fts MATCH {match_param} AND {where}) "
        "SELECT message_id, thread_id, seq, MIN(r) AS r FROM hits "
        f"GROUP BY message_id ORDER BY r, message_id LIMIT {p.bind(top_k)}"
    )
    return sql, p.values


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


def fts_text(text: str) -> str:
    """The text as handed to the FTS5 tokenizer: CJK characters spaced apart, emoji spelled as words
    (``memstack.adapters.search_text.indexed_text``)."""
    return indexed_text(text)


def fts_query(text: str) -> str | None:
    """A safe FTS5 query for free text: its word tokens (``search_text.query_terms``: distinct, stop words
    dropped unless nothing else is left, at most ``MAX_QUERY_TERMS``), each quoted, joined with ``OR``.

    A token never contains a double quote, so quoting makes every FTS5 operator, prefix star or column
    filter literal text. A token the tokenizer turns into nothing (a symbol) matches nothing and does no
    harm.

    Returns:
        The ``MATCH`` expression, or ``None`` when the text has no token (the search returns ``[]``).
    """
    return " OR ".join(f'"{t}"' for t in query_terms(text)) or None


def scope_token(resource_id: str, thread_id: str | None = None) -> str:
    """The FTS5 token that marks a chunk's resource (or, with ``thread_id``, its thread).

    ``r`` or ``t`` plus the decimal value of a 64-bit BLAKE2b hash: one token for any id, digits only so
    that no stemming rule applies. A hash collision could only make FTS5 return another scope's rows,
    which the SQL scope test then drops.
    """
    key = resource_id if thread_id is None else f"{resource_id}\x00{thread_id}"
    digest = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    return f"{'r' if thread_id is None else 't'}{digest}"
