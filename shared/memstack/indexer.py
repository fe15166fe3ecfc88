"""The stream indexer: message changes from the store's change stream → the search index.

On AWS the ``indexer`` function receives batches of DynamoDB stream records of the messages table and
calls :func:`handle_stream_event`; a save never waits on embedding (DESIGN.md "A turn on AWS").

* Saved messages are indexed with ``Memory.index_saved``: batched per thread (one embedding request for
  the thread's messages in the batch), exactly once per content (index marks), so replays are free.
  ``index_saved`` reads the messages from the store, so a record older than the message's current state
  (a later edit, a delete) indexes the current state or nothing.
* Removed messages (deletes, TTL expiry) are removed from the index, before the saves of the same batch, so
  a message deleted and saved again within one batch ends up indexed. The message now following each is
  indexed again (its keyword text held the removed one's, ADR 0015): a TTL expiry has no ``delete_messages``
  call to do it.
* After a thread's saved messages are indexed, background observation is scheduled for it
  (``Memory.schedule_observation``) when observational memory or title generation is on — also when
  semantic recall is off and nothing was indexed. The engine decides whether anything is due and submits
  an ``ObservationJob`` (a Step Functions execution on AWS) whose key is idempotent, so a replayed batch
  starts nothing twice.
* Failures are reported per record (``batchItemFailures``): the records of a thread whose indexing or
  scheduling failed, and nothing else; Lambda retries from the earliest failed record, and the function's on-failure
  destination (a dead-letter queue) keeps records that keep failing. One bad record never blocks the
  others, and none is dropped silently. A deterministic refusal (``InvalidInput``/``PayloadTooLarge`` from
  the embedder or index) is logged with its thread and count and not retried, since no retry can succeed.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memstack.errors import InvalidInput, PayloadTooLarge
from memstack.observability import INDEXED, add_metric

if TYPE_CHECKING:
    from memstack.adapters.dynamodb.stream import MessageChange
    from memstack.memory import Memory

logger = logging.getLogger(__name__)

_CHUNK = 500
"""Messages per ``index_saved``/``index_removed`` call (a stream batch holds up to 10,000 records; the
calls accept ``MAX_BATCH``)."""


def handle_stream_event(memory: Memory, event: Mapping[str, Any]) -> dict[str, list[dict[str, str]]]:
    """Process one Lambda DynamoDB-stream event.

    Args:
        memory: the ``Memory`` over the store the stream comes from and the index to keep in step.
        event: ``{"Records": [...]}`` as Lambda delivers it.

    Returns:
        ``{"batchItemFailures": [{"itemIdentifier": <sequence number>}, ...]}`` — the partial-batch
        response of a function whose event source mapping reports batch item failures.
    """
    from memstack.adapters.dynamodb.stream import message_change

    records: Sequence[Mapping[str, Any]] = event.get("Records") or []
    changes = [change for record in records if (change := message_change(record)) is not None]
    failed: list[str] = []

    removed: dict[str, list[MessageChange]] = defaultdict(list)
    for c in changes:
        if c.kind == "removed":
            removed[c.resource_id].append(c)
    for resource_id, group in removed.items():
        _remove(memory, resource_id, group, failed)

    saved: dict[tuple[str, str], list[MessageChange]] = defaultdict(list)
    for c in changes:
        if c.kind == "saved":
            saved[(c.resource_id, c.thread_id)].append(c)
    written = 0
    scheduled = 0
    from memstack.observation.requirements import needs_chat_model  # the options' models: built on use

    observe = needs_chat_model(memory.options)
    for (resource_id, thread_id), group in saved.items():
        count, indexed = _index(memory, resource_id, thread_id, group, failed)
        written += count
        if observe and indexed:  # a failed group is retried by Lambda, and schedules then
            scheduled += _schedule(memory, resource_id, thread_id, group, failed)
    logger.info(
        "stream batch indexed",
        extra={
            "records": len(records),
            "messages_saved": sum(len(g) for g in saved.values()),
            "messages_removed": sum(len(g) for g in removed.values()),
            "chunks_written": written,
            "observations_scheduled": scheduled,
            "failed": len(failed),
        },
    )
    add_metric(INDEXED, written)
    return {"batchItemFailures": [{"itemIdentifier": s} for s in failed]}


def _remove(memory: Memory, resource_id: str, group: list[MessageChange], failed: list[str]) -> None:
    """Remove the messages of ``group`` from the index, ``_CHUNK`` at a time; the records of a chunk that
    failed are added to ``failed``."""
    for start in range(0, len(group), _CHUNK):
        part = group[start : start + _CHUNK]
        try:
            memory.index_removed(
                resource_id=resource_id,
                message_ids=[c.message_id for c in part],
                positions=[(c.thread_id, c.seq) for c in part],
            )
        except Exception as exc:
            failed += [c.sequence_number for c in part]
            _log_failure("remove", exc, resource_id, None, len(part))


def _index(
    memory: Memory, resource_id: str, thread_id: str, group: list[MessageChange], failed: list[str]
) -> tuple[int, bool]:
    """Index the saved messages of one thread, ``_CHUNK`` at a time.

    Returns:
        The chunks written and whether every chunk of messages was indexed; the records of a chunk that
        failed are added to ``failed``.
    """
    ids = list(dict.fromkeys(c.message_id for c in group))
    written = 0
    indexed = True
    for start in range(0, len(ids), _CHUNK):
        batch = set(ids[start : start + _CHUNK])
        try:
            written += memory.index_saved(
                resource_id=resource_id, thread_id=thread_id, message_ids=sorted(batch)
            )
        except (InvalidInput, PayloadTooLarge) as exc:
            # A deterministic refusal (the embedder or index refuses this text): retrying the records cannot
            # help, so they are not reported for retry; the log names the thread and the count.
            _log_failure("index (refused, not retried)", exc, resource_id, thread_id, len(batch))
        except Exception as exc:
            indexed = False
            failed += [c.sequence_number for c in group if c.message_id in batch]
            _log_failure("index", exc, resource_id, thread_id, len(batch))
    return written, indexed


def _schedule(
    memory: Memory, resource_id: str, thread_id: str, group: list[MessageChange], failed: list[str]
) -> int:
    """Schedule background observation of the thread: 1 if a job was submitted, else 0. When scheduling
    fails, the group's records not yet in ``failed`` are added to it (Lambda retries them)."""
    try:
        return (
            1 if memory.schedule_observation(resource_id=resource_id, thread_id=thread_id) is not None else 0
        )
    except Exception as exc:
        reported = set(failed)
        failed += [c.sequence_number for c in group if c.sequence_number not in reported]
        _log_failure("schedule observation", exc, resource_id, thread_id, len(group))
        return 0


def _log_failure(what: str, exc: Exception, resource_id: str, thread_id: str | None, count: int) -> None:
    logger.warning(
        "stream %s failed (%s) for %d record(s)",
        what,
        type(exc).__name__,
        count,
        extra={"resource_id": resource_id, "thread_id": thread_id, "error": type(exc).__name__},
    )
