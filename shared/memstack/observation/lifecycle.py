"""What deleting or cloning a thread does to an observation record (pure functions; the layer writes).

Deleting a thread from a resource-scoped log (docs/adr/0004-layers-as-processors.md):

* its ``<thread id="…">`` sections go from the log, its buffered chunks and cursor entry from the record;
* a buffered (not yet active) reflection is dropped — it may hold the thread's content, and it is only a
  head start on the next reflection;
* a reflection in the active log that merged the thread (``reflected_threads``) cannot be split by
  thread, so the log is dropped whole and every cursor reset: the remaining threads are observed again
  from their first message when they are next observed, and the deleted thread's words are gone.

Cloning a thread copies its thread-scoped record with the message ids and ``seq`` values of the copies.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from memstack.model import ObservationRecord
from memstack.observation.log_format import BOUNDARY_LINE
from memstack.observation.recall_tool import split_range
from memstack.ports import Tokenizer

_ID_IN_RANGE = re.compile(r'(\brange=")([^"\n]*)(")')


def without_thread(
    rec: ObservationRecord, thread_id: str, labels: Sequence[str], tokenizer: Tokenizer
) -> ObservationRecord:
    """A resource-scoped ``rec`` with nothing left of ``thread_id`` (shown in the log under any of
    ``labels``).

    Returns:
        The new record (same ``version``: the caller writes it with compare-and-set).
    """
    if thread_id in rec.reflected_threads:
        return rec.model_copy(update=_reset(rec))
    text = rec.active_observations
    for label in labels:
        text = _drop_sections(text, label)
    return rec.model_copy(
        update={
            "active_observations": text,
            "observation_tokens": tokenizer.count(text)
            if text != rec.active_observations
            else rec.observation_tokens,
            "cursor": {t: seq for t, seq in rec.cursor.items() if t != thread_id},
            "buffered_chunks": tuple(c for c in rec.buffered_chunks if c.thread_id != thread_id),
            "buffered_reflection": None,
            "buffered_reflection_tokens": 0,
            "reflected_line_count": 0,
            **({"current_task": None, "suggested_response": None} if thread_id in rec.cursor else {}),
        }
    )


def _reset(rec: ObservationRecord) -> dict[str, Any]:
    return {
        "active_observations": "",
        "observation_tokens": 0,
        "origin_type": "initial",
        "cursor": {},
        "buffered_chunks": (),
        "buffered_reflection": None,
        "buffered_reflection_tokens": 0,
        "reflected_line_count": 0,
        "reflected_threads": (),
        "pending_message_tokens": 0,
        "last_buffered_at_tokens": 0,
        "current_task": None,
        "suggested_response": None,
        "thread_title": None,
    }


def _drop_sections(text: str, label: str) -> str:
    """``text`` without the ``<thread id="label">…</thread>`` sections, and without the boundary lines of
    pieces left empty."""
    opening = f'<thread id="{html.escape(label, quote=True)}">'
    pieces = BOUNDARY_LINE.split(text)
    kept: list[str] = []
    boundary: str | None = None
    for piece in pieces:
        if BOUNDARY_LINE.fullmatch(piece):
            boundary = piece
            continue
        body = _strip_section(piece, opening).strip()
        if body:
            if kept and boundary is not None:
                kept.append(boundary)
            kept.append(body)
        boundary = None if body else boundary
    return "\n\n".join(kept)


def _strip_section(piece: str, opening: str) -> str:
    out: list[str] = []
    pos = 0
    while (start := piece.find(opening, pos)) >= 0:
        end = piece.find("</thread>", start)
        out.append(piece[pos:start])
        pos = len(piece) if end < 0 else end + len("</thread>")
    out.append(piece[pos:])
    return "".join(out)


def clone_cursor(observed: int, seq_map: Mapping[int, int]) -> int:
    """The copy of the last observed message (``0`` when nothing observed was copied)."""
    return max((new for old, new in seq_map.items() if old <= observed), default=0)


def cloned_record(
    rec: ObservationRecord,
    *,
    resource_id: str,
    thread_id: str,
    id_map: Mapping[str, str],
    cursor: int,
) -> ObservationRecord:
    """A thread-scoped ``rec`` for a clone that copied every message: the log with each retrieval range
    pointing at the copies, the cursor at ``cursor`` (``clone_cursor``). Buffered chunks, failures
    and pending work stay with the source (the clone's next observation redoes them).

    Returns:
        An unsaved record (version 0).
    """
    text = remap_ranges(rec.active_observations, id_map)
    return ObservationRecord(
        scope="thread",
        resource_id=resource_id,
        thread_id=thread_id,
        active_observations=text,
        origin_type=rec.origin_type,
        generation_count=rec.generation_count,
        cursor={thread_id: cursor} if cursor else {},
        observation_tokens=rec.observation_tokens,
        total_tokens_observed=rec.total_tokens_observed,
        current_task=rec.current_task,
        suggested_response=rec.suggested_response,
        thread_title=rec.thread_title,
    )


def _remap_range(span: str, id_map: Mapping[str, str]) -> str:
    first, last = split_range(span)
    return html.escape(f"{id_map.get(first, first)}:{id_map.get(last, last)}", quote=True)


def shared_with_clone(
    rec: ObservationRecord,
    *,
    source: tuple[str, Sequence[str]],
    clone: tuple[str, str],
    id_map: Mapping[str, str],
    cursor: int,
    tokenizer: Tokenizer,
) -> ObservationRecord:
    """A resource-scoped ``rec`` in which a clone of the same resource counts as observed as far as its
    source: the source's sections are appended again under the clone's label (ranges pointing at the
    copies), so the clone keeps its observations when the source is deleted; a reflection that merged the
    source merged the clone too.

    Args:
        source: the source thread's id and every label it may be shown with; clone: the clone's id and
            label. cursor: the clone's cursor (``clone_cursor``).
    """
    source_id, labels = source
    clone_id, clone_label = clone
    sections = [body for label in labels for body in _sections(rec.active_observations, label)]
    text = rec.active_observations
    for body in sections:
        copy = (
            f'<thread id="{html.escape(clone_label, quote=True)}">\n{remap_ranges(body, id_map)}\n</thread>'
        )
        text = f"{text}\n\n{copy}" if text.strip() else copy
    merged = rec.reflected_threads
    if source_id in merged:
        merged = tuple(sorted({*merged, clone_id}))
    return rec.model_copy(
        update={
            "active_observations": text,
            "observation_tokens": tokenizer.count(text) if sections else rec.observation_tokens,
            "cursor": {**rec.cursor, clone_id: cursor},
            "reflected_threads": merged,
        }
    )


def remap_ranges(text: str, id_map: Mapping[str, str]) -> str:
    """``text`` with every ``observation-group`` range's ends mapped through ``id_map``."""
    return _ID_IN_RANGE.sub(lambda m: m.group(1) + _remap_range(m.group(2), id_map) + m.group(3), text)


def _sections(text: str, label: str) -> list[str]:
    """The bodies of the ``<thread id="label">`` sections of ``text``, in order."""
    opening = f'<thread id="{html.escape(label, quote=True)}">'
    out: list[str] = []
    pos = 0
    while (start := text.find(opening, pos)) >= 0:
        end = text.find("</thread>", start)
        if end < 0:
            break
        out.append(text[start + len(opening) : end].strip("\n"))
        pos = end + len("</thread>")
    return out
