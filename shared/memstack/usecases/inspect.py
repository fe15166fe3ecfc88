"""Looking into memory without changing it: the token cost of each layer of an assembled context
(``context_layers``) and the state of a resource's search index (``IndexHealth``, ``index_health``).

These answer Memstack Studio's "what the model sees" and "index health" views (and the CLI's), over the
same ports as the turn; nothing here writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from memstack.context import (
    MESSAGE_OVERHEAD_TOKENS,
    ModelContext,
    SystemMessage,
    count_tokens,
    render_openai,
)
from memstack.model import Message, Thread
from memstack.observation.context import CONTINUATION_ID
from memstack.ports import IndexState, Tokenizer
from memstack.scope import Scope
from memstack.usecases.checks import check_limit
from memstack.usecases.core import Core

if TYPE_CHECKING:
    from collections.abc import Sequence

    from memstack.usecases.turns import Turns

LayerName = Literal[
    "instructions",
    "working_memory",
    "recall",
    "observations",
    "reminders",
    "history",
    "recalled",
    "context",
    "message",
    "tools",
]

IndexStatus = Literal["indexed", "not_indexed", "stale", "unsearchable"]
"""A message's index state (``index_health``)."""

MAX_HEALTH_MESSAGES = 100_000
"""The most messages one ``index_health`` call reads (``limit``'s ceiling)."""

MAX_HEALTH_SAMPLES = 50
"""How many unhealthy messages ``IndexHealth.samples`` names."""

_PAGE = 500


@dataclass(frozen=True, slots=True)
class LayerTokens:
    """One layer of an assembled context and what it costs.

    Attributes:
        layer: ``instructions``, ``working_memory``, ``recall`` (the cross-thread block),
            ``observations`` (system messages), ``reminders`` (the observational layer's
            ``<system-reminder>`` user messages), ``history``, ``recalled`` (same-thread recall hits
            interleaved with the history), ``context`` (call-time messages), ``message`` (the new message)
            or ``tools`` (the tool definitions).
        role: ``system``, ``conversation`` or ``tools``.
        messages: how many Memstack messages (system messages, or conversation messages) the layer holds;
            0 for ``tools``, whose count is ``tools``.
        tools: tool definitions (``tools`` layer only).
        tokens: the layer's tokens as ``ModelContext.token_count`` counts them (tiktoken ``o200k_base``,
            ``MESSAGE_OVERHEAD_TOKENS`` per chat message). A conversation layer is counted rendered on its
            own, so a tool call and its result in different layers count as unpaired.
    """

    layer: LayerName
    role: Literal["system", "conversation", "tools"]
    messages: int
    tokens: int
    tools: int = 0


def context_layers(ctx: ModelContext, *, context_count: int, has_message: bool) -> list[LayerTokens]:
    """The layers of ``ctx`` in the order the model reads them, each with its token count.

    Args:
        ctx: an assembled context (``Memory.context``); its ``tokenizer`` counts (0 tokens without one).
        context_count: how many call-time context messages the caller passed (``context=``).
        has_message: whether a new message was passed (it is the conversation's last message).

    Returns:
        ``LayerTokens`` for every layer present: the system layers in order of appearance (consecutive
        messages of one kind are one layer), then the conversation's by their first message (same-thread
        recall hits are older than the history they are interleaved with), then ``tools``.
    """
    tokenizer = ctx.tokenizer
    out: list[LayerTokens] = []
    for system in ctx.system:
        tokens = _system_tokens(tokenizer, system.text)
        if out and out[-1].layer == system.kind:
            last = out[-1]
            out[-1] = LayerTokens(last.layer, "system", last.messages + 1, last.tokens + tokens)
        else:
            out.append(LayerTokens(system.kind, "system", 1, tokens))
    groups = _conversation_groups(ctx, context_count=context_count, has_message=has_message)
    for name, members in groups.items():
        tokens = count_tokens(tokenizer, render_openai([], members), []) if tokenizer else 0
        out.append(LayerTokens(name, "conversation", len(members), tokens))
    if ctx.tools:
        tokens = tokenizer.count(json.dumps(list(ctx.tools), ensure_ascii=False)) if tokenizer else 0
        out.append(LayerTokens("tools", "tools", 0, tokens, tools=len(ctx.tools)))
    return out


@dataclass(frozen=True)
class ContextInspection:
    """What the model sees for a turn, explained (``Memory.inspect_context``, ``POST …/inspect``).

    Attributes:
        layers: the layers in the order the model reads them, each with its tokens (``context_layers``).
        token_count: tokens of the whole OpenAI request (messages and tools), as ``ModelContext`` counts.
        system, messages, history_ids, recalled_ids: the context, as ``ModelContext`` has them.
        requests: the exact request bodies by provider: ``openai`` (``{messages, tools?}``), ``bedrock``
            (Converse: ``{system, messages, toolConfig?}``) and ``anthropic`` (``{system?, messages, tools?}``),
            without the model id.
    """

    layers: list[LayerTokens]
    token_count: int
    system: list[SystemMessage]
    messages: list[Message]
    history_ids: list[str]
    recalled_ids: list[str]
    requests: dict[str, dict[str, Any]]


def inspect_context(ctx: ModelContext, *, message_given: bool, context: object) -> ContextInspection:
    """``ctx`` explained: its layers with their tokens, the token total and the provider requests.

    Args:
        ctx: the context ``Memory.context`` assembled.
        message_given: whether a new message was passed to it.
        context: the call-time ``context`` it was passed (a message, a list of them, or ``None``).
    """
    count = 0 if context is None else len(context) if isinstance(context, list | tuple) else 1
    return ContextInspection(
        layers=context_layers(ctx, context_count=count, has_message=message_given),
        token_count=ctx.token_count,
        system=list(ctx.system),
        messages=list(ctx.messages),
        history_ids=list(ctx.history_ids),
        recalled_ids=[m.id for m in ctx.recalled],
        requests={"openai": ctx.to_openai(), "bedrock": ctx.to_bedrock(), "anthropic": ctx.to_anthropic()},
    )


def _system_tokens(tokenizer: Tokenizer | None, text: str) -> int:
    return MESSAGE_OVERHEAD_TOKENS + tokenizer.count(text) if tokenizer else 0


def _conversation_groups(
    ctx: ModelContext, *, context_count: int, has_message: bool
) -> dict[LayerName, list[Message]]:
    """The conversation's messages by layer, layers in order of their first message: history and recall
    by the ids the context names, the new message last, the call-time messages just before it, and the
    observational reminders by their ids (``om-continuation``, ``om-gap-…``) wherever they sit."""
    history, recalled = set(ctx.history_ids), {m.id for m in ctx.recalled}
    tail = len(ctx.messages) - (1 if has_message else 0)
    given_from = tail - context_count
    groups: dict[LayerName, list[Message]] = {}
    for i, message in enumerate(ctx.messages):
        name: LayerName
        if i >= tail:
            name = "message"
        elif message.id == CONTINUATION_ID or message.id.startswith("om-gap-"):
            name = "reminders"
        elif i >= given_from:
            name = "context"
        elif message.id in history:
            name = "history"
        elif message.id in recalled:
            name = "recalled"
        else:
            name = "history"
        groups.setdefault(name, []).append(message)
    return groups


@dataclass(frozen=True, slots=True)
class IndexSample:
    """A message whose index entries do not match it: ``state`` ``not_indexed`` (never indexed, or saved
    again since) or ``stale`` (indexed from other content, thread metadata or another embedder)."""

    thread_id: str
    message_id: str
    seq: int
    state: IndexStatus


@dataclass(frozen=True, slots=True)
class IndexHealth:
    """How well a resource's search index matches its stored messages.

    Attributes:
        resource_id: the resource read.
        embedding_model: the embedder recall searches with (``Embedder.model_id``).
        dimension: the index's vector dimension.
        threads: threads read. messages: messages read.
        indexed: messages whose index mark equals what indexing them now would write.
        not_indexed: searchable messages without a mark (never indexed, or saved again since).
        stale: messages marked from other content, thread metadata or another embedder (re-index them).
        unsearchable: messages without searchable text and without a mark (nothing to index).
        complete: ``False`` when ``limit`` messages were read before the end.
        samples: up to ``MAX_HEALTH_SAMPLES`` ``not_indexed``/``stale`` messages, in thread and seq order.
    """

    resource_id: str
    embedding_model: str
    dimension: int
    threads: int = 0
    messages: int = 0
    indexed: int = 0
    not_indexed: int = 0
    stale: int = 0
    unsearchable: int = 0
    complete: bool = True
    samples: list[IndexSample] = field(default_factory=list)


def index_health(core: Core, scope: Scope, *, limit: int = 10_000) -> IndexHealth:
    """Compare every message of the resource (up to ``limit``) with its index mark.

    A message's mark (``MemoryStore.get_index_state``) is the fingerprint of what was indexed for it:
    embedder, chunks, the previous message's text, order, metadata and the index text's version
    (``SemanticRecall.planned_mark``). Reads threads by creation,
    their messages by ``seq`` in pages of 500, one index-state read per page; writes nothing.

    Args:
        core: the memory's core (store, recall engine, options).
        scope: the resource (``Scope.resource``).
        limit: the most messages to read (1..``MAX_HEALTH_MESSAGES``).

    Raises:
        InvalidInput: ``limit`` out of range (field ``limit``). Whatever the store raises.
    """
    limit = check_limit(limit, "limit", MAX_HEALTH_MESSAGES)
    rid = scope.resource_id
    options = core.options.semantic_recall
    counts: dict[str, int] = dict.fromkeys(_COUNTS, 0)
    samples: list[IndexSample] = []
    for thread in _threads(core, rid):
        # one message past the limit is read to tell "exactly limit" from "more than limit"; a thread
        # counts as read unless that one message is all that was read of it
        counts["threads"] += 1
        before = counts["messages"]
        previous: Message | None = None  # a message's keyword context is the one before it
        for page in _message_pages(core, thread, limit + 1 - counts["messages"]):
            room = limit - counts["messages"]
            if room == 0:
                counts["threads"] -= counts["messages"] == before
                return _health(core, rid, counts, samples, complete=False)
            states = core.store.get_index_state(rid, [m.id for m in page])
            for message in page[:room]:
                plan = core.recall.planned_mark(thread, message, options, previous)
                previous = message
                state = _state(states.get(message.id), plan.fingerprint, plan.chunks)
                counts[state] += 1
                counts["messages"] += 1
                if state in ("not_indexed", "stale") and len(samples) < MAX_HEALTH_SAMPLES:
                    samples.append(IndexSample(thread.id, message.id, message.seq, state))
            if len(page) > room:
                return _health(core, rid, counts, samples, complete=False)
    return _health(core, rid, counts, samples, complete=True)


_COUNTS = ("threads", "messages", "indexed", "not_indexed", "stale", "unsearchable")


def _health(
    core: Core, resource_id: str, counts: dict[str, int], samples: list[IndexSample], *, complete: bool
) -> IndexHealth:
    return IndexHealth(
        resource_id=resource_id,
        embedding_model=core.embedder.model_id,
        dimension=core.index.dimension,
        complete=complete,
        samples=samples,
        **counts,
    )


def _state(mark: IndexState | None, planned: str, chunks: int) -> IndexStatus:
    fingerprint = mark.fingerprint if mark is not None else None
    if fingerprint is None:
        return "not_indexed" if chunks else "unsearchable"
    return "indexed" if fingerprint == planned else "stale"


def _threads(core: Core, resource_id: str) -> Iterator[Thread]:
    cursor: str | None = None
    while True:
        page = core.store.list_threads(resource_id, order_by="created_at", direction="asc", cursor=cursor)
        yield from page.threads
        cursor = page.next_cursor
        if cursor is None:
            return


def _message_pages(core: Core, thread: Thread, budget: int) -> Iterator[list[Message]]:
    after = 0
    while budget > 0:
        page = core.store.list_messages(
            thread.resource_id, thread.id, limit=min(_PAGE, budget), after_seq=after
        )
        if not page:
            return
        yield page
        budget -= len(page)
        after = page[-1].seq


class Inspection:
    """The looking-into part of ``Memory``'s API (read-only): ``Memory`` inherits it; ``_core`` and
    ``_turns`` are its use cases."""

    _core: Core
    _turns: Turns

    def inspect_context(
        self,
        *,
        thread_id: str,
        resource_id: str,
        message: Message | dict[str, Any] | str | None = None,
        instructions: str | Sequence[str] | None = None,
        context: Sequence[Message | dict[str, Any] | str] | None = None,
        options: dict[str, Any] | None = None,
    ) -> ContextInspection:
        """``Memory.context(...)`` explained: the layers in order with their tokens, and the OpenAI, Bedrock
        and Anthropic requests (``inspect_context``). Takes and raises what ``context`` does."""
        scope = Scope.of(resource_id, thread_id)
        ctx = self._turns.context(
            scope, message=message, instructions=instructions, context=context, overrides=options
        )
        return inspect_context(ctx, message_given=message is not None, context=context)

    def index_health(self, *, resource_id: str, limit: int = 10_000) -> IndexHealth:
        """How the resource's search index matches its first ``limit`` messages (``index_health``).
        Raises ``InvalidInput``."""
        return index_health(self._core, Scope.resource(resource_id), limit=limit)
