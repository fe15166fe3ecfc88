"""The Observer's working-memory rewrite, checked before it is applied (``manage_working_memory``).

The Observer returns a whole ``<working-memory>`` document. In JSON mode it is applied as a merge (the
working-memory tool's semantics, ``memstack.working_memory.merge``), so a key it leaves out stays. In
markdown mode a rewrite replaces the document, so it is refused when it drops or changes a filled field
the observed messages did not touch (``untouched_changes``): one turn saying "hi" must not turn
"Name: Ada Lovelace" into "Name: Ada".

A *field* is a line ``Key: value`` (optionally a list item, the key optionally in ``**bold**``); it is
*filled* when its value is not empty. A field is *touched* when a content word (three letters or more,
not a stop word, lower-cased) of its key, its old value or its new value occurs in the observed
messages. The rule is ours; Mastra applies the Observer's document as it comes.
"""

from __future__ import annotations

import re

from memstack.stopwords import STOP_WORDS

__all__ = ["markdown_fields", "untouched_changes"]

_FIELD = re.compile(r"^\s*(?:[-*+]\s+)?(?:\*\*)?([^:#\n*]{1,60}?)(?:\*\*)?\s*:\s*(.*?)\s*$")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def markdown_fields(document: str) -> dict[str, str]:
    """The ``Key: value`` fields of a markdown document, keys lower-cased and trimmed (the last of a key
    wins); headings and lines without a colon are not fields."""
    fields: dict[str, str] = {}
    for line in document.splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = _FIELD.match(line)
        if match is not None:
            fields[" ".join(match.group(1).lower().split())] = match.group(2).strip()
    return fields


def _words(text: str) -> set[str]:
    return {w for w in (w.lower() for w in _WORD.findall(text)) if len(w) >= 3 and w not in STOP_WORDS}


def untouched_changes(current: str, rewrite: str, observed: str) -> list[str]:
    """The filled fields of ``current`` that ``rewrite`` drops or changes although ``observed`` (the text
    of the messages the Observer saw) does not touch them (module docstring); ``[]`` when the rewrite
    may replace the document.

    Args:
        current: the stored markdown document.
        rewrite: the Observer's document.
        observed: the observed messages' text.

    Returns:
        The keys of the offending fields, in the order of ``current``.
    """
    before, after = markdown_fields(current), markdown_fields(rewrite)
    seen = _words(observed)
    offending: list[str] = []
    for key, old in before.items():
        if not old:
            continue
        new = after.get(key)
        if new is not None and " ".join(new.split()) == " ".join(old.split()):
            continue
        if not (_words(key) | _words(old) | _words(new or "")) & seen:
            offending.append(key)
    return offending
