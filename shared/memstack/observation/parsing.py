"""Reading the Observer's and Reflector's answers, and preparing observations for the actor
(spec §2.9.5).

* ``parse_observer_output`` / ``parse_reflector_output``: the ``<observations>`` text and the optional
  hint sections, with fallbacks for answers that forget their tags.
* ``is_degenerate``: answers stuck in a repetition loop, which must never be committed.
* ``without_prompt_text``: an answer's observation lines and hints that are the prompt's own text (its
  examples and templates, which a model that repeats its prompt hands back) removed.
* ``optimize_for_context`` and ``add_relative_time``: what the actor sees of the observations.
* ``truncate_observations``: the previous observations sent back to the Observer
  (``previous_observer_tokens``).
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime

from memstack.ports import Tokenizer
from memstack.text import plain_text

__all__ = [
    "MAX_LINE_CHARS",
    "MAX_TITLE_CHARS",
    "ObserverOutput",
    "add_relative_time",
    "clean_title",
    "is_degenerate",
    "normal_line",
    "optimize_for_context",
    "parse_observer_output",
    "parse_reflector_output",
    "prompt_lines",
    "says_nothing_new",
    "strip_group_tags",
    "strip_think",
    "truncate_observations",
    "unread_lines",
    "without_prompt_text",
]

MAX_LINE_CHARS = 10_000
"""Longer observation lines are cut to this many characters and marked `` … [truncated]``."""

MAX_TITLE_CHARS = 80
"""Longest thread title (spec §2.6)."""

_TRUNCATED = " … [truncated]"

# degenerate detection (spec §2.9.5)
_DEGENERATE_MIN_CHARS = 2_000
_WINDOW = 200
_WINDOW_STRIDE = 50
_WINDOW_DUPLICATES = 0.4
_DEGENERATE_LINE_CHARS = 50_000
_LINE_MIN_CHARS = 24
_LINE_MIN_COUNT = 10
_LINE_DUPLICATES = 0.5


@dataclass(frozen=True)
class ObserverOutput:
    """A parsed Observer or Reflector answer.

    Attributes:
        observations: the observation text (``<observations>`` blocks joined by a newline; with
            multi-thread output the ``<thread id>`` sections stay in it, their hint sections removed);
            ``""`` when the answer had none.
        current_task, suggested_response, thread_title, working_memory: the top-level optional sections,
            trimmed (``None`` when absent or empty; the title at most ``MAX_TITLE_CHARS``).
        threads: multi-thread output: thread id → that thread's observation text; ``{}`` otherwise.
        thread_hints: multi-thread output: thread id → its hints found inside its ``<thread>`` section,
            keyed ``current_task``, ``suggested_response``, ``thread_title`` (only those present).
    """

    observations: str
    current_task: str | None = None
    suggested_response: str | None = None
    thread_title: str | None = None
    working_memory: str | None = None
    threads: dict[str, str] = field(default_factory=dict)
    thread_hints: dict[str, dict[str, str]] = field(default_factory=dict)


_THINK_BLOCK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.I)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.I)
_HINT_TAGS = ("current-task", "suggested-response", "thread-title", "working-memory")
_HINT_FIELDS = {
    "current-task": "current_task",
    "suggested-response": "suggested_response",
    "thread-title": "thread_title",
    "working-memory": "working_memory",
}
_KNOWN_TAGS = ("observations", "thread", *_HINT_TAGS)
_OPEN_AT_LINE = {
    tag: re.compile(rf"^[ \t]*<{tag}(?:\s[^>\n]*)?>", re.M | re.I) for tag in ("observations", *_HINT_TAGS)
}
_THREAD_BLOCK = re.compile(
    r"^[ \t]*<thread\s+id\s*=\s*(?:\"([^\"\n]*)\"|'([^'\n]*)')\s*>(.*?)(?:^[ \t]*</thread>|\Z)",
    re.M | re.S | re.I,
)
_ANY_OPEN_AT_LINE = re.compile(rf"^[ \t]*<(?:{'|'.join(_KNOWN_TAGS)})\b[^>\n]*>", re.M | re.I)
_FENCE = re.compile(r"^[ \t]*```[\w-]*[ \t]*$", re.M)
_OBSERVATION_LINE = re.compile(
    r"^\s*(?:[*\-+•]\s|\d{1,3}[.)]\s|Date:|🔴|🟡|🟢|✅|\[[^\]\n]+ later\])",
)
_GROUP_TAG = re.compile(
    r"^[ \t]*</?observation-group\b[^>\n]*>[ \t]*\n?|</?observation-group\b[^>\n]*>", re.M
)


def strip_think(text: str) -> str:
    """``text`` without reasoning: ``<think>…</think>`` blocks removed; text before a lone ``</think>``
    removed (a model that printed its reasoning without the opening tag); a lone ``<think>`` tag removed."""
    text = _THINK_BLOCK.sub("", text)
    closing = list(_THINK_CLOSE.finditer(text))
    if closing:
        text = text[closing[-1].end() :]
    return _THINK_OPEN.sub("", text)


def _cut_lines(text: str) -> str:
    return "\n".join(
        line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + _TRUNCATED
        for line in text.split("\n")
    )


def _tidy(text: str) -> str:
    """Code fences dropped, lines cut to ``MAX_LINE_CHARS``, blank lines around trimmed."""
    text = _FENCE.sub("", text)
    return _cut_lines(text).strip("\n").rstrip()


def _blocks(text: str, tag: str) -> list[tuple[int, int, str]]:
    """Every ``<tag>…</tag>`` block whose opening tag starts a line: ``(start, end, content)``.

    A block ends at its *last* closing tag before the next section (the next known opening tag that starts
    a line after its first closing tag), so a closing tag an item quotes ("pasted ``</observations>``") or
    a stray nested pair does not end it early; opening tags before its first closing tag are stray, and
    the stray tags alone on their line are dropped from the content (``_without_stray``). A block without
    any closing tag ends at the next known opening tag that starts a line, or at the end of the text.
    """
    out: list[tuple[int, int, str]] = []
    opening = _OPEN_AT_LINE[tag]
    closing = re.compile(rf"</{tag}\s*>", re.I)
    position = 0
    while True:
        match = opening.search(text, position)
        if match is None:
            return out
        first_close = closing.search(text, match.end())
        if first_close is None:
            following = _ANY_OPEN_AT_LINE.search(text, match.end())
            end = following.start() if following is not None else len(text)
            out.append((match.start(), end, _without_stray(text[match.end() : end], tag)))
            position = max(end, match.end())
            continue
        section = _ANY_OPEN_AT_LINE.search(text, first_close.end())
        limit = section.start() if section is not None else len(text)
        close = [*closing.finditer(text, first_close.start(), limit)][-1]
        out.append((match.start(), close.end(), _without_stray(text[match.end() : close.start()], tag)))
        position = close.end()


def _without_stray(content: str, tag: str) -> str:
    """A block's content without the stray ``<tag>`` / ``</tag>`` left in it: lines that are only such a
    tag are removed, an opening tag that starts a line is removed from it. A tag inside a line's text
    stays: it is what the item says."""
    lines = [line for line in content.split("\n") if not _stray_line(line, tag)]
    return _OPEN_AT_LINE[tag].sub("", "\n".join(lines))


def _stray_line(line: str, tag: str) -> bool:
    return bool(re.fullmatch(rf"\s*(?:<{tag}(?:\s[^>\n]*)?>|</{tag}\s*>)\s*", line, re.I))


def unread_lines(text: str) -> list[str]:
    """The observation-looking lines (list items, ``Date:`` headers, priority markers) of an answer that
    lie between its first ``<observations>`` opening tag and its last ``</observations>`` closing tag but
    that the parser reads into no section: the model meant them as observations, yet the answer's tags
    are too broken to tell where its blocks end. A caller must not commit such an answer (a silent loss
    of what the model observed); ``[]`` for an answer the parser reads whole."""
    text = _plain(text)
    blocks = _blocks(text, "observations")
    if not blocks:
        return []
    closes = list(re.finditer(r"</observations\s*>", text, re.I))
    end = max(blocks[-1][1], closes[-1].end() if closes else 0)
    gaps = [text[a:b] for (_, a, _), (b, _, _) in zip(blocks, blocks[1:], strict=False)]
    gaps.append(text[blocks[-1][1] : end])
    unread: list[str] = []
    for gap in gaps:
        _, rest = _hints_in(gap)
        unread += [line.strip() for line in rest.split("\n") if _OBSERVATION_LINE.match(line)]
    return unread


def _hint(value: str | None, tag: str) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if tag == "thread-title":
        return clean_title(value) or None
    return value


def _remove(text: str, spans: list[tuple[int, int, str]]) -> str:
    for start, end, _ in sorted(spans, reverse=True):
        text = text[:start] + text[end:]
    return text


def _hints_in(text: str) -> tuple[dict[str, str], str]:
    """The hint sections of ``text`` (the last of each tag wins) and ``text`` without them."""
    found: dict[str, str] = {}
    spans: list[tuple[int, int, str]] = []
    for tag in _HINT_TAGS:
        blocks = _blocks(text, tag)
        spans.extend(blocks)
        values = [v for v in (_hint(content, tag) for _, _, content in blocks) if v is not None]
        if values:
            found[_HINT_FIELDS[tag]] = values[-1]
    return found, _remove(text, spans)


def _fallback_observations(text: str) -> str:
    """Observation-looking lines of an answer without ``<observations>`` tags: list items, ``Date:``
    headers, lines starting with a priority marker, and the indented lines under them."""
    kept: list[str] = []
    keeping = False
    for line in text.split("\n"):
        if not line.strip():
            if keeping:
                kept.append("")
            continue
        if _OBSERVATION_LINE.match(line):
            kept.append(line)
            keeping = True
        elif keeping and line[:1] in (" ", "\t"):
            kept.append(line)  # a continuation or sub-bullet of the item above
        else:
            keeping = False
    return "\n".join(kept)


def _plain(text: str) -> str:
    """An answer as the parser reads it: reasoning removed, then ``memstack.text.plain_text`` (controls,
    bidi and zero-width characters dropped; a line break is ``\n`` or ``\r\n`` only)."""
    return strip_think(plain_text(text or ""))


def _parse(text: str) -> ObserverOutput:
    text = _plain(text)
    blocks = _blocks(text, "observations")
    outside = _remove(text, blocks)
    top, _ = _hints_in(outside)
    if blocks:
        body = "\n".join(content.strip("\n") for _, _, content in blocks)
    else:
        _, without_hints = _hints_in(text)
        body = _fallback_observations(without_hints)
    threads: dict[str, str] = {}
    thread_hints: dict[str, dict[str, str]] = {}
    pieces: list[str] = []
    last = 0
    for match in _THREAD_BLOCK.finditer(body):
        thread_id = html.unescape(match.group(1) if match.group(1) is not None else match.group(2))
        hints, content = _hints_in(match.group(3))
        content = _tidy(content)
        threads[thread_id] = (
            f"{threads[thread_id]}\n{content}".strip("\n") if thread_id in threads else content
        )
        if hints:
            thread_hints.setdefault(thread_id, {}).update(
                {k: v for k, v in hints.items() if k != "working_memory"}
            )
        pieces.append(body[last : match.start()])
        pieces.append(f'<thread id="{html.escape(thread_id, quote=True)}">\n{content}\n</thread>\n')
        last = match.end()
    pieces.append(body[last:])
    if not threads:
        # hints some models put inside <observations>: take them out of the observation text
        inner, body = _hints_in(body)
        top = {**inner, **top}
        observations = _tidy(body)
    else:
        observations = _tidy("".join(pieces))
    return ObserverOutput(
        observations=observations,
        current_task=top.get("current_task"),
        suggested_response=top.get("suggested_response"),
        thread_title=top.get("thread_title"),
        working_memory=top.get("working_memory"),
        threads=threads,
        thread_hints=thread_hints,
    )


def parse_observer_output(text: str) -> ObserverOutput:
    """Parse an Observer answer (spec §2.9.5 "Parsing").

    Rules: reasoning (``<think>…</think>``) is removed first, and the text is read as ``plain_text``.
    Tags count only when the opening tag starts a line (after optional spaces). A block ends at its last
    closing tag before the next section, so a closing tag quoted inside an item or a stray nested pair
    does not end it early (stray tag-only lines are dropped); several ``<observations>`` blocks are
    joined by a newline; an unclosed block runs to the next known section or the end. The same holds for
    each hint tag. Lines the tags leave unread are reported by ``unread_lines``, not here. Without any ``<observations>`` block, the
    observation-looking lines are used (list items, ``Date:`` headers, priority markers and their indented
    lines). Lines over ``MAX_LINE_CHARS`` are cut and marked `` … [truncated]``; code fences are dropped.
    Hints (``<current-task>``, ``<suggested-response>``, ``<thread-title>``, ``<working-memory>``) are
    trimmed, empty ones are ``None``, the last of a tag wins; the title is cleaned by ``clean_title``.
    Multi-thread output (``<thread id="…">`` sections inside ``<observations>``) fills ``threads`` and
    ``thread_hints``.

    Never raises: an answer with nothing usable gives ``observations == ""``.
    """
    return _parse(text)


def parse_reflector_output(text: str) -> ObserverOutput:
    """Parse a Reflector answer: the same rules as ``parse_observer_output``."""
    return _parse(text)


_NOTHING_NEW = re.compile(
    r"^[(*\-•\s]*(?:there (?:are|is|were) )?(?:no|nothing)"
    r"(?: (?:new|notable|significant|further|additional|relevant|important))?"
    r"(?: (?:observations?|information|facts?|details?|content))?"
    r"(?: (?:to|worth) (?:observe|record|note|add|remember|observing|recording|noting|remembering))?"
    r"(?: (?:from|in) (?:th(?:is|ese) )?(?:messages?|conversation|exchange|batch|turn))?[\s.!)]*$",
    re.I,
)
"""A whole line that only says there is nothing to observe; a line with any other content is a fact."""


def says_nothing_new(text: str) -> bool:
    """Whether an Observer answer validly reports that the messages hold nothing to remember: it has an
    ``<observations>`` block (or no tags at all) whose content is empty or a single "no new
    observations"-style line (``No new observations.``, ``Nothing notable to record``, ``(nothing new)``),
    and no other observation line. An empty answer is not this: it is a failed call."""
    text = _plain(text)
    blocks = _blocks(text, "observations")
    if blocks:
        body = "\n".join(content for _, _, content in blocks)
    else:
        _, body = _hints_in(text)
        if not body.strip():
            return False
    lines = [ln for ln in (line.strip() for line in body.split("\n")) if ln and not ln.startswith("Date:")]
    if not lines:
        return bool(blocks)
    return len(lines) == 1 and bool(_NOTHING_NEW.match(lines[0]))


def clean_title(text: str) -> str:
    """A title as the model wrote it, cleaned (spec §2.6): reasoning removed; controls, bidi and
    zero-width characters removed and line breaks other than ``\n`` made spaces (``memstack.text.plain_text``,
    as for observations); the first non-empty line; a leading ``Title:`` removed; quotes, backticks,
    ``*``/``#`` markup and colons removed; spaces collapsed; cut to ``MAX_TITLE_CHARS`` on a word boundary
    (hard cut for a single longer word). ``""`` when nothing is left."""
    text = _plain(text)
    line = next((ln for ln in text.split("\n") if ln.strip()), "")
    line = re.sub(r"^\s*(?:thread\s+)?title\s*:\s*", "", line, flags=re.I)
    line = re.sub(r"[\"“”„«»`*#:]", "", line)
    line = re.sub(r"^['‘’]+|['‘’]+$", "", line.strip())
    line = " ".join(line.split())
    if len(line) <= MAX_TITLE_CHARS:
        return line
    cut = line[: MAX_TITLE_CHARS + 1].rsplit(" ", 1)[0]
    if not cut or len(cut) > MAX_TITLE_CHARS:
        cut = line[:MAX_TITLE_CHARS]
    return cut.rstrip(" ,;.-–—")


# ---------------------------------------------------------------------------------------------------
# the prompt's own text in an answer

_LIST_LEAD = re.compile(r"^[\s*\-+•>]+")
_STRUCTURE_LINE = re.compile(r"^\s*(?:</?[a-z][\w-]*\b[^>\n]*>\s*$|Date:)", re.I)
_OPENING_LINE = re.compile(r"^\s*<[a-z][\w-]*\b[^>\n]*>\s*$", re.I)
_CLOSING_LINE = re.compile(r"^\s*</[a-z][\w-]*\s*>\s*$", re.I)


def normal_line(line: str) -> str:
    """A line as compared with a prompt's lines: list bullets and ``>`` marks at its start removed,
    spaces collapsed, case folded (a model that repeats its prompt may change a bullet or the spacing)."""
    return " ".join(_LIST_LEAD.sub("", line).split()).casefold()


@functools.lru_cache(maxsize=64)
def prompt_lines(prompt: str) -> frozenset[str]:
    """The lines of ``prompt`` as ``normal_line`` gives them, and of what the parser itself reads from it
    (the example ``<observations>`` block, hint templates, inline hints such as ``<current-task>…</current-task>``).
    Cached: prompts are byte-equal for equal options (``memstack.observation.prompts``)."""
    own = _parse(prompt)
    hints = [own.current_task, own.suggested_response, own.thread_title, own.working_memory]
    texts = [
        prompt,
        own.observations,
        *(h for h in hints if h),
        *own.threads.values(),
        *(v for found in own.thread_hints.values() for v in found.values()),
    ]
    return frozenset(n for text in texts for n in map(normal_line, text.split("\n")) if n)


def _tidy_structure(lines: list[str]) -> list[str]:
    """``lines`` without ``Date:`` headers that head nothing and sections (``<thread id>``,
    ``<observation-group>``) left with nothing but structure in them."""
    out: list[str] = []

    def drop_empty_headers() -> None:
        end = len(out)
        while end and not out[end - 1].strip():
            end -= 1
        if end and out[end - 1].strip().startswith("Date:"):
            del out[end - 1 :]

    for line in lines:
        stripped = line.strip()
        if stripped.startswith("Date:"):
            drop_empty_headers()
        elif _CLOSING_LINE.match(line):
            drop_empty_headers()
            end = len(out)
            while end and not out[end - 1].strip():
                end -= 1
            if end and _OPENING_LINE.match(out[end - 1]):
                del out[end - 1 :]  # the section holds nothing any more
                continue
        out.append(line)
    drop_empty_headers()
    return out


def _without_lines(text: str, known: frozenset[str], *, keep_structure: bool) -> str:
    kept = [
        line
        for line in text.split("\n")
        if (keep_structure and _STRUCTURE_LINE.match(line)) or normal_line(line) not in known
    ]
    if keep_structure:
        kept = _tidy_structure(kept)
    return "\n".join(kept).strip("\n").rstrip()


def without_prompt_text(output: ObserverOutput, prompt: str) -> ObserverOutput:
    """``output`` without what it took from the prompt it answers: a model that repeats its prompt
    (system text and all) hands back the prompt's example ``<observations>`` block and hint templates,
    which the parser would otherwise read as observations about this user.

    Every observation line (thread sections included) and every line of a hint (``current_task``,
    ``suggested_response``, ``thread_title``, ``working_memory``, per-thread hints) that is a line of
    ``prompt`` is removed. Lines are compared after removing leading bullets and ``>`` marks,
    collapsing spaces and folding case; the prompt's own lines include what the parser reads from the
    prompt itself (an inline ``<current-task>…</current-task>`` example is compared by its content).
    ``Date:`` headers and section tags are structure, never removed for matching, but a header or a
    ``<thread>`` / ``<observation-group>`` section left with no observation under it goes too. A hint
    left empty becomes ``None``; a thread left empty leaves ``threads``.

    Pass the instructions only (the system prompt and the task's fixed text), never the data the prompt
    carries: an Observer may rightly repeat the prior current task, and a Reflector must repeat the
    observations it was given.

    Args:
        output: a parsed Observer or Reflector answer.
        prompt: the instruction text the model was given.

    Returns:
        The output with the prompt's lines removed (``observations == ""`` when nothing else was in it).
    """
    known = prompt_lines(prompt)

    def hint(value: str | None) -> str | None:
        if value is None:
            return None
        return _without_lines(value, known, keep_structure=False).strip() or None

    threads = {
        tid: text
        for tid, text in (
            (t, _without_lines(body, known, keep_structure=True)) for t, body in output.threads.items()
        )
        if text.strip()
    }
    thread_hints = {
        tid: kept
        for tid, kept in (
            (t, {k: v for k, v in ((k, hint(v)) for k, v in found.items()) if v is not None})
            for t, found in output.thread_hints.items()
        )
        if kept
    }
    return replace(
        output,
        observations=_without_lines(output.observations, known, keep_structure=True),
        current_task=hint(output.current_task),
        suggested_response=hint(output.suggested_response),
        thread_title=hint(output.thread_title),
        working_memory=hint(output.working_memory),
        threads=threads,
        thread_hints=thread_hints,
    )


# ---------------------------------------------------------------------------------------------------
# degenerate output


def is_degenerate(text: str) -> bool:
    """Whether a model answer is stuck in a loop and must not be used (spec §2.9.5).

    Degenerate when any of these hold:

    * a line is over 50,000 characters;
    * the text is at least 2,000 characters and more than 40 % of its 200-character windows (taken every
      50 characters) repeat an earlier window;
    * among the lines of at least 24 characters (stripped), when there are at least 10, more than 50 %
      repeat an earlier line.
    """
    lines = text.split("\n")
    if any(len(line) > _DEGENERATE_LINE_CHARS for line in lines):
        return True
    if len(text) >= _DEGENERATE_MIN_CHARS:
        windows = [text[i : i + _WINDOW] for i in range(0, len(text) - _WINDOW + 1, _WINDOW_STRIDE)]
        if windows and 1 - len(set(windows)) / len(windows) > _WINDOW_DUPLICATES:
            return True
    long_lines = [s for s in (line.strip() for line in lines) if len(s) >= _LINE_MIN_CHARS]
    if len(long_lines) >= _LINE_MIN_COUNT:
        repeated = len(long_lines) - len(set(long_lines))
        if repeated / len(long_lines) > _LINE_DUPLICATES:
            return True
    return False


# ---------------------------------------------------------------------------------------------------
# the actor's view


_BRACKET_TAG = re.compile(r"\[(?![\d\s]*items? collapsed\])(?!Image #)(?!File #)[^\[\]\n]+\](?!\()")
_ARROW = re.compile(r"[ \t]*->[ \t]*")
_PRIORITY_LOW = re.compile(r"(?:🟡|🟢)[ \t]*")
_SPACES = re.compile(r"(?<=\S)[ \t]{2,}")
_BLANKS = re.compile(r"\n{3,}")


def optimize_for_context(observations: str) -> str:
    """Observations made cheaper for the actor's context (spec §2.9.5 ``optimizeObservationsForContext``).

    * The 🟡 and 🟢 markers are removed; 🔴 and ✅ stay. The items themselves stay: the markers guide the
      Observer and Reflector, the facts are what the actor needs (Mastra removes the markers, not the
      lines).
    * ``[tags]`` in square brackets are removed, except markdown link labels ``[label](url)``,
      ``[N items collapsed]`` and ``[Image #n: …]`` / ``[File #n: …]`` placeholders.
    * ``->`` becomes a space; runs of spaces inside a line become one (indentation is kept);
      trailing spaces go; three or more newlines become two.

    ``Date:`` headers and ``<thread id>`` / ``<observation-group>`` tags are kept as they are.
    """
    out = _PRIORITY_LOW.sub("", observations)
    out = _BRACKET_TAG.sub("", out)
    out = _ARROW.sub(" ", out)
    out = _SPACES.sub(" ", out)
    out = "\n".join(line.rstrip() for line in out.split("\n"))
    return _BLANKS.sub("\n\n", out).strip()


_MONTH_NUMBERS = {
    name: index
    for index, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        start=1,
    )
    for name in names
}
_WEEKDAY = r"(?:(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)[a-z]*,?\s+)?"
_NAMED_DATE = re.compile(rf"^{_WEEKDAY}([A-Za-z]+)\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})$", re.I)
_DAY_FIRST_DATE = re.compile(rf"^{_WEEKDAY}(\d{{1,2}})\s+([A-Za-z]+)\.?,?\s+(\d{{4}})$", re.I)
_ISO_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_DATE_HEADER = re.compile(r"^([ \t]*Date:[ \t]*)(.+?)[ \t]*$")
_GAP_LINE = re.compile(r"^\[\d+ (?:day|week|month|year)s? later\]$")
_MEANING = re.compile(r"\((meaning|estimated)\s+([^()\n]+?)\)")
_INTENT = re.compile(
    r"\b(?:will|plan(?:s|ned|ning)? to|intend(?:s|ed)? to|going to|scheduled|upcoming|wants? to)\b", re.I
)


def _parse_date(text: str) -> date | None:
    """A calendar date from ``May 15, 2023``, ``May 15 2023``, ``Tuesday, May 15, 2023``,
    ``15 May 2023`` or ``2023-05-15``; ``None`` otherwise (or when the date does not exist)."""
    text = text.strip()
    try:
        if match := _ISO_DATE.match(text):
            return date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        if match := _NAMED_DATE.match(text):
            month = _MONTH_NUMBERS.get(match.group(1).lower())
            return date(int(match.group(3)), month, int(match.group(2))) if month else None
        if match := _DAY_FIRST_DATE.match(text):
            month = _MONTH_NUMBERS.get(match.group(2).lower())
            return date(int(match.group(3)), month, int(match.group(1))) if month else None
    except ValueError:
        return None
    return None


def _months_between(earlier: date, later: date) -> int:
    """Whole calendar months from ``earlier`` to ``later`` (``later`` ≥ ``earlier``)."""
    months = (later.year - earlier.year) * 12 + later.month - earlier.month
    if later.day < earlier.day:
        months -= 1
    return months


def _span(earlier: date, later: date) -> tuple[int, str]:
    """The distance from ``earlier`` to ``later`` (not before it) in the largest fitting unit, rounded
    down: days under a week, weeks under a month, months under a year, then years."""
    days = (later - earlier).days
    if days < 7:
        return days, "day"
    months = _months_between(earlier, later)
    if months < 1:
        return days // 7, "week"
    if months < 12:
        return months, "month"
    return months // 12, "year"


def _amount(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def _relative(when: date, today: date) -> str:
    """``today``, ``yesterday``, ``tomorrow``, ``5 days ago``, ``3 weeks ago``, ``in 2 months`` …"""
    days = (today - when).days
    if days == 0:
        return "today"
    if days == 1:
        return "yesterday"
    if days == -1:
        return "tomorrow"
    if days > 0:
        n, unit = _span(when, today)
        return f"{_amount(n, unit)} ago"
    n, unit = _span(today, when)
    return f"in {_amount(n, unit)}"


def add_relative_time(observations: str, now: datetime) -> str:
    """Observations with relative time added for the actor (spec §2.9.5 ``addRelativeTimeToObservations``).

    * ``Date: May 15, 2023`` → ``Date: May 15, 2023 (5 days ago)`` (``today``, ``yesterday``,
      ``N days/weeks/months/years ago``, ``in …`` for future dates). Headers that already carry a
      parenthesis are left alone, so the function is idempotent.
    * Between two date groups more than one day apart, a line such as ``[3 days later]`` or
      ``[2 weeks later]`` is inserted before the later header (calendar units, rounded down).
    * ``(meaning DATE)`` / ``(estimated DATE)`` with a past DATE becomes ``(meaning DATE - 3 weeks ago)``,
      plus ``, likely already happened`` when the line speaks of an intention ("will", "plans to" …);
      a future DATE gets ``- in 2 days``; today gets ``- today``.

    Dates are calendar dates in UTC (the Observer's transcript is in UTC); ``now`` is converted to UTC
    (a naive ``now`` is taken as UTC). Unparseable dates are left as they are.
    """
    moment = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    today = moment.date()
    out: list[str] = []
    previous: date | None = None
    for line in observations.split("\n"):
        header = _DATE_HEADER.match(line)
        if header is not None:
            raw = header.group(2)
            annotated = raw.endswith(")")
            when = _parse_date(raw.rsplit("(", 1)[0] if annotated else raw)
            if when is not None:
                if previous is not None and (when - previous).days > 1:
                    n, unit = _span(previous, when)
                    gap = f"[{_amount(n, unit)} later]"
                    last = next((x.strip() for x in reversed(out) if x.strip()), "")
                    if not _GAP_LINE.match(last):
                        indent = line[: len(line) - len(line.lstrip())]
                        out.append(indent + gap)
                previous = when
                if not annotated:
                    line = f"{header.group(1)}{raw} ({_relative(when, today)})"
            out.append(line)
            continue
        intent = _INTENT.search(line) is not None
        out.append(_MEANING.sub(functools.partial(_annotate_meaning, intent=intent, today=today), line))
    return "\n".join(out)


def _annotate_meaning(match: re.Match[str], *, intent: bool, today: date) -> str:
    kind, raw = match.group(1), match.group(2)
    if " - " in raw:  # already annotated
        return match.group(0)
    when = _parse_date(raw)
    if when is None:
        return match.group(0)
    relative = _relative(when, today)
    if when < today and intent:
        relative += ", likely already happened"
    return f"({kind} {raw} - {relative})"


# ---------------------------------------------------------------------------------------------------
# the Observer's view of previous observations


def strip_group_tags(text: str) -> str:
    """``text`` without ``<observation-group …>`` and ``</observation-group>`` tags (their content kept;
    a tag alone on its line takes the line with it)."""
    return _GROUP_TAG.sub("", text)


def _important(line: str) -> bool:
    return "🔴" in line


def truncate_observations(text: str, budget: int, tokenizer: Tokenizer) -> tuple[str, bool]:
    """Previous observations cut to ``budget`` tokens for the Observer (spec §2.9.1
    ``previousObserverTokens``, Mastra's ``truncateObservationsToTokenBudget``).

    Keeps 🔴 lines of the older part (newest first, each with its ``Date:`` header) within half the
    budget, and the most recent lines (the tail) in the rest; the kept 🔴 lines come first, in their
    original order, then a line ``[… N earlier observation lines omitted …]``, then the tail.

    Args:
        text: the observations.
        budget: the most tokens of the result; 0 omits the observations.
        tokenizer: counts tokens.

    Returns:
        ``(kept text, whether anything was cut)``; the text itself and ``False`` when it fits.

    Raises:
        ValueError: a negative ``budget``.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if budget == 0:
        return "", text != ""
    if tokenizer.count(text) <= budget:
        return text, False
    lines = text.split("\n")
    costs = [tokenizer.count(line) + 1 for line in lines]
    marker_cost = tokenizer.count(f"[… {len(lines)} earlier observation lines omitted …]") + 1
    available = budget - marker_cost

    def tail_start(room: int) -> tuple[int, int]:
        start, used = len(lines), 0
        while start > 0 and used + costs[start - 1] <= room:
            start -= 1
            used += costs[start]
        while start < len(lines) and not lines[start].strip():  # no blank line first
            used -= costs[start]
            start += 1
        return start, used

    # 🔴 lines of the part the tail leaves out may take up to half the budget, newest first
    start, _ = tail_start(available)
    chosen: set[int] = set()
    spent = 0
    headers = [i for i in range(start) if _DATE_HEADER.match(lines[i])]
    for i in reversed(range(start)):
        if not _important(lines[i]):
            continue
        header = next((h for h in reversed(headers) if h < i), None)
        extra = costs[i] + (costs[header] if header is not None and header not in chosen else 0)
        if spent + extra > available // 2:
            continue
        chosen.add(i)
        if header is not None:
            chosen.add(header)
        spent += extra
    start, _ = tail_start(available - spent)
    start = max(start, max(chosen, default=-1) + 1)

    def build(kept: list[int], first: int) -> str:
        omitted = first - len(kept)
        head = [lines[i] for i in sorted(kept)]
        marker = [f"[… {omitted} earlier observation lines omitted …]"] if omitted > 0 else []
        return "\n".join([*head, *marker, *lines[first:]]).strip("\n")

    kept = sorted(chosen)
    result = build(kept, start)
    # the per-line sum is an estimate: trim until the whole really fits
    while tokenizer.count(result) > budget and (kept or start < len(lines)):
        if kept:
            kept.pop(0)
        else:
            start += 1
        result = build(kept, start)
    if tokenizer.count(result) > budget:  # not even the marker fits
        return "", True
    return result, True
