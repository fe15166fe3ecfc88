"""What one observation record may hold: the rule every write of the record passes (``fit``).

The record is stored as one item of at most ``MAX_OBSERVATION_RECORD_BYTES`` (360 KiB as JSON, under
DynamoDB's 400 KB item limit), and its log is shown on every turn. Every path that writes it —
activation of buffered chunks, a buffered chunk, a synchronous observation, a reflection, a recorded
failure, a usage-only write, the lifecycle rewrites — goes through ``ObservationEngine.write``, which
applies ``fit`` first, so no path can grow the record past either bound:

1. **The log's bound while reflection fails.** When the record's last failure is the Reflector's (the
   log cannot be shrunk by a model now) and the log is past its hard point — over the reflection's
   ``block_after`` tokens, or over ``TRUNCATE_AT_BYTES`` — the log is cut back to that point
   (``cut_log``) in the same write, whichever path grew it. Not further: a log left over
   ``reflection.observation_tokens`` keeps reflection due, so the Reflector is tried again when its
   backoff ends. A healthy Reflector gets the whole log: past the threshold a reflection is due, and
   ``context()`` reflects synchronously over ``block_after``.
2. **The byte cap.** A record that would still be over ``MAX_OBSERVATION_RECORD_BYTES`` sheds what costs
   least first: the buffered reflection (a head start that the next reflection redoes), then the log
   (cut to ever smaller budgets, 🔴 lines first, then the newest lines), then the text of the buffered
   chunks, oldest chunk first (their messages stay covered). The write commits; it never fails with
   ``PayloadTooLarge`` for the size of what the Observer or Reflector wrote.

Cutting is deterministic (no model call) and counted again (``observation_tokens``, a chunk's
``token_count``). The failure that made rule 1 apply stays recorded, so the sweep reflects properly later.
"""

from __future__ import annotations

import logging

from memstack.model import MAX_OBSERVATION_RECORD_BYTES, BufferedChunk, ObservationRecord
from memstack.ports import Tokenizer

__all__ = ["MIN_CUT_TOKENS", "TRUNCATE_AT_BYTES", "TRUNCATE_TO_SHARE", "cut_log", "fit", "record_bytes"]

logger = logging.getLogger(__name__)

TRUNCATE_AT_BYTES = MAX_OBSERVATION_RECORD_BYTES // 2
"""The log's byte bound (UTF-8): a log past it while reflection fails is cut, and one Observer answer is
cut to fit under it, so the record keeps half its room for buffered chunks, hints and the cursor."""

TRUNCATE_TO_SHARE = 0.5
"""A cut log (and a cut Observer answer) keeps at most this share of the reflection threshold, leaving
room for the observations that follow before reflection is tried again."""

MIN_CUT_TOKENS = 100
"""The smallest token budget a cut starts from (a tiny reflection threshold still keeps a few lines)."""


def record_bytes(rec: ObservationRecord) -> int:
    """The record's size as stores measure it: ``content_json()`` in UTF-8 bytes."""
    return len(rec.content_json().encode("utf-8"))


def cut_log(text: str, budget: int, tokenizer: Tokenizer) -> str:
    """``text`` cut to ``budget`` tokens and under ``TRUNCATE_AT_BYTES``: 🔴 lines first (up to half the
    budget, newest first, with their ``Date:`` headers), then the newest lines
    (``parsing.truncate_observations``). The budget halves until the bytes fit too (emoji and non-Latin
    text carry more bytes per token). ``budget`` 0 gives ``""``."""
    from memstack.observation.parsing import truncate_observations

    budget = max(0, budget)
    cut, _ = truncate_observations(text, budget, tokenizer)
    while len(cut.encode("utf-8")) > TRUNCATE_AT_BYTES and budget > 0:
        budget //= 2
        cut, _ = truncate_observations(text, budget, tokenizer)
    return cut


def fit(
    rec: ObservationRecord,
    *,
    tokenizer: Tokenizer,
    cut_budget: int,
    hard_point: int | None,
    reflection_failing: bool,
) -> ObservationRecord:
    """``rec`` as it may be written: within the log's bound and the byte cap (module docstring).

    Args:
        rec: the record a write is about to store.
        tokenizer: counts what is cut.
        cut_budget: tokens a log cut for the byte cap starts from (``TRUNCATE_TO_SHARE`` of the
            reflection threshold, at least ``MIN_CUT_TOKENS``), halved until the record fits.
        hard_point: the reflection's ``block_after`` in tokens: rule 1 cuts the log to it; ``None`` when
            the options are unknown (a rewrite that only removes content), when only its byte bound holds.
        reflection_failing: the record's last failure is the Reflector's.

    Returns:
        ``rec`` itself when it fits, otherwise a copy with the log (and, only when the rest of the record
        cannot fit otherwise, the buffered reflection and chunk texts) cut. A record still over the cap
        once all of that is empty (a cursor of thousands of threads) is returned as it is, for the store
        to refuse.
    """
    log = rec.active_observations
    bound = rec.observation_tokens if hard_point is None else min(hard_point, rec.observation_tokens)
    if reflection_failing and (
        rec.observation_tokens > bound or len(log.encode("utf-8")) > TRUNCATE_AT_BYTES
    ):
        # cut to the hard point, not below: the log stays over the reflection threshold, so the Reflector
        # is tried again when its backoff ends, and no more is lost than the bound asks
        rec = _with_log(rec, cut_log(log, bound, tokenizer), tokenizer)
        logger.warning(
            "reflection failing and the log past its hard point; the log was cut in this write",
            extra={
                "resource_id": rec.resource_id,
                "thread_id": rec.thread_id,
                "tokens_before": tokenizer.count(log),
                "tokens_after": rec.observation_tokens,
            },
        )
    if record_bytes(rec) <= MAX_OBSERVATION_RECORD_BYTES:
        return rec
    return _shed(rec, tokenizer=tokenizer, cut_budget=cut_budget)


def _shed(rec: ObservationRecord, *, tokenizer: Tokenizer, cut_budget: int) -> ObservationRecord:
    """Rule 2: the buffered reflection, then the log, then chunk texts (oldest first) until it fits."""
    size_before, tokens_before = record_bytes(rec), rec.observation_tokens
    if rec.buffered_reflection is not None:
        rec = rec.model_copy(
            update={"buffered_reflection": None, "buffered_reflection_tokens": 0, "reflected_line_count": 0}
        )
    budget = max(MIN_CUT_TOKENS, cut_budget)
    while record_bytes(rec) > MAX_OBSERVATION_RECORD_BYTES and rec.active_observations:
        rec = _with_log(rec, cut_log(rec.active_observations, budget, tokenizer), tokenizer)
        budget //= 2
    original = rec.buffered_chunks
    chunks = list(original)
    for i in range(len(chunks)):
        budget = max(MIN_CUT_TOKENS, cut_budget)
        while record_bytes(rec) > MAX_OBSERVATION_RECORD_BYTES and chunks[i].observations:
            chunks[i] = _with_text(chunks[i], cut_log(chunks[i].observations, budget, tokenizer), tokenizer)
            budget //= 2
            rec = rec.model_copy(update={"buffered_chunks": tuple(chunks)})
    logger.warning(
        "observation record at its byte cap; cut to commit",
        extra={
            "resource_id": rec.resource_id,
            "thread_id": rec.thread_id,
            "bytes_before": size_before,
            "bytes_after": record_bytes(rec),
            "tokens_before": tokens_before,
            "tokens_after": rec.observation_tokens,
            "chunks_cut": sum(1 for old, new in zip(original, chunks, strict=True) if old is not new),
        },
    )
    return rec


def _with_log(rec: ObservationRecord, text: str, tokenizer: Tokenizer) -> ObservationRecord:
    return rec.model_copy(update={"active_observations": text, "observation_tokens": tokenizer.count(text)})


def _with_text(chunk: BufferedChunk, text: str, tokenizer: Tokenizer) -> BufferedChunk:
    return chunk.model_copy(update={"observations": text, "token_count": tokenizer.count(text)})
