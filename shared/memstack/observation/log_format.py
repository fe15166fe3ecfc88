"""The observation log's own structure: the marks only Memstack may write into a record's observations.

* ``BOUNDARY`` lines between observed pieces: context assembly splits the log on them into separate
  system messages (``split_log``);
* ``<observation-group id="…" range="…">`` wrappers (retrieval, spec §2.9.8) and ``<thread id="…">``
  sections (resource scope), which recall, deletes and reflections read back;
* the tags context assembly wraps the log and the hints in (``<observations>``, ``<current-task>``,
  ``<suggested-response>``).

Model output enters the log through ``model_text``: an Observer or Reflector that writes one of these
marks (copying the log it was shown, quoting the user, or told to by them) must not split a piece, open
a group in one system message and close it in the next, or point a group at other messages.
"""

from __future__ import annotations

import re

__all__ = ["BOUNDARY", "BOUNDARY_LINE", "model_text", "split_log"]

BOUNDARY = "--- message boundary ({at}) ---"
"""The line between two observed pieces of the log (spec §2.9.4 step 6). Context assembly splits the log
on it into separate system messages, so earlier pieces stay byte-identical (and cacheable)."""

BOUNDARY_LINE = re.compile(r"(^--- message boundary \([^)\n]*\) ---$)", re.MULTILINE)
"""A boundary line of the log, as a group: ``split`` keeps the lines between the pieces (odd items)."""

# anything a reader could take for a boundary line: spacing, case and the date's shape do not matter
_BOUNDARY_LIKE = re.compile(
    r"^[ \t]*-{2,}[ \t]*message[ \t]+boundary\b[^\n]*(?:\n|\Z)", re.MULTILINE | re.IGNORECASE
)
_STRUCTURE_TAGS = ("observation-group", "thread", "observations", "current-task", "suggested-response")
_TAG = re.compile(rf"<(?=/?(?:{'|'.join(_STRUCTURE_TAGS)})\b)", re.IGNORECASE)
_TAG_ONLY = re.compile(r"^\s*</?(?:observation-group|thread)\b[^>\n]*>\s*$", re.IGNORECASE)
_SECTION_OPEN = re.compile(r'<thread id="[^"\n]*">')
_SECTION_CLOSE = "</thread>"


def split_log(text: str) -> list[str]:
    """The observation log cut at its message-boundary lines (non-empty pieces, in order)."""
    return [p.strip() for p in BOUNDARY_LINE.split(text)[::2] if p.strip()]


def model_text(text: str, *, thread_sections: bool = False) -> str:
    """Observation text a model wrote (an Observer's new lines or hints, a Reflector's log), made unable
    to forge the log's structure before it enters the record.

    * Lines that look like a boundary (``--- message boundary (…) ---``, any spacing or case) are removed.
    * Lines that are only an ``<observation-group …>`` / ``</observation-group>`` tag, or a ``<thread …>`` /
      ``</thread>`` tag, are removed (a Reflector copies them from the log it was shown; Memstack wraps
      the text again itself).
    * Any other ``<observation-group``, ``<thread``, ``<observations``, ``<current-task`` or
      ``<suggested-response`` tag (opening or closing) has its ``<`` escaped as ``&lt;``: it is text the
      item quotes, and stays readable.

    Args:
        text: the parsed observation text.
        thread_sections: keep the ``<thread id="…">`` / ``</thread>`` lines that open and close a section
            at the top level, as ``parsing`` rebuilds them (a resource-scope Reflector's answer, whose
            sections deletes read; one left open is closed); nested or unbalanced ones are removed all
            the same.

    Returns:
        The text, with the same lines otherwise.
    """
    text = _BOUNDARY_LIKE.sub("", text)
    out: list[str] = []
    inside = False
    for line in text.split("\n"):
        if thread_sections and not inside and _SECTION_OPEN.fullmatch(line):
            inside = True
            out.append(line)
        elif thread_sections and inside and line == _SECTION_CLOSE:
            inside = False
            out.append(line)
        elif not _TAG_ONLY.match(line):
            out.append(_TAG.sub("&lt;", line))
    if inside:
        out.append(_SECTION_CLOSE)
    return "\n".join(out)
