"""What the model sees: the ``ModelContext`` of one turn, its rendering to OpenAI chat messages, the
cross-thread recall block, the tool-call filter and the token budget (spec §2.10–2.11, §3.5).

Order (DESIGN.md "The layers and what the model sees"):
1. caller instructions; 2. working memory; 3. cross-thread recall block; 4. observational memory (a later
issue); 5. history with same-thread recall hits interleaved by ``seq``; 6. call-time context messages;
7. the new user message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from memstack.model import (
    FilePart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from memstack.ports import Tokenizer
from memstack.text import to_json_text

if TYPE_CHECKING:  # the option models are built with the Memory, not by a handler's import of the API
    from memstack.config import MessageHistoryOptions, ToolCallFilterOptions

SystemKind = Literal["instructions", "working_memory", "recall", "observations"]

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens counted per chat message for role and separators (OpenAI's published estimate is 3–4)."""

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")

ToolPair = tuple[ToolCallPart, ToolResultPart]


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """One system message and the layer it comes from."""

    text: str
    kind: SystemKind


@dataclass(frozen=True)
class ModelContext:
    """Everything the model is given for one turn.

    Attributes:
        system: system messages in layer order.
        messages: the conversation: history (with same-thread recall interleaved), call-time context
            messages, then the new message.
        tools: OpenAI function definitions (the working-memory tool when enabled).
        recalled: every message semantic recall brought in (same-thread and cross-thread, with neighbours).
        history_ids: ids of the messages that came from the thread's history.
        tokenizer: counts ``token_count`` (on first access, so a caller that never reads it never pays).
        last_seq: the thread's last ``seq`` when it was read (0: no message yet); pass it back as
            ``save_messages(expected_last_seq=...)`` to refuse a save into a thread that moved on.
        versions: what the model was shown, as versions later writes check (``working_memory``: the
            document's version). ``apply_tool_call(context=...)`` checks it and records in it the version
            the model has seen since (its own write, or the current document shown in an error result).
    """

    system: list[SystemMessage]
    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)
    recalled: list[Message] = field(default_factory=list)
    history_ids: list[str] = field(default_factory=list)
    tokenizer: Tokenizer | None = field(default=None, repr=False, compare=False)
    last_seq: int = 0
    versions: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def working_memory_version(self) -> str | None:
        """The version of the working-memory document the model was shown (``None``: not shown)."""
        return self.versions.get("working_memory")

    @cached_property
    def token_count(self) -> int:
        """Tokens of the rendered ``to_openai()`` messages and tools (tiktoken ``o200k_base``); 0 without a
        tokenizer."""
        if self.tokenizer is None:
            return 0
        return count_tokens(self.tokenizer, render_openai(self.system, self.messages), self.tools)

    @property
    def counted_tokens(self) -> int | None:
        """``token_count`` if it has been computed already (a token budget was applied), else ``None``
        without counting: for a caller that must not load the tokenizer (~250 ms of CPU the first time in a
        process) just to report a number nobody asked for."""
        value = self.__dict__.get("token_count")
        return value if isinstance(value, int) else None

    @property
    def recalled_ids(self) -> list[str]:
        """Ids of ``recalled``, in its order: the name ``RemoteContext`` (the HTTP clients' context, which
        carries the ids only) gives them, so code reading ids runs against ``Memory`` and a client alike."""
        return [m.id for m in self.recalled]

    @property
    def message_ids(self) -> set[str]:
        """Ids of every stored message the model is shown (history and recall)."""
        return set(self.history_ids) | set(self.recalled_ids)

    def to_openai(self) -> dict[str, Any]:
        """Chat-completions input: ``{"messages": [...], "tools": [...]}`` (``tools`` omitted when empty)."""
        out: dict[str, Any] = {"messages": render_openai(self.system, self.messages)}
        if self.tools:
            out["tools"] = list(self.tools)
        return out

    def to_bedrock(self) -> dict[str, Any]:
        """Amazon Bedrock ``Converse`` input: ``{"system", "messages", "toolConfig"?}`` with the same steps,
        tool pairing and tools as ``to_openai()`` (``memstack.render.converse``); pass it to
        ``bedrock_runtime.converse(modelId=..., **ctx.to_bedrock())``."""
        from memstack.render.converse import to_converse_request

        return to_converse_request(render_openai(self.system, self.messages), self.tools)

    def to_anthropic(self) -> dict[str, Any]:
        """Anthropic Messages input: ``{"system"?, "messages", "tools"?}`` with the same steps, tool pairing
        and tools as ``to_openai()`` (``memstack.render.anthropic``); pass it to
        ``anthropic.Anthropic().messages.create(model=..., max_tokens=..., **ctx.to_anthropic())``."""
        from memstack.render.anthropic import to_anthropic_request

        return to_anthropic_request(render_openai(self.system, self.messages), self.tools)


# ---------------------------------------------------------------------------------------------------
# rendering


def _author_prefix(message: Message) -> str:
    return f"{message.author.label}: " if message.author is not None else ""


def _content_text(message: Message) -> str:
    return _parts_text(message.parts)


def _parts_text(parts: Sequence[Part]) -> str:
    texts = []
    for p in parts:
        if isinstance(p, TextPart):
            texts.append(p.text)
        elif isinstance(p, FilePart):
            texts.append(f"[file {p.name or p.url} ({p.media_type}): {p.url}]")
        elif isinstance(p, ImagePart) and p.caption:
            texts.append(f"[image: {p.caption}]")
    return "\n".join(t for t in texts if t)


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    text = _author_prefix(message) + _content_text(message)
    images = [p for p in message.parts if isinstance(p, ImagePart) and p.url.startswith(("http", "data:"))]
    if not images:
        return text
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "image_url", "image_url": {"url": p.url}} for p in images]
    return content


@dataclass(frozen=True, slots=True)
class Step:
    """One model step of a stored message: what the model wrote, then the tool calls that ended the step,
    then the results of those calls stored in the same message.

    Attributes:
        content: text, file, image and reasoning parts of the step, in stored order.
        calls: the tool calls that end the step, in order.
        results: tool results stored in the same message after those calls, in order.
    """

    content: tuple[Part, ...] = ()
    calls: tuple[ToolCallPart, ...] = ()
    results: tuple[ToolResultPart, ...] = ()


def message_steps(message: Message) -> list[Step]:
    """Split a message's parts into model steps at its tool boundaries, in stored order.

    An agent loop stores a multi-step assistant turn as one message (the AI SDK's ``UIMessage`` with
    ``step-start`` parts; Mastra keeps them so): ``[tool_call, tool_result, text]`` is a call, its result,
    then the answer written after reading it. A step ends at its tool calls; content that follows a call,
    or a call that follows a result, starts the next step. Every renderer shows the steps in this order so
    an answer never precedes the tool result it depends on (``render_openai``, ``cross_thread_block``, and
    the Bedrock and Anthropic renderers through ``render_openai``).

    Returns:
        At least one step (an empty one for a message without parts); results stay with the step whose
        calls precede them.
    """
    steps: list[Step] = []
    content: list[Part] = []
    calls: list[ToolCallPart] = []
    results: list[ToolResultPart] = []
    for part in message.parts:
        starts_next = (isinstance(part, ToolCallPart) and results) or (
            not isinstance(part, (ToolCallPart, ToolResultPart)) and (calls or results)
        )
        if starts_next:
            steps.append(Step(tuple(content), tuple(calls), tuple(results)))
            content, calls, results = [], [], []
        if isinstance(part, ToolCallPart):
            calls.append(part)
        elif isinstance(part, ToolResultPart):
            results.append(part)
        else:
            content.append(part)
    steps.append(Step(tuple(content), tuple(calls), tuple(results)))
    return steps


def link_tool_calls(messages: Sequence[Message]) -> tuple[dict[int, list[ToolPair]], list[list[int]]]:
    """Pair each assistant tool call with its result by position, as chat-completions requires.

    A call is answered by the first result with its id in the same message or in the messages right after
    it (of any role — Anthropic-style user messages carry results too), up to the first message that
    answers none of its calls or makes calls of its own. Call ids only pair within that run, so an id
    reused in a later turn never links two turns.

    Returns:
        ``pairs``: message index → its answered ``(call, result)`` pairs, in call order (unanswered calls,
        empty or repeated ids are left out); ``groups``: message indexes that must stay together (an
        assistant message with the messages answering it), in order, covering every index once.
    """
    pairs: dict[int, list[ToolPair]] = {}
    groups: list[list[int]] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        calls: dict[str, ToolCallPart] = {}
        if message.role == "assistant":
            for p in message.parts:
                if isinstance(p, ToolCallPart) and p.id and p.id not in calls:
                    calls[p.id] = p
        group = [i]
        if calls:
            answered: dict[str, ToolResultPart] = {}
            j = i
            while j < n:
                here = messages[j]
                if j > i and any(isinstance(p, ToolCallPart) for p in here.parts):
                    break
                found = [
                    p
                    for p in here.parts
                    if isinstance(p, ToolResultPart)
                    and p.tool_call_id in calls
                    and p.tool_call_id not in answered
                ]
                if j > i and not found:
                    break
                for p in found:
                    answered[p.tool_call_id] = p
                if j > i:
                    group.append(j)
                j += 1
                if len(answered) == len(calls):
                    break
            pairs[i] = [(c, answered[cid]) for cid, c in calls.items() if cid in answered]
        groups.append(group)
        i = group[-1] + 1
    return pairs, groups


def _function_name(name: str) -> str:
    """A function name chat-completions accepts (``^[a-zA-Z0-9_-]{1,64}$``)."""
    return _NAME_OK.sub("_", name)[:64] or "tool"


def _render_content(message: Message) -> dict[str, Any] | None:
    """A message's own content (no tool parts) as one chat message, or ``None`` if it has none."""
    if message.role == "user" or message.role == "tool":
        content = _user_content(message)
        if not content:
            return None
        item: dict[str, Any] = {"role": "user", "content": content}
        if message.author is not None:
            name = _NAME_OK.sub("_", message.author.label)[:64]
            if name:
                item["name"] = name
        return item
    text = _content_text(message)
    if not text:
        return None
    if message.role == "system":
        return {"role": "system", "content": text}
    return {"role": "assistant", "content": _author_prefix(message) + text}


def render_openai(system: Sequence[SystemMessage], messages: Sequence[Message]) -> list[dict[str, Any]]:
    """OpenAI chat-completions messages for system messages plus a conversation.

    Tool calls become ``assistant.tool_calls`` followed by one ``role: tool`` message per answered call
    (``link_tool_calls``); a call without its result, or a result without its call, is left out, since
    the API rejects unpaired ones (Mastra's ``filterIncompleteToolCalls``). A multi-step assistant message
    renders step by step (``message_steps``): ``assistant{tool_calls}`` → ``tool`` → ``assistant{text}``,
    so the answer follows the results it read. Reasoning parts are not sent. Authors are shown as
    ``Name: text`` and as the ``name`` field of user messages.
    """
    pairs, groups = link_tool_calls(messages)
    out: list[dict[str, Any]] = [{"role": "system", "content": s.text} for s in system]
    for group in groups:
        answered = pairs.get(group[0], [])
        if answered:
            out += _render_steps(messages[group[0]], answered)
            rest = group[1:]
        else:
            rest = group
        for index in rest:
            item = _render_content(messages[index])
            if item is not None:
                out.append(item)
    return out


def _render_steps(head: Message, answered: list[ToolPair]) -> list[dict[str, Any]]:
    """An assistant message with answered tool calls, one chat turn per step: each step's text with its
    answered calls, then their ``tool`` messages; a step whose calls all went unanswered keeps its text."""
    by_id = {call.id: (call, result) for call, result in answered}
    out: list[dict[str, Any]] = []
    for step in message_steps(head):
        text = _parts_text(step.content)
        content = (_author_prefix(head) + text) if text else None
        mine = [by_id.pop(c.id) for c in step.calls if c.id in by_id]
        if not mine:
            if content is not None:
                out.append({"role": "assistant", "content": content})
            continue
        out.append({"role": "assistant", "content": content, "tool_calls": [_tool_call(c) for c, _ in mine]})
        out += [{"role": "tool", "tool_call_id": c.id, "content": to_json_text(r.result)} for c, r in mine]
    return out


def _tool_call(call: ToolCallPart) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {
            "name": _function_name(call.name),
            "arguments": json.dumps(call.args, ensure_ascii=False),
        },
    }


def tool_messages(message: Message) -> list[dict[str, Any]]:
    """The ``role: tool`` chat-completions messages of a message's tool results, to send right after the
    assistant message that made the calls — e.g. the result ``Memory.apply_tool_call`` returns.

    Returns:
        One ``{"role": "tool", "tool_call_id", "content"}`` per ``ToolResultPart``, in order.
    """
    return [
        {"role": "tool", "tool_call_id": p.tool_call_id, "content": to_json_text(p.result)}
        for p in message.parts
        if isinstance(p, ToolResultPart)
    ]


def _clock(message: Message) -> str:
    t = message.created_at
    hour = t.hour % 12 or 12
    return f"{hour}:{t.minute:02d} {'AM' if t.hour < 12 else 'PM'}"


def _speaker(message: Message) -> str:
    label = {"user": "User", "assistant": "Assistant", "tool": "Tool", "system": "System"}[message.role]
    return f"{label} ({message.author.label})" if message.author is not None else label


def _plain(message: Message) -> str:
    bits: list[str] = []
    for step in message_steps(message):
        bits.append(_parts_text(step.content))
        bits += [f"[called {p.name}({to_json_text(p.args)})]" for p in step.calls]
        bits += [f"[{p.name or 'tool'} returned: {to_json_text(p.result)}]" for p in step.results]
    return " ".join(b for b in bits if b)


def cross_thread_block(messages: Iterable[Message]) -> str:
    """The one system message holding recall hits from the resource's other threads (spec §3.5).

    Messages are ordered by time, then thread, then ``seq``; a date line starts each new UTC day; each
    message is on its own line (the upstream formatter ran them together, spec §7.8) with English month
    names (not the machine's locale).
    """
    ordered = sorted(messages, key=lambda m: (m.created_at, m.thread_id, m.seq, m.id))
    lines = [
        "The following messages were remembered from other conversations with this user:",
        "<remembered_from_other_conversation>",
    ]
    day = None
    for m in ordered:
        d = m.created_at.date()
        if d != day:
            day = d
            lines.append(f"the following messages are from {d.year}, {_MONTHS[d.month - 1]}, {d.day}")
        lines.append(f"Message from previous conversation at {_clock(m)}: {_speaker(m)}: {_plain(m)}")
    lines.append("<end_remembered_from_other_conversation>")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# tool-call filter and token budget


def filter_tool_calls(messages: Sequence[Message], options: ToolCallFilterOptions) -> list[Message]:
    """Leave out tool calls and results of the named tools (all tools when ``exclude`` is ``None``);
    messages left with no parts are dropped (spec §2.10 ``ToolCallFilter``). Storage is untouched.

    A result whose tool cannot be told (no name, and its call is not among ``messages``, as when recall
    brings a neighbour without its call) is left out too: an excluded tool's output must not slip through.
    """
    names: dict[str, str] = {p.id: p.name for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    exclude = None if options.exclude is None else set(options.exclude)

    def dropped(name: str) -> bool:
        return exclude is None or not name or name in exclude

    out: list[Message] = []
    for m in messages:
        parts = tuple(
            p
            for p in m.parts
            if not (isinstance(p, ToolCallPart) and dropped(p.name))
            and not (isinstance(p, ToolResultPart) and dropped(p.name or names.get(p.tool_call_id, "")))
        )
        if parts:
            out.append(m if len(parts) == len(m.parts) else m.model_copy(update={"parts": parts}))
    return out


def count_tokens(
    tokenizer: Tokenizer, rendered: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
) -> int:
    """Tokens of rendered chat messages plus tool definitions (content, tool calls, per-message overhead)."""
    total = 0
    for item in rendered:
        total += MESSAGE_OVERHEAD_TOKENS + _item_tokens(tokenizer, item)
    if tools:
        total += tokenizer.count(json.dumps(list(tools), ensure_ascii=False))
    return total


def _item_tokens(tokenizer: Tokenizer, item: dict[str, Any]) -> int:
    content = item.get("content")
    n = 0
    if isinstance(content, str):
        n += tokenizer.count(content)
    elif isinstance(content, list):
        for c in content:
            n += tokenizer.count(c["text"]) if c.get("type") == "text" else 765  # spec §2.10: images flat
    for call in item.get("tool_calls") or ():
        n += tokenizer.count(call["function"]["name"]) + tokenizer.count(call["function"]["arguments"])
    return n


def apply_budget(
    ctx: ModelContext,
    *,
    trimmable: set[str],
    budget: MessageHistoryOptions,
    tokenizer: Tokenizer,
) -> ModelContext:
    """Drop the oldest remembered messages (ids in ``trimmable``), a tool call with its result, until the
    context fits ``budget.max_tokens - at_max_remove_tokens``. Does nothing when already within
    ``max_tokens``. System messages, context messages and the new message are never dropped. The result's
    ``token_count`` is counted (``counted_tokens`` is set) whether or not anything was dropped."""
    if ctx.token_count <= budget.max_tokens:
        return ctx
    messages = list(ctx.messages)
    total = ctx.token_count
    removed: set[int] = set()
    for group in link_tool_calls(messages)[1]:
        if total <= budget.target_tokens:
            break
        if all(messages[i].id in trimmable for i in group):
            removed.update(group)
            # a group renders as a whole (a call with its results), so it is measured as a whole
            rendered = render_openai([], [messages[i] for i in group])
            total -= sum(MESSAGE_OVERHEAD_TOKENS + _item_tokens(tokenizer, item) for item in rendered)
    kept = [m for i, m in enumerate(messages) if i not in removed]
    gone = {messages[i].id for i in removed}
    trimmed = replace(
        ctx,
        messages=kept,
        tokenizer=tokenizer,
        recalled=[m for m in ctx.recalled if m.id not in gone],
        history_ids=[i for i in ctx.history_ids if i not in gone],
    )
    # a budget that applied has its count (``counted_tokens``): the trimmed context is counted whole,
    # exactly, rather than trusting the running subtraction, with the tokenizer the budget already loaded
    trimmed.token_count  # noqa: B018 - computes and caches the cached property
    return trimmed
