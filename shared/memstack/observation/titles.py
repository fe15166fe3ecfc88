"""Thread titles (spec §2.6, §3.6): the transcript a title model reads, and one title generation.

Mastra generates a title after the first turn of an untitled thread with a plain completion; Memstack
runs it in the background observation path and never overwrites a title a user set (the
caller's rule: untitled is the empty string).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from memstack.errors import Unavailable
from memstack.model import FilePart, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from memstack.observation.guards import is_refusal
from memstack.observation.parsing import MAX_TITLE_CHARS, clean_title, normal_line, prompt_lines, strip_think
from memstack.observation.prompts import TITLE_INSTRUCTIONS
from memstack.ports import ChatModel
from memstack.text import to_json_text

__all__ = [
    "MAX_TITLE_ANSWER_CHARS",
    "MAX_TITLE_LINE_CHARS",
    "TOOL_TEXT_CHARS",
    "URL_CHARS",
    "generate_title",
    "title_problem",
    "title_transcript",
]

TOOL_TEXT_CHARS = 200
"""Tool arguments and results are cut to this many characters in the title transcript (spec §2.6)."""

URL_CHARS = 100
"""File and image URLs are cut to this many characters in the title transcript (spec §2.6)."""

MAX_TITLE_ANSWER_CHARS = 1_000
"""A title model's answer longer than this (reasoning removed) is a text, not a title, and is refused."""

MAX_TITLE_LINE_CHARS = 2 * MAX_TITLE_CHARS
"""An answer whose first line is longer than this is a sentence or a paragraph, not a title: cutting it to
``MAX_TITLE_CHARS`` would save the start of a reply as the thread's name; refused."""

_SPEAKERS = {"user": "User", "assistant": "Assistant", "tool": "Tool", "system": "System"}
_MARKUP = re.compile(r"^\s*(?:</?[A-Za-z][\w-]*(?:\s[^>]*)?/?>|\{|\[\s*[\[{\"\d]|```)")
_TRANSCRIPT_LABEL = re.compile(
    r"^\s*(?:(?:User|Assistant|Tool|System)(?::| added \S+ file:)|Reasoning:|Tool (?:Call|Result) \S+:)"
)


def title_transcript(messages: Sequence[Message]) -> str:
    """The transcript a title model reads (spec §2.6 ``formatMessagesForTitle``), one line per part:

    ``User: …``, ``Assistant: …`` (text parts), ``Reasoning: …``, ``Tool Call <name>: <args JSON[:200]>``,
    ``Tool Result <name>: <result[:200]>``, and ``User added <media type> file: <url[:100]>`` for files
    and images (the speaker is the message's role). Empty text parts are skipped.
    """
    names = {p.id: p.name for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    lines: list[str] = []
    for message in messages:
        speaker = _SPEAKERS[message.role]
        for part in message.parts:
            if isinstance(part, TextPart):
                if part.text.strip():
                    lines.append(f"{speaker}: {part.text.strip()}")
            elif isinstance(part, ReasoningPart):
                if part.text.strip():
                    lines.append(f"Reasoning: {part.text.strip()}")
            elif isinstance(part, ToolCallPart):
                args = json.dumps(part.args, ensure_ascii=False)[:TOOL_TEXT_CHARS]
                lines.append(f"Tool Call {part.name}: {args}")
            elif isinstance(part, ToolResultPart):
                name = part.name or names.get(part.tool_call_id, "") or "tool"
                lines.append(f"Tool Result {name}: {to_json_text(part.result)[:TOOL_TEXT_CHARS]}")
            elif isinstance(part, FilePart | ImagePart):
                lines.append(f"{speaker} added {part.media_type} file: {part.url[:URL_CHARS]}")
    return "\n".join(lines)


def generate_title(chat: ChatModel, messages: Sequence[Message], *, instructions: str | None = None) -> str:
    """A title for the thread of ``messages``, from one completion of ``chat`` (spec §2.6).

    The system message is ``instructions`` (or ``TITLE_INSTRUCTIONS``), the user message the
    ``title_transcript``. The answer is cleaned by ``memstack.observation.parsing.clean_title``:
    reasoning, a ``Title:`` prefix, quotes and colons removed, the first line only, at most 80
    characters cut on a word boundary. An answer that is not a title (``title_problem``: a refusal,
    markup or JSON, an echo of the transcript or of the prompt, an over-long text) is refused like an
    empty one. No temperature or output cap is sent (the model's defaults).

    Returns:
        The title (non-empty, at most 80 characters).

    Raises:
        Unavailable: the model returned no title or an answer ``title_problem`` refuses (the caller
            keeps the thread untitled and tries again later), or the model call failed (``chat``
            raises it).
    """
    system = instructions if instructions is not None and instructions.strip() else TITLE_INSTRUCTIONS
    transcript = title_transcript(messages)
    answer = chat.complete([{"role": "system", "content": system}, {"role": "user", "content": transcript}])
    text = answer.text or ""
    title = clean_title(text)
    if not title:
        raise Unavailable("the title model returned no title", field="title")
    problem = title_problem(text, transcript=transcript, instructions=system)
    if problem is not None:
        raise Unavailable(f"the title model's answer is not a title ({problem})", field="title")
    return title


def title_problem(answer: str, *, transcript: str, instructions: str) -> str | None:
    """Why a title model's answer must not become the thread's title, or ``None`` when it may. Titles
    are never overwritten (spec §2.6), so a non-title saved once would stay for good.

    Checks, on the answer with its reasoning removed:

    * ``"refusal"``: it opens as a refusal does (``guards.is_refusal``, the reflection's check);
    * ``"markup"``: its first line is a tag (``<observations>``), JSON (``{``, ``[{``) or a code fence;
    * ``"echo of the transcript"``: its first line is a transcript line (``User: …``, ``Assistant: …``,
      ``Tool Call …``) or a line of ``transcript``;
    * ``"echo of the prompt"``: its first line is a line of ``instructions``
      (``parsing.prompt_lines``);
    * ``"over-long"``: over ``MAX_TITLE_ANSWER_CHARS`` in all, or a first line over
      ``MAX_TITLE_LINE_CHARS``.

    Args:
        answer: the model's whole answer.
        transcript: the transcript it was given (``title_transcript``).
        instructions: the system message it was given.
    """
    text = strip_think(answer).strip()
    first = next((line for line in text.split("\n") if line.strip()), "")
    if is_refusal(text):
        return "refusal"
    if _MARKUP.match(first):
        return "markup"
    first_normal = normal_line(first)
    if _TRANSCRIPT_LABEL.match(first) or first_normal in {normal_line(t) for t in transcript.split("\n")}:
        return "echo of the transcript"
    if first_normal in prompt_lines(instructions):
        return "echo of the prompt"
    if len(text) > MAX_TITLE_ANSWER_CHARS or len(first.strip()) > MAX_TITLE_LINE_CHARS:
        return "over-long"
    return None
