"""Threshold, buffering and activation arithmetic of observational memory (spec §2.9.1, §2.9.4).

Pure functions over token counts and buffered chunks; the engine (``engine.py``) reads the record and the
unobserved messages, asks these functions what is due, and writes the outcome.

Vocabulary (all counts are tokens, ``memstack.observation.transcript.count_message_tokens``):

* ``pending``: tokens of the thread's messages after the cursor (observed by buffered chunks or not);
* ``threshold``: ``observation.message_tokens`` — at or above it the Observer's work becomes active;
* ``block_after``: above it context assembly observes synchronously instead of waiting for the
  background (spec §2.9.1 ``blockAfter``; DESIGN.md "the agent never waits on the Observer" otherwise);
* ``floor``: the retention floor, tokens left unobserved after activation (``message_tokens × (1 −
  buffer_activation)``, 6,000 at the defaults).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memstack.config import ObservationalMemoryOptions
from memstack.model import BufferedChunk

__all__ = ["Thresholds", "activation_count", "resolve", "should_buffer"]


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The resolved token points of one configuration.

    Attributes:
        message_tokens: observe (activate) when pending reaches this.
        buffer_tokens: the async buffering interval; 0 when buffering is off (resource scope or
            ``buffer_tokens: false``).
        floor: tokens left unobserved after activation.
        block_after: above this, observation runs synchronously in context assembly.
        observation_tokens: reflect when the observations reach this.
        reflection_buffer_at: start a background (buffered) reflection at this many observation tokens;
            0 when buffering is off.
        reflection_block_after: above this, context assembly reflects synchronously if no buffered
            reflection is ready.
    """

    message_tokens: int
    buffer_tokens: int
    floor: int
    block_after: int
    observation_tokens: int
    reflection_buffer_at: int
    reflection_block_after: int


def resolve(options: ObservationalMemoryOptions, *, observation_tokens_now: int = 0) -> Thresholds:
    """The token points of ``options`` (spec §2.9.1; ``thresholds.ts`` in Mastra).

    With ``share_token_budget`` the message threshold grows into the unused observation budget:
    ``max(message_tokens + observation_tokens − observation_tokens_now, message_tokens)`` (spec
    ``calculateDynamicThreshold``), so ``observation_tokens_now`` is the record's current count.
    """
    obs, ref = options.observation, options.reflection
    message_tokens = obs.message_tokens
    if options.share_token_budget:
        total = obs.message_tokens + ref.observation_tokens
        message_tokens = max(total - observation_tokens_now, obs.message_tokens)
    buffering = options.buffering
    return Thresholds(
        message_tokens=message_tokens,
        buffer_tokens=obs.resolved_buffer_tokens if buffering else 0,
        floor=min(obs.retention_floor, message_tokens),
        block_after=max(obs.resolved_block_after, message_tokens),
        observation_tokens=ref.observation_tokens,
        reflection_buffer_at=round(ref.observation_tokens * ref.buffer_activation) if buffering else 0,
        reflection_block_after=ref.resolved_block_after,
    )


def should_buffer(pending: int, last_boundary: int, t: Thresholds) -> bool:
    """Whether a background Observer run is due (spec §2.9.4 step 3, ``shouldBuffer``).

    Due when buffering is on, ``pending`` is still under the threshold, and ``pending`` crossed an
    interval boundary since the last buffering: ``pending // eff > last_boundary // eff``, where ``eff``
    is ``buffer_tokens``, halved once ``pending ≥ threshold − 1.1 × buffer_tokens`` (buffer more often
    close to the threshold, so activation finds chunks ready).
    """
    if t.buffer_tokens <= 0 or pending >= t.message_tokens or pending <= 0:
        return False
    eff = t.buffer_tokens
    if pending >= t.message_tokens - 1.1 * t.buffer_tokens:
        eff = max(1, eff // 2)
    return pending // eff > max(0, last_boundary) // eff


def activation_count(
    chunks: Sequence[BufferedChunk], pending: int, t: Thresholds, *, force_max: bool = False
) -> int:
    """How many leading buffered chunks to activate (spec §2.9.4 step 6, ``swapBufferedToActive``).

    Activation always takes a *prefix* (the buffered list continues right after the cursor). The goal
    is to leave about ``floor`` tokens unobserved: ``target = pending − floor``.

    * Take the shortest prefix whose message tokens reach ``target``, unless it overshoots by more than
      ``0.95 × floor`` or leaves fewer than ``min(1000, floor)`` tokens; then take the longest prefix
      that stays under ``target``.
    * ``force_max`` (pending above ``block_after``) prefers the prefix that reaches the target, and
      takes every chunk when none does.

    Args:
        chunks: the record's buffered chunks of one thread, in ``seq`` order.
        pending: tokens after the cursor.

    Returns:
        0..len(chunks).
    """
    if not chunks:
        return 0
    target = pending - t.floor
    if target <= 0:
        return 0
    total = 0
    under = 0
    for i, chunk in enumerate(chunks, start=1):
        total += chunk.message_tokens
        if total < target:
            under = i
            continue
        if force_max:
            return i
        overshoot = total - target
        left = pending - total
        if overshoot <= 0.95 * t.floor and left >= min(1000, t.floor):
            return i
        return under
    return len(chunks) if force_max else under
