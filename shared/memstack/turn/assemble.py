"""The turn assembler: the layers' contributions → one ``ModelContext`` (DESIGN.md "The layers and what the
model sees", spec §2.11).

Order: the caller's instructions; each layer's system messages and block, in layer order; then the
layers' lead messages (the continuation reminder); the conversation — every layer's stored messages of
this thread merged by ``seq`` and de-duplicated by id; the call-time context messages; a marker layer's
message; the new message. The caller's own messages stand for stored copies with the same id. The token
budget (``message_history``) trims the oldest conversation messages first, a tool call with its result,
then the blocks' oldest messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memstack.config import MemoryOptions
from memstack.context import ModelContext, SystemMessage, apply_budget, filter_tool_calls
from memstack.layers.base import Block, Contribution, Turn
from memstack.model import Message
from memstack.ports import Tokenizer


def assemble(
    turn: Turn,
    instructions: Sequence[str],
    contributions: Sequence[Contribution],
    tokenizer: Tokenizer,
    *,
    last_seq: int = 0,
) -> ModelContext:
    """Build the turn's ``ModelContext`` from the layers' contributions, in layer order.

    Args:
        instructions: the caller's system texts (validated, blank ones dropped), shown first.
        contributions: one per layer, in the facade's layer order.
        last_seq: the thread's last ``seq`` as read for this turn (``ModelContext.last_seq``).

    Returns:
        The context, within ``message_history.max_tokens`` where trimming can get it there.
    """
    opts = turn.options
    given = {m.id for m in turn.extra} | ({turn.new.id} if turn.new is not None else set())
    conversation = _conversation(contributions, given)
    in_conversation = {m.id for m in conversation}
    blocks = [_block(c.block, opts, given | in_conversation) for c in contributions]
    if opts.tool_call_filter is not None:
        conversation = filter_tool_calls(conversation, opts.tool_call_filter)
    marker = next((c.marker for c in contributions if c.marker is not None), None)
    mark = marker(conversation[-1] if conversation else None, turn.new) if marker else None
    messages = [
        *(m for c in contributions for m in c.lead),
        *conversation,
        *turn.extra,
        *([mark] if mark is not None else []),
        *([turn.new] if turn.new is not None else []),
    ]
    recalled = [m for c in contributions for m in c.recalled if m.id not in given]
    recalled_ids = {m.id for m in recalled}
    history_ids = [m.id for m in conversation if m.id not in recalled_ids]
    tools = [t for c in contributions for t in c.tools]
    versions = {name: v for c in contributions for name, v in c.versions.items()}
    head = [SystemMessage(t, "instructions") for t in instructions]

    def build(shown: list[Message]) -> ModelContext:
        system = list(head)
        for c, block in zip(contributions, blocks, strict=True):
            system += c.system
            if block is not None and block.messages:
                system.append(SystemMessage(block.render(block.messages), block.kind))
        visible = {m.id for m in shown} | {m.id for b in blocks if b is not None for m in b.messages}
        return ModelContext(
            system=system,
            messages=shown,
            tools=tools,
            tokenizer=tokenizer,
            recalled=[m for m in recalled if m.id in visible],
            history_ids=[i for i in history_ids if i in visible],
            last_seq=last_seq,
            versions=versions,
        )

    ctx = build(messages)
    budget = opts.message_history
    if budget is not None and ctx.token_count > budget.max_tokens:
        ctx = apply_budget(ctx, trimmable={m.id for m in conversation}, budget=budget, tokenizer=tokenizer)
        # still over: the blocks give way too, their oldest messages first
        for i in range(len(blocks)):
            while (
                (block := blocks[i]) is not None and block.messages and ctx.token_count > budget.target_tokens
            ):
                blocks[i] = Block(block.kind, block.messages[1:], block.render)
                ctx = build(ctx.messages)
    return ctx


def _conversation(contributions: Sequence[Contribution], given: set[str]) -> list[Message]:
    """Every layer's conversation messages, first contribution wins on a repeated id, ordered by ``seq``;
    messages the caller passed in this turn are left out (theirs stand for the stored copies)."""
    seen = set(given)
    merged: list[Message] = []
    for c in contributions:
        for m in c.conversation:
            if m.id not in seen:
                seen.add(m.id)
                merged.append(m)
    return sorted(merged, key=lambda m: m.seq)


def _block(block: Block | None, opts: MemoryOptions, drop: set[str]) -> Block | None:
    """The block without messages shown elsewhere, oldest first, tool-call filter applied."""
    if block is None:
        return None
    messages: list[Any] = sorted(
        (m for m in block.messages if m.id not in drop), key=lambda m: (m.created_at, m.thread_id, m.seq)
    )
    if opts.tool_call_filter is not None:
        messages = filter_tool_calls(messages, opts.tool_call_filter)
    return Block(block.kind, messages, block.render)
