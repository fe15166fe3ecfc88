"""What a model answer must pass before it changes the observation log.

* ``reflection_problem``: a reflection replaces the whole log, so it is committed only when it was read
  whole (``parsing.unread_lines``), is smaller than what it replaces, is not degenerate
  (``parsing.is_degenerate``, or short lines repeated: 300 lines of ``* ok`` stay under that detector's
  2,000-character floor), is not a refusal, and keeps every high-priority (🔴) fact of its input
  (``lost_high_priority``).
* ``new_lines_only``: an observation line already in the log is not appended again.

The 🔴 rule ("kept verbatim or recognisably") is ours, Mastra has none: a fact's *content words* are its
words of three letters or more that are not stop words (``memstack.stopwords``), lower-cased, after the
bullet, the priority marker and a leading ``(HH:MM)`` time are removed; its *numbers* are its digit runs.
The fact is kept when one line of the reflection holds every number of the fact and at least
``KEEP_WORD_SHARE`` of its content words. A merge of four facts into one line keeps all four when that
line holds each one's numbers and most of its words; a merge that kept one of them loses three.
"""

from __future__ import annotations

import re

from memstack.ports import Tokenizer
from memstack.stopwords import STOP_WORDS

__all__ = [
    "KEEP_WORD_SHARE",
    "MIN_REPEATED_LINES",
    "is_refusal",
    "lost_high_priority",
    "new_lines_only",
    "reflection_problem",
]

KEEP_WORD_SHARE = 0.6
"""Share of a 🔴 fact's content words one reflection line must hold for the fact to count as kept."""

MIN_REPEATED_LINES = 10
"""With at least this many non-empty lines, a reflection whose lines are more than half repeats of an
earlier line is degenerate, however short its lines."""

_REPEATED_SHARE = 0.5

_LEAD = re.compile(r"^[\s*\-+•]*(?:🔴|🟡|🟢|✅)?\s*(?:\(\d{1,2}:\d{2}\)\s*)?")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_NUMBER = re.compile(r"\d+")
_REFUSAL = re.compile(
    r"^\W*(?:i'?m sorry|i am sorry|sorry,|i can(?:'|no)t|i cannot|i am unable|i'?m unable|i won'?t|"
    r"as an ai|unfortunately,? i)",
    re.I,
)
_STRUCTURE = re.compile(r"^\s*(?:</?[a-z-]+\b[^>]*>|Date:|-{3} message boundary)", re.I)


def _content(line: str) -> tuple[set[str], set[str]]:
    body = _LEAD.sub("", line, count=1)
    words = {w.lower() for w in _WORD.findall(body)}
    return {w for w in words if len(w) >= 3 and w not in STOP_WORDS and not w.isdigit()}, set(
        _NUMBER.findall(body)
    )


def _facts(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "🔴" in line]


def lost_high_priority(before: str, after: str) -> list[str]:
    """The 🔴 lines of ``before`` that no line of ``after`` keeps (module docstring), in order.

    Args:
        before: the log being replaced.
        after: the reflection.
    """
    candidates = [_content(line) for line in after.splitlines() if line.strip()]
    lost: list[str] = []
    for fact in _facts(before):
        words, numbers = _content(fact)
        if not words and not numbers:
            continue
        need = KEEP_WORD_SHARE * len(words)
        if not any(
            numbers <= line_numbers and len(words & line_words) >= need
            for line_words, line_numbers in candidates
        ):
            lost.append(fact)
    return lost


def _repetitive(text: str) -> bool:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not _STRUCTURE.match(line)]
    if len(lines) < MIN_REPEATED_LINES:
        return False
    return (len(lines) - len(set(lines))) / len(lines) > _REPEATED_SHARE


def is_refusal(text: str) -> bool:
    """Whether ``text`` is a refusal rather than an answer: its first line that is not structure (a tag,
    a ``Date:`` header), bullet and priority marker removed, opens the way refusals open ("I'm sorry",
    "I can't", "As an AI", "Unfortunately, I" …)."""
    first = next((line for line in text.splitlines() if line.strip() and not _STRUCTURE.match(line)), "")
    return bool(_REFUSAL.match(_LEAD.sub("", first, count=1)))


def reflection_problem(before: str, raw: str, after: str, tokenizer: Tokenizer) -> str | None:
    """Why the reflection ``after`` must not replace ``before``, or ``None`` when it may.

    Args:
        before: the active observations the reflection replaces.
        raw: the Reflector's whole answer (checked for repetition loops).
        after: the observations parsed from it.
        tokenizer: counts tokens for the size rule.

    Returns:
        ``"unreadable (N observation line(s) outside its blocks)"`` (``parsing.unread_lines``: tags too
        broken to read every line the Reflector wrote), ``"empty"``, ``"degenerate"``, ``"refusal"``,
        ``"not smaller (B → A tokens)"`` or ``"lost N high-priority fact(s)"``; ``None`` when every check
        passes.
    """
    from memstack.observation.parsing import is_degenerate, unread_lines

    unread = unread_lines(raw)
    if unread:
        return f"unreadable ({len(unread)} observation line(s) outside its blocks)"
    if not after.strip():
        return "empty"
    if is_degenerate(raw) or _repetitive(after):
        return "degenerate"
    if is_refusal(after):
        return "refusal"
    size_before, size_after = tokenizer.count(before), tokenizer.count(after)
    if size_after >= size_before:
        return f"not smaller ({size_before} → {size_after} tokens)"
    lost = lost_high_priority(before, after)
    if lost:
        return f"lost {len(lost)} high-priority fact(s)"
    return None


def new_lines_only(log: str, new: str) -> str:
    """``new`` without the observation lines already in ``log`` or earlier in ``new`` (compared stripped;
    ``Date:`` headers, tags and blank lines are structure and always kept). A ``Date:`` header left with
    no line under it is dropped too."""
    seen = {line.strip() for line in log.splitlines() if line.strip() and not _STRUCTURE.match(line)}
    kept: list[str] = []
    for line in new.splitlines():
        key = line.strip()
        if key and not _STRUCTURE.match(line):
            if key in seen:
                continue
            seen.add(key)
        kept.append(line)
    out: list[str] = []
    for i, line in enumerate(kept):
        if line.strip().startswith("Date:"):
            following = next((k for k in kept[i + 1 :] if k.strip()), "")
            if not following.strip() or following.strip().startswith("Date:") or _STRUCTURE.match(following):
                continue
        out.append(line)
    return "\n".join(out).strip("\n")
