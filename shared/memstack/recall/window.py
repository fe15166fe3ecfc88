"""Which messages recall shows around its hits, within a fixed message budget.

Mastra shows each of ``top_k`` hits with ``message_range`` neighbours on each side (spec §2.8), so a turn
shows at most ``top_k × (before + 1 + after)`` recalled messages. Memstack keeps that bound — the
**message budget** — and spends it better:

* **Short replies show their session neighbours.** A hit of a few words ("Yes, definitely!", "ah") says
  little on its own: what it answers, or what follows it, is the content. Its window reaches one message
  further on each side that ``message_range`` gives neighbours (``SHORT_REPLY_WORDS``), when that still
  fits the budget. A side set to 0 asks for no neighbours there, so ``message_range`` 0 shows the hits
  themselves.
* **A query naming a time prefers that time.** Hits created within it are taken first
  (``in_range_first``; ``memstack.dates`` reads the time).
* **Overlapping windows leave room for more hits.** Two hits next to each other share neighbours; the
  messages they did not use go to the next hits in rank order, as long as the whole fits the budget.

The selection reads nothing itself: recall fetches each candidate's window one message wider than
``message_range`` in the same store request, and ``select`` chooses from what came back. Neighbours are
counted among messages that exist (gaps left by deletions are skipped, as ``MessageWindow`` says).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from memstack.config import SemanticRecallOptions
from memstack.dates import TimeRange
from memstack.fusion import FusedHit
from memstack.model import Message, TextPart
from memstack.ports import MAX_TOP_K

SHORT_REPLY_WORDS = 4
"""A hit of at most this many words (text parts, whitespace-separated) is a short reply: its window
widens by one message on each side that has neighbours. Acknowledgements and interjections ("ah", "That's
so cool!", "Thanks, you too") stay under it; a statement that answers anything ("I went camping in June")
does not."""


def message_budget(options: SemanticRecallOptions) -> int:
    """The most recalled messages a turn shows: ``top_k × (before + 1 + after)``, Mastra's bound."""
    r = options.message_range
    return options.top_k * (r.before + 1 + r.after)


def candidate_count(options: SemanticRecallOptions) -> int:
    """How many hits recall ranks before choosing windows: as many as could fit the budget if every
    window collapsed to its hit (``message_budget``), so overlapping windows never leave it unused — at
    most what an index search returns (``ports.MAX_TOP_K``: ``top_k`` 100 with ``message_range`` 50 is a
    budget of 10,100)."""
    return min(message_budget(options), MAX_TOP_K)


def fetch_span(options: SemanticRecallOptions) -> tuple[int, int]:
    """``(before, after)`` of the windows to fetch: ``message_range`` plus one on each side that has
    neighbours, so a short reply's wider window is in hand without a second read."""
    return _widened(options.message_range.before), _widened(options.message_range.after)


def _widened(reach: int) -> int:
    """A short reply's reach on a side whose ``message_range`` is ``reach``: one further, unless the
    caller asked for no neighbours on that side."""
    return reach + 1 if reach > 0 else 0


@dataclass(frozen=True, slots=True)
class Selection:
    """The hits shown (best first) and their messages (ordered by thread, then ``seq``)."""

    hits: list[FusedHit]
    messages: list[Message]


def in_range_first(hits: Sequence[FusedHit], messages: Sequence[Message], when: TimeRange) -> list[FusedHit]:
    """``hits`` with those whose message was created within ``when`` first, each part in its order: a
    query that names a time asks about that time, so its messages win over better-matching others, and
    the others still fill what is left."""
    created = {m.id: m.created_at for m in messages}
    return sorted(hits, key=lambda h: h.message_id not in created or created[h.message_id] not in when)


def words(message: Message) -> int:
    """Whitespace-separated words in the message's text parts."""
    return sum(len(p.text.split()) for p in message.parts if isinstance(p, TextPart))


def select(
    hits: Sequence[FusedHit], messages: Sequence[Message], options: SemanticRecallOptions
) -> Selection:
    """Choose, in rank order, the hits whose windows fit ``message_budget`` together.

    A hit's window is ``message_range`` existing messages on each side; a short reply's
    (``SHORT_REPLY_WORDS``) reaches one further on each side with neighbours when that fits, else it is
    the plain window. Hits are taken best first while the union of windows stays within the budget; a
    hit whose plain window would overflow it is skipped, and a later, smaller one may still fit. Windows
    that do not overlap cost a full window each, so then at most ``top_k`` hits are shown, as in Mastra.
    The best hit present always fits (its plain window is at most the budget), so recall that found
    something never shows nothing.

    Args:
        hits: candidates, best first (their messages, fetched with ``fetch_span`` windows, are in
            ``messages``; a hit without its message is skipped).
        messages: the fetched messages, any order.
        options: ``top_k`` and ``message_range`` give the budget.
    """
    budget = message_budget(options)
    r = options.message_range
    by_thread: dict[str, list[Message]] = {}
    for m in sorted(messages, key=_THREAD_SEQ):
        by_thread.setdefault(m.thread_id, []).append(m)
    seqs = {t: [m.seq for m in members] for t, members in by_thread.items()}
    shown: dict[str, Message] = {}
    chosen: list[FusedHit] = []
    for hit in hits:
        members = by_thread.get(hit.thread_id, [])
        at = bisect_left(seqs.get(hit.thread_id, []), hit.seq)
        if at >= len(members) or members[at].seq != hit.seq:
            continue
        reaches = [(r.before, r.after)]
        if words(members[at]) <= SHORT_REPLY_WORDS:
            reaches.insert(0, (_widened(r.before), _widened(r.after)))
        for before, after in reaches:
            new = [m for m in members[max(0, at - before) : at + after + 1] if m.id not in shown]
            if len(shown) + len(new) <= budget:
                chosen.append(hit)
                shown.update((m.id, m) for m in new)
                break
        if len(shown) >= budget:
            break
    ordered = sorted(shown.values(), key=_THREAD_SEQ)
    return Selection(chosen, ordered)


_THREAD_SEQ = attrgetter("thread_id", "seq")
