"""``SearchIndex`` on OpenSearch: k-NN (HNSW, cosine) and BM25 over message chunks, filters inside.

Two flavours, chosen by ``service`` (docs/opensearch.md has the details and the AWS sources):

* ``es`` (managed domain) and ``none`` (self-run cluster): each chunk has a deterministic ``_id`` (a hash
  of resource, message and chunk), so re-indexing overwrites. ``upsert`` is one ``_bulk`` of ``index``
  actions, then one ``_delete_by_query`` removing the messages' chunks that were not rewritten (a message
  re-indexed with fewer chunks). Deletes are ``_delete_by_query``. With ``refresh=True`` writes wait for a
  refresh (``refresh=wait_for`` / ``refresh=true``), so a search right after sees them.
* ``aoss`` (Serverless vector collection): the collection assigns ids (a client ``_id`` is refused),
  ``_delete_by_query`` and ``_refresh`` are not among the supported operations, and writes become visible
  after a delay. ``upsert`` first finds the ``_id``s of the messages' existing chunks (a paged search), then
  indexes the new chunks, then deletes the old ids with ``_bulk`` — so a message is never absent, and a
  transient duplicate is harmless because search keeps one hit per message (its best chunk). Deletes find
  the ids the same way. Idempotency comes from DynamoDB (the indexer's stream), not from ``_id``.

A ``_bulk`` answer with item errors is never ignored: items refused with 429 or 5xx are retried (twice,
with backoff), and what still fails raises ``Unavailable`` naming the count, the index and the first item's
error type and reason (at most 200 characters, never document text).

Timeouts: each search passes ``request_timeout=search_timeout`` (10 s by default; under a turn's deadline,
the time the turn has left if that is sooner) and each write
``request_timeout=write_timeout`` (30 s); a timeout is not retried (see ``client``) and raises
``Unavailable`` naming the timeout.

Search: the vector list is a ``knn`` query with the resource/thread scope and the metadata filter inside
the ``knn`` clause; the keyword list is a ``match`` on ``text`` in a ``bool`` with the same filter. Both
asked: one ``_msearch`` round trip; one asked: one ``_search``. Chunks are over-fetched and reduced to one
hit per message (its best chunk); when fewer than ``top_k`` messages come back while more chunks may
exist, that list is fetched again with a larger ``k``. Vector scores are cosine similarity, converted from
OpenSearch's ``cosinesimil`` score ``(1 + cos) / 2`` (the same on lucene and faiss); keyword scores are
BM25.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memstack import deadline
from memstack.adapters.index_input import MAX_TOP_K, check_entry, check_top_k
from memstack.adapters.opensearch.client import (
    SEARCH_TIMEOUT_SECONDS,
    WRITE_TIMEOUT_SECONDS,
    Service,
    call,
    describe,
    translate,
)
from memstack.adapters.opensearch.documents import flatten
from memstack.adapters.opensearch.query import keyword_body, scope_filter, vector_body
from memstack.adapters.opensearch.schema import (
    SPACE_TYPE,
    VECTOR_FIELD,
    Engine,
    index_body,
    index_name,
    stored_dimension,
    stored_method,
)
from memstack.adapters.search_text import keyword_text, query_terms
from memstack.errors import InvalidInput, Unavailable
from memstack.filters import validate_filter
from memstack.model import check_id
from memstack.ports import IndexEntry, IndexHit, SearchResults, Vector

logger = logging.getLogger(__name__)

MAX_DIMENSION = 16_000
"""Largest ``knn_vector`` dimension OpenSearch accepts."""


BULK_ACTIONS_PER_REQUEST = 500
"""Most actions in one ``_bulk`` request (keeps payloads well under the 10 MiB that Serverless advises)."""

ID_PAGE_SIZE = 1_000
"""Ids fetched per page when looking up a message's or thread's chunks (``aoss``)."""

DEFAULT_BULK_RETRY_DELAYS = (0.5, 2.0)
"""Seconds to wait before each retry of the ``_bulk`` items refused with 429 or 5xx."""

REASON_LIMIT = 200
"""Most characters of an OpenSearch error reason quoted in a bulk or delete failure."""

_FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True, slots=True)
class _Chunk:
    resource_id: str
    message_id: str
    chunk: int
    doc: dict[str, Any]


class OpenSearchIndex:
    """``SearchIndex`` over one OpenSearch index per embedding model and dimension.

    The index is created at start-up if missing (``PUT /<index>`` with :func:`index_body`), and an existing
    one is checked: a ``knn_vector`` of another dimension, or a space type other than ``cosinesimil``, raises
    ``InvalidInput`` naming both; an existing index on nmslib raises ``InvalidInput`` (nmslib refuses the
    filter inside ``knn``). An existing index on the other of lucene/faiss is used as it is: both answer the
    same queries with the same cosine scores, so the mismatch is harmless — a WARNING names both engines and
    :attr:`engine` reports the index's real engine.

    Args:
        client: an ``opensearchpy.OpenSearch`` (see :func:`memstack.adapters.opensearch.make_client`);
            closed by :meth:`close`.
        dimension: the length of every vector stored and searched, ``1..16000``.
        model_id: the embedding model's id; part of the index name.
        service: ``es`` (managed domain), ``aoss`` (Serverless vector collection) or ``none`` (self-run
            cluster, same behaviour as ``es``).
        index_prefix: start of the index name (lower-case letters, digits, ``_``, ``-``).
        engine: the k-NN engine, ``lucene`` or ``faiss`` (never nmslib).
        refresh: make every write visible to search before it returns (``es``/``none`` only; Serverless
            has no refresh). Tests want it; the indexer does not need it.
        bulk_retry_delays: seconds before each retry of ``_bulk`` items refused with 429 or 5xx.
        search_timeout: seconds a search (``_search``/``_msearch``) may take (``request_timeout``), > 0.
        write_timeout: seconds a ``_bulk`` or ``_delete_by_query`` request may take, > 0.

    Attributes:
        dimension: as given. name: the index name. engine: the k-NN engine of the index (the existing
        index's, when it differs from the one asked for).

    Raises:
        InvalidInput: a bad ``dimension``/``service``/``engine``/``index_prefix``/``model_id``/timeout, or an
            existing index whose vectors have another dimension (or no vector field), another space type
            than ``cosinesimil`` (when the mapping names one), or the nmslib engine.
        Unavailable: OpenSearch cannot be reached or refuses the request.
    """

    def __init__(
        self,
        client: Any,
        *,
        dimension: int,
        model_id: str,
        service: Service = "es",
        index_prefix: str = "memstack",
        engine: Engine = "lucene",
        refresh: bool = False,
        bulk_retry_delays: Sequence[float] = DEFAULT_BULK_RETRY_DELAYS,
        search_timeout: float = SEARCH_TIMEOUT_SECONDS,
        write_timeout: float = WRITE_TIMEOUT_SECONDS,
    ) -> None:
        if (
            isinstance(dimension, bool)
            or not isinstance(dimension, int)
            or not 1 <= dimension <= MAX_DIMENSION
        ):
            raise InvalidInput(f"dimension must be an integer from 1 to {MAX_DIMENSION}", field="dimension")
        if service not in ("es", "aoss", "none"):
            raise InvalidInput("service must be 'es', 'aoss' or 'none'", field="service")
        if engine not in ("lucene", "faiss"):
            raise InvalidInput("engine must be 'lucene' or 'faiss' (nmslib is not used)", field="engine")
        self._search_timeout = _check_timeout(search_timeout, "search_timeout")
        self._write_timeout = _check_timeout(write_timeout, "write_timeout")
        self._client = client
        self.dimension = dimension
        self.service: Service = service
        self.engine: Engine = engine
        self.name = index_name(index_prefix, model_id, dimension)
        self._refresh = refresh and service != "aoss"
        self._retry_delays = tuple(bulk_retry_delays)
        self._ensure_index()

    # ---------------------------------------------------------------------------------------- start-up

    def _ensure_index(self) -> None:
        from opensearchpy.exceptions import RequestError

        name = self.name
        if not call("index check", lambda: self._client.indices.exists(index=name), index=name):
            try:
                self._client.indices.create(index=name, body=index_body(self.dimension, self.engine))
                logger.info("created OpenSearch index %s (dimension %d)", name, self.dimension)
                return
            except RequestError as exc:
                if describe(exc.info)[0] != "resource_already_exists_exception":
                    raise translate("index creation", exc, index=name) from exc
            except Exception as exc:
                raise translate("index creation", exc, index=name) from exc
        mapping = call("mapping read", lambda: self._client.indices.get_mapping(index=name), index=name)
        stored = stored_dimension(mapping, name)
        if stored is None:
            raise InvalidInput(
                f"the OpenSearch index {name} has no knn_vector field {VECTOR_FIELD!r}; it was not created by "
                "Memstack — use another index_prefix",
                field="dimension",
            )
        if stored != self.dimension:
            raise InvalidInput(
                f"the OpenSearch index {name} holds {stored}-dimensional vectors, but {self.dimension}-dimensional "
                "ones were asked for; use the embedder the index was built with or another index_prefix",
                field="dimension",
            )
        self._check_method(stored_method(mapping, name))

    def _check_method(self, method: dict[str, str]) -> None:
        """Compare the existing index's k-NN space type and engine with this adapter's (see the class)."""
        name = self.name
        space = method.get("space_type")  # absent: not named in the answer; Memstack always names it
        if space is not None and space != SPACE_TYPE:
            raise InvalidInput(
                f"the OpenSearch index {name} compares vectors with space type {space!r}, but Memstack needs "
                f"{SPACE_TYPE!r} (cosine); it was not created by Memstack — use another index_prefix",
                field="index_prefix",
            )
        engine = method.get("engine")
        if engine is None or engine == self.engine:
            return
        if engine not in ("lucene", "faiss"):
            raise InvalidInput(
                f"the OpenSearch index {name} uses the k-NN engine {engine!r}, but {self.engine!r} was configured; "
                "Memstack searches need lucene or faiss (filters inside knn) — use another index_prefix",
                field="engine",
            )
        logger.warning(
            "the OpenSearch index %s uses the k-NN engine %s, not the configured %s; using it as it is "
            "(same queries and cosine scores); set the engine to %s, or use another index_prefix to get a "
            "new %s index",
            name,
            engine,
            self.engine,
            engine,
            self.engine,
        )
        self.engine = engine  # type: ignore[assignment]

    # ------------------------------------------------------------------------------------------- writes

    def upsert(self, entries: Sequence[IndexEntry], *, replace: bool = True) -> dict[str, list[str]]:
        """Index these chunks, replacing every earlier chunk of each ``(resource_id, message_id)``.

        A repeated ``(resource_id, message_id, chunk)`` in the batch keeps the last one. Validation happens
        before any request, so a bad entry writes nothing. On ``aoss`` with ``replace=False`` the earlier
        chunks are left for the caller to delete by id (``delete_documents``): the search that finds them
        sees a write only after the collection's visibility delay, so an update made within it would keep
        the old chunk.

        Returns:
            Message id → the ``_id`` of each document written for it, in chunk order (assigned by the
            collection on ``aoss``).

        Raises:
            InvalidInput: naming ``entries[i].<field>``: a bad id, a negative or non-integer chunk or seq,
                a vector that is not ``dimension`` finite numbers, metadata that is not a JSON object.
                An all-zero vector is accepted: the chunk is stored without a vector, found by keywords but
                never by vector search.
            PayloadTooLarge: metadata over ``memstack.model.MAX_METADATA_BYTES``.
            Unavailable: OpenSearch failed, or some ``_bulk`` items still failed after retries.
        """
        chunks: dict[tuple[str, str, int], _Chunk] = {}
        for i, entry in enumerate(entries):
            chunk = self._chunk(entry, f"entries[{i}]")
            key = (chunk.resource_id, chunk.message_id, chunk.chunk)
            chunks.pop(key, None)
            chunks[key] = chunk
        if not chunks:
            return {}
        messages: dict[str, set[str]] = {}
        for chunk in chunks.values():
            messages.setdefault(chunk.resource_id, set()).add(chunk.message_id)
        written: dict[str, str] = {}  # uid → _id
        if self.service == "aoss":
            old_ids = self._find_ids(_messages_query(messages)) if replace else []
            self._bulk([({"index": {"_index": self.name}}, c.doc) for c in chunks.values()], written)
            self._bulk([({"delete": {"_index": self.name, "_id": i}}, None) for i in old_ids])
        else:
            new_ids = [c.doc["uid"] for c in chunks.values()]
            self._bulk(
                [({"index": {"_index": self.name, "_id": c.doc["uid"]}}, c.doc) for c in chunks.values()],
                written,
            )
            stale = _messages_query(messages)
            stale["bool"]["must_not"] = [{"ids": {"values": new_ids}}]
            self._delete_by_query(stale)
        logger.debug("indexed %d chunks of %d resources", len(chunks), len(messages))
        out: dict[str, list[str]] = {}
        for c in sorted(chunks.values(), key=lambda c: c.chunk):
            out.setdefault(c.message_id, []).append(written.get(c.doc["uid"], c.doc["uid"]))
        return out

    def delete_documents(self, resource_id: str, document_ids: Sequence[str]) -> None:
        """Remove these documents (``_id``s from ``upsert``) by id, in ``_bulk`` requests; ids already gone
        are ignored. Only documents of ``resource_id`` are named by the caller's index marks, which the
        store scopes to the resource.

        Raises:
            InvalidInput: ``resource_id`` is not a valid id, or ``document_ids`` is one string.
            Unavailable: OpenSearch failed.
        """
        check_id(resource_id, "resource_id")
        if isinstance(document_ids, str):
            raise InvalidInput("document_ids must be a list of ids, not one string", field="document_ids")
        ids = sorted({i for i in document_ids if isinstance(i, str) and i})
        self._bulk([({"delete": {"_index": self.name, "_id": i}}, None) for i in ids])

    def _chunk(self, entry: IndexEntry, path: str) -> _Chunk:
        e = check_entry(entry, path)
        resource_id, message_id, chunk = e.resource_id, e.message_id, e.chunk
        vector = self._vector(entry.vector, f"{path}.vector", allow_zero=True)
        uid = chunk_id(resource_id, message_id, chunk) if self.service != "aoss" else uuid.uuid4().hex
        doc: dict[str, Any] = {
            "uid": uid,
            "resource_id": resource_id,
            "thread_id": e.thread_id,
            "message_id": message_id,
            "chunk": chunk,
            "role": e.role,
            "seq": e.seq,
            "created_at": e.created_at.isoformat(),
            "text": keyword_text(e.text, e.created_at, e.context),
        }
        if any(vector):
            doc[VECTOR_FIELD] = vector
        doc.update(flatten(e.metadata))
        return _Chunk(resource_id, message_id, chunk, doc)

    def _vector(self, vector: object, path: str, *, allow_zero: bool = False) -> list[float]:
        if not isinstance(vector, list | tuple):
            raise InvalidInput(f"{path} must be a list of numbers", field=path)
        try:
            values = [float(x) for x in vector]
        except (TypeError, ValueError, OverflowError):
            raise InvalidInput(f"{path} must be a list of numbers", field=path) from None
        if len(values) != self.dimension:
            raise InvalidInput(
                f"{path} must have {self.dimension} numbers, not shape ({len(values)},)", field=path
            )
        if not all(math.isfinite(x) and abs(x) <= _FLOAT32_MAX for x in values):
            raise InvalidInput(f"{path} must contain only finite numbers (as float32)", field=path)
        if not allow_zero and not any(values):
            raise InvalidInput(f"{path} must not be all zeros (cosine similarity is undefined)", field=path)
        return values

    def delete_messages(self, resource_id: str, message_ids: Sequence[str]) -> None:
        """Remove every chunk of these messages of this resource (unknown ids are ignored).

        Raises:
            InvalidInput: ``resource_id`` is not a valid id, or ``message_ids`` is one string.
            Unavailable: OpenSearch failed.
        """
        check_id(resource_id, "resource_id")
        if isinstance(message_ids, str):
            raise InvalidInput("message_ids must be a list of ids, not one string", field="message_ids")
        ids = {m for m in message_ids if isinstance(m, str)}
        if ids:
            self._delete(_messages_query({resource_id: ids}))

    def delete_thread(self, resource_id: str, thread_id: str) -> None:
        """Remove every chunk of the thread, only if it belongs to ``resource_id``.

        Raises:
            InvalidInput: ``resource_id`` or ``thread_id`` is not a valid id.
            Unavailable: OpenSearch failed.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        self._delete(
            {"bool": {"filter": [{"term": {"resource_id": resource_id}}, {"term": {"thread_id": thread_id}}]}}
        )

    def delete_resource(self, resource_id: str) -> int:
        """Remove every chunk of the resource.

        ``es``/``none``: one ``_delete_by_query`` (``conflicts=proceed``), whose ``deleted`` is the count.
        ``aoss`` has no ``_delete_by_query``: the chunks' ids are paged with a search and deleted with
        ``_bulk``, in rounds until a search finds none, or finds only ids already gone (Serverless shows
        deletes after a delay; their ``delete`` answers 404 and is not counted), so chunks indexed while
        the erasure runs go too.

        Returns:
            How many chunks were removed (0 on a second call).

        Raises:
            InvalidInput: ``resource_id`` is not a valid id.
            Unavailable: OpenSearch failed.
        """
        check_id(resource_id, "resource_id")
        query = {"bool": {"filter": [{"term": {"resource_id": resource_id}}]}}
        if self.service != "aoss":
            return self._delete_by_query(query)
        removed = 0
        while ids := self._find_ids(query):
            deleted = self._bulk([({"delete": {"_index": self.name, "_id": i}}, None) for i in ids])
            removed += deleted
            if not deleted:
                break
        logger.debug("removed %d chunks of a resource", removed)
        return removed

    def _delete(self, query: dict[str, Any]) -> None:
        if self.service == "aoss":
            ids = self._find_ids(query)
            self._bulk([({"delete": {"_index": self.name, "_id": i}}, None) for i in ids])
        else:
            self._delete_by_query(query)

    def _delete_by_query(self, query: dict[str, Any]) -> int:
        """One ``_delete_by_query``; returns how many documents it deleted."""
        params: dict[str, Any] = {"conflicts": "proceed"}
        if self._refresh:
            params["refresh"] = "true"
        response = call(
            "delete by query",
            lambda: self._client.delete_by_query(
                index=self.name, body={"query": query}, params=params, request_timeout=self._write_timeout
            ),
            index=self.name,
            timeout=self._write_timeout,
        )
        failures = response.get("failures") or []
        if failures:
            error_type, reason = describe(failures[0], limit=REASON_LIMIT)
            raise Unavailable(
                f"OpenSearch failed to delete {len(failures)} chunks from index {self.name} (delete by query; "
                f"first error: {error_type}: {reason})"
            )
        return int(response.get("deleted") or 0)

    def _find_ids(self, query: dict[str, Any]) -> list[str]:
        """The ``_id`` of every chunk matching ``query``, paged with ``search_after`` on ``uid``."""
        ids: list[str] = []
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "size": ID_PAGE_SIZE,
                "_source": False,
                "query": query,
                "sort": [{"uid": "asc"}],
            }
            if after is not None:
                body["search_after"] = after
            response = call(
                "id lookup",
                lambda b=body: self._client.search(  # type: ignore[misc]
                    index=self.name, body=b, request_timeout=self._search_timeout
                ),
                index=self.name,
                timeout=self._search_timeout,
            )
            _check_shards(response, "id lookup")
            hits = response.get("hits", {}).get("hits", [])
            ids.extend(h["_id"] for h in hits)
            if len(hits) < ID_PAGE_SIZE:
                return ids
            after = hits[-1]["sort"]

    def _bulk(
        self,
        actions: list[tuple[dict[str, Any], dict[str, Any] | None]],
        written: dict[str, str] | None = None,
    ) -> int:
        """``_bulk`` in requests of ``BULK_ACTIONS_PER_REQUEST``; returns how many actions took effect.
        ``written`` collects each indexed document's ``uid`` → ``_id``."""
        return sum(
            self._bulk_batch(actions[start : start + BULK_ACTIONS_PER_REQUEST], written)
            for start in range(0, len(actions), BULK_ACTIONS_PER_REQUEST)
        )

    def _bulk_batch(
        self,
        actions: list[tuple[dict[str, Any], dict[str, Any] | None]],
        written: dict[str, str] | None = None,
    ) -> int:
        """One ``_bulk`` request; items refused with 429/5xx are retried, other item errors are fatal.

        Returns:
            How many actions took effect (status < 300; a ``delete`` of a missing id, 404, did not).

        Raises:
            Unavailable: naming how many of the actions failed (and the first error's type).
        """
        if not actions:
            return 0
        total = len(actions)
        pending = actions
        done = 0
        params = {"refresh": "wait_for"} if self._refresh else {}
        for attempt in range(len(self._retry_delays) + 1):
            body: list[dict[str, Any]] = []
            for action, doc in pending:
                body.append(action)
                if doc is not None:
                    body.append(doc)
            response = call(
                "bulk write",
                lambda b=body: self._client.bulk(  # type: ignore[misc]
                    body=b, params=params, request_timeout=self._write_timeout
                ),
                index=self.name,
                timeout=self._write_timeout,
            )
            retry: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
            fatal: list[dict[str, Any]] = []
            for sent, item in zip(pending, response.get("items", []), strict=False):
                op, result = next(iter(item.items()))
                status = int(result.get("status", 500))
                if status < 300:
                    done += 1
                    if written is not None and sent[1] is not None and result.get("_id"):
                        written[sent[1]["uid"]] = str(result["_id"])
                    continue
                if op == "delete" and status == 404:
                    continue
                if status == 429 or status >= 500:
                    retry.append(sent)
                else:
                    fatal.append(result)
            if fatal:
                error_type, reason = describe(fatal[0], limit=REASON_LIMIT)
                raise Unavailable(
                    f"{len(fatal) + len(retry)} of {total} OpenSearch bulk actions on index {self.name} failed "
                    f"({error_type}: {reason}){_hint(reason)}"
                )
            if not retry:
                return done
            if attempt == len(self._retry_delays):
                raise Unavailable(
                    f"{len(retry)} of {total} OpenSearch bulk actions on index {self.name} failed (throttled or "
                    f"server errors, retried {attempt} times)"
                )
            logger.warning("retrying %d of %d bulk actions refused by OpenSearch", len(retry), total)
            time.sleep(self._retry_delays[attempt])
            pending = retry
        return done  # not reached: the last attempt returns or raises

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
        """Search the resource (or one of its threads) by vector, by keywords, or both in one round trip.

        Args:
            resource_id: the owner searched; nothing of another resource is ever returned.
            top_k: how many distinct messages each list holds at most, ``1..MAX_TOP_K``.
            vector: the query embedding (``dimension`` finite floats, not all zero), or ``None``.
            text: free text for the keyword search, or ``None``. Text without word tokens gives ``[]``.
            thread_id: restrict both searches to this thread of the resource.
            filter: a metadata filter (``memstack.filters``), applied inside both searches.

        Returns:
            ``SearchResults``: each list best first, one hit per message scored by its best chunk (cosine
            similarity in [-1, 1]; positive BM25), ties broken by message id; ``None`` when not asked.

        Raises:
            InvalidInput: a bad ``resource_id``/``thread_id``, ``top_k``, ``vector``, ``filter`` or ``text``;
                or OpenSearch rejected the query (400).
            Unavailable: OpenSearch failed (connection, timeout, 429, 5xx, shard failures).
        """
        check_id(resource_id, "resource_id")
        if thread_id is not None:
            check_id(thread_id, "thread_id")
        check_top_k(top_k)
        checked = validate_filter(filter) or None
        query = None if vector is None else self._vector(vector, "vector")
        if text is not None and not isinstance(text, str):
            raise InvalidInput("text must be a string", field="text")
        terms = None if text is None else query_terms(text)

        scope = scope_filter(resource_id, thread_id, checked)
        size = min(MAX_TOP_K, 2 * top_k + 8)
        bodies: dict[str, dict[str, Any]] = {}
        if query is not None:
            bodies["vector"] = vector_body(query, size, scope)
        if terms:
            bodies["keyword"] = keyword_body(terms, size, scope)
        responses = self._run(bodies)

        results: dict[str, list[IndexHit]] = {}
        for name, response in responses.items():
            while True:
                hits, fetched = _hits(response, vector=name == "vector")
                body_size = int(bodies[name]["size"])
                if len(hits) >= top_k or fetched < body_size or body_size >= MAX_TOP_K:
                    break
                bodies[name] = _resized(bodies[name], min(MAX_TOP_K, body_size * 4))
                response = self._run({name: bodies[name]})[name]
            results[name] = hits[:top_k]
        return SearchResults(
            vector=None if query is None else results.get("vector", []),
            keyword=None if text is None else results.get("keyword", []),
        )

    def _search_budget(self) -> float:
        """The ``request_timeout`` of a search, in seconds: ``search_timeout``, cut to the time the turn has
        left when it runs under a deadline (``memstack.deadline``, set by ``context()``), so a slow cluster
        costs the turn its recall, not its answer.

        Raises:
            Unavailable: the turn's deadline has already passed (the request is not sent).
        """
        left = deadline.remaining()
        if left is None:
            return self._search_timeout
        if left <= 0.0:
            raise Unavailable(f"the turn's deadline passed before the search on index {self.name} (not sent)")
        return min(self._search_timeout, left)

    def _run(self, bodies: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """One ``_search`` for one body, one ``_msearch`` for several; each answer checked."""
        if not bodies:
            return {}
        timeout = self._search_budget()
        if len(bodies) == 1:
            ((name, body),) = bodies.items()
            response = call(
                "search",
                lambda: self._client.search(index=self.name, body=body, request_timeout=timeout),
                index=self.name,
                timeout=timeout,
            )
            _check_shards(response, "search")
            return {name: response}
        lines: list[dict[str, Any]] = []
        for body in bodies.values():
            lines.extend(({"index": self.name}, body))
        answer = call(
            "search",
            lambda: self._client.msearch(body=lines, request_timeout=timeout),
            index=self.name,
            timeout=timeout,
        )
        responses = answer.get("responses", [])
        if len(responses) != len(bodies):
            raise Unavailable("OpenSearch answered a multi-search with the wrong number of responses")
        out: dict[str, dict[str, Any]] = {}
        for name, response in zip(bodies, responses, strict=True):
            if "error" in response:
                status = int(response.get("status", 500))
                error_type, reason = describe(response)
                if status == 400:
                    raise InvalidInput(
                        f"OpenSearch rejected the search request on index {self.name} (400 {error_type}: {reason})"
                    )
                raise Unavailable(
                    f"OpenSearch failed during search on index {self.name} ({status} {error_type})"
                )
            _check_shards(response, "search")
            out[name] = response
        return out

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()


# ---------------------------------------------------------------------------------------------- helpers


def chunk_id(resource_id: str, message_id: str, chunk: int) -> str:
    """The deterministic ``_id`` of a chunk (``es``/``none``): 32 hex digits of BLAKE2b over the three
    parts, NUL-separated (ids never contain NUL), so any id length stays under OpenSearch's 512 bytes."""
    key = f"{resource_id}\x00{message_id}\x00{chunk}".encode()
    return hashlib.blake2b(key, digest_size=16).hexdigest()


def _messages_query(messages: dict[str, set[str]]) -> dict[str, Any]:
    """Every chunk of these messages, per resource: ``{resource_id: {message_id, …}}``."""
    per_resource = [
        {"bool": {"filter": [{"term": {"resource_id": r}}, {"terms": {"message_id": sorted(ids)}}]}}
        for r, ids in sorted(messages.items())
    ]
    if len(per_resource) == 1:
        return per_resource[0]
    return {"bool": {"filter": [{"bool": {"should": per_resource, "minimum_should_match": 1}}]}}


def _hits(response: dict[str, Any], *, vector: bool) -> tuple[list[IndexHit], int]:
    """One hit per message (its best chunk), best first, ties by message id; and the raw hit count."""
    raw = response.get("hits", {}).get("hits", [])
    best: dict[str, IndexHit] = {}
    for hit in raw:
        source = hit.get("_source") or {}
        message_id = source.get("message_id")
        if not isinstance(message_id, str):
            continue
        score = float(hit.get("_score") or 0.0)
        if vector:
            score = max(-1.0, min(1.0, 2.0 * score - 1.0))
        current = best.get(message_id)
        if current is None or score > current.score:
            best[message_id] = IndexHit(
                message_id=message_id,
                thread_id=str(source.get("thread_id", "")),
                score=score,
                seq=int(source.get("seq", 0)),
            )
    ranked = sorted(best.values(), key=lambda h: (-h.score, h.message_id))
    return ranked, len(raw)


def _resized(body: dict[str, Any], size: int) -> dict[str, Any]:
    resized = {**body, "size": size}
    knn = body["query"].get("knn")
    if knn is not None:
        ((field, clause),) = knn.items()
        resized["query"] = {"knn": {field: {**clause, "k": size}}}
    return resized


def _check_shards(response: dict[str, Any], action: str) -> None:
    shards = response.get("_shards") or {}
    if shards.get("failed") or response.get("timed_out"):
        raise Unavailable(
            f"OpenSearch answered the {action} from only part of the index "
            f"({shards.get('failed', 0)} shards failed)"
        )


def _hint(reason: str) -> str:
    """A configuration hint for item errors that mean the wrong ``service`` was chosen."""
    if "Document ID is not supported" in reason:
        return "; the endpoint looks like an OpenSearch Serverless collection: use service 'aoss'"
    return ""


def _check_timeout(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise InvalidInput(f"{name} must be a positive number of seconds", field=name)
    return float(value)
