"""What the model sees of observational memory (spec §2.11 item 3, §2.9.6, §2.9.7, §3.4).

* System messages, in order: the observation instructions (plus the recall instructions when retrieval
  is on), ``<observations>``, one message per observed piece of the log (split on message boundaries, so
  earlier pieces stay byte-identical between turns and cache well), ``</observations>`` (Mastra never
  closes the tag — spec §7 item 7; we do), then ``<current-task>`` and ``<suggested-response>``.
* The continuation reminder: a user message first in the conversation when observations exist, never
  stored or observed.
* A temporal-gap marker before the new message when it comes ≥ 10 minutes after the previous one
  (``temporal_markers``); shown to the model, not stored (the Observer's transcript shows its own gaps).
"""

from __future__ import annotations

from datetime import UTC, datetime

from memstack.config import ObservationalMemoryOptions
from memstack.model import Message, ObservationRecord, TextPart
from memstack.observation.engine import split_log
from memstack.observation.temporal import temporal_marker

__all__ = [
    "CONTINUATION_ID",
    "continuation_message",
    "is_continuation",
    "observation_context",
    "temporal_marker_message",
]

CONTINUATION_ID = "om-continuation"
"""Id of the continuation reminder message (spec §2.9.6)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def observation_context(
    om: ObservationalMemoryOptions, record: ObservationRecord | None, now: datetime
) -> list[str]:
    """The observational-memory system messages for a turn (texts, in order); ``[]`` when there are no
    observations yet — except the recall instructions in resource scope with retrieval on, which are
    shown from the start (spec §2.9.8)."""
    from memstack.observation import prompts
    from memstack.observation.parsing import add_relative_time, optimize_for_context

    retrieval = (
        prompts.retrieval_instructions(om.retrieval.scope, om.retrieval.instructions)
        if om.retrieval.enabled
        else ""
    )
    if record is None or not record.active_observations.strip():
        return [retrieval] if retrieval and om.scope == "resource" else []
    head = f"{prompts.CONTEXT_PROMPT}\n\n{prompts.CONTEXT_INSTRUCTIONS}"
    if retrieval:
        head = f"{head}\n\n{retrieval}"
    pieces = [add_relative_time(optimize_for_context(p), now) for p in split_log(record.active_observations)]
    out = [head, "<observations>", *(p for p in pieces if p.strip()), "</observations>"]
    if record.current_task:
        out.append(f"<current-task>\n{record.current_task}\n</current-task>")
    if record.suggested_response:
        out.append(f"<suggested-response>\n{record.suggested_response}\n</suggested-response>")
    return out


def continuation_message(thread_id: str, resource_id: str) -> Message:
    """The ``om-continuation`` reminder (spec §2.9.6): a user message dated at the epoch, so it sorts
    first; never persisted."""
    from memstack.observation import prompts

    return Message(
        id=CONTINUATION_ID,
        thread_id=thread_id,
        resource_id=resource_id,
        role="user",
        parts=(TextPart(text=f"<system-reminder>{prompts.CONTINUATION_HINT}</system-reminder>"),),
        created_at=_EPOCH,
    )


def is_continuation(message: Message) -> bool:
    """Whether ``message`` is the continuation reminder (its id, or its exact text under another id)."""
    from memstack.observation import prompts

    if message.id == CONTINUATION_ID:
        return True
    return message.role == "user" and message.text.strip() == (
        f"<system-reminder>{prompts.CONTINUATION_HINT}</system-reminder>"
    )


def temporal_marker_message(previous: Message | None, new: Message | None) -> Message | None:
    """A ``<system-reminder>`` user message saying how much time passed before ``new`` (spec §2.9.7),
    or ``None`` under 10 minutes."""
    if new is None:
        return None
    text = temporal_marker(previous, new)
    if text is None:
        return None
    return Message(
        id=f"om-gap-{new.id}"[:256],
        thread_id=new.thread_id,
        resource_id=new.resource_id,
        role="user",
        parts=(TextPart(text=f"<system-reminder>{text}</system-reminder>"),),
        created_at=new.created_at,
    )
