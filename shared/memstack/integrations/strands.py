"""Memstack for Strands Agents (``memstack[strands]``): a session manager that is also a hook provider,
and the working-memory and recall tools as Strands tools.

    from strands import Agent
    from memstack.integrations.strands import MemstackSessionManager

    memory = MemstackSessionManager("trip-1", memory=Memory.local(), resource_id="user-42")
    agent = Agent(system_prompt="You plan trips.", session_manager=memory, tools=memory.tools)
    agent("Any snack ideas?")

Strands keeps the conversation as Bedrock ``Converse`` messages (``agent.messages``) and calls a
``strands.session.SessionManager`` at its lifecycle events (Strands docs, "Session management" and
"Hooks"). ``MemstackSessionManager`` answers them over ``Memory`` or ``MemstackClient``:

* **before each invocation** (``BeforeInvocationEvent``) it assembles the Memstack context for the new user
  message and puts it in place: ``agent.messages`` becomes the history Memstack chose (the last messages,
  or with observational memory the unobserved tail, with same-thread recall interleaved, trimmed to the
  token budget) and ``agent.system_prompt`` becomes the agent's own prompt followed by the memory system
  messages (working memory, cross-thread recall, observations);
* **each message added** (``MessageAddedEvent``) is saved to the thread at once (Strands' contract: persist
  every change as it happens), so the turn is saved as it unfolds;
* **a redaction** (guardrails) replaces the latest saved message in place.

``tools`` are ``update_working_memory`` and ``recall_memories``, bound to this thread and resource (the
model never names them).
"""

from __future__ import annotations

import logging
from typing import Any

from strands.session.session_manager import SessionManager

from memstack.context import render_openai
from memstack.integrations import MemoryApi
from memstack.model import TextPart
from memstack.render.converse import to_converse_request
from memstack.render.inbound import from_converse

__all__ = ["MemstackSessionManager", "memstack_tools"]

logger = logging.getLogger(__name__)


def _user_text(messages: Any) -> str:
    texts = []
    for message in messages or ():
        if message.get("role") == "user":
            texts += [str(b["text"]) for b in message.get("content") or () if "text" in b]
    return "\n".join(t for t in texts if t)


def _for_strands(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Converse messages as Strands keeps them: every ``toolResult`` carries a ``status``."""
    for message in messages:
        for block in message["content"]:
            if "toolResult" in block:
                block["toolResult"].setdefault("status", "success")
    return messages


def memstack_tools(memory: MemoryApi, *, resource_id: str, thread_id: str) -> list[Any]:
    """Strands tools over Memstack for one thread of one resource: ``update_working_memory`` and
    ``recall_memories``.

    Raises:
        ImportError: the ``strands`` extra is not installed.
    """
    from strands import tool

    @tool
    def update_working_memory(memory_markdown: str) -> str:
        """Replace the working memory (what you know about the user) with an updated Markdown document.
        Anything left out is lost, so send the whole document.

        Args:
            memory_markdown: the complete working memory as Markdown.
        """
        memory.update_working_memory(
            thread_id=thread_id,
            resource_id=resource_id,
            working_memory=memory_markdown,
            options={"working_memory": {"enabled": True}},
        )
        return "Working memory updated."

    @tool
    def recall_memories(query: str) -> str:
        """Search the user's earlier conversations for messages about something.

        Args:
            query: what to look for.
        """
        found = memory.recall(thread_id=thread_id, resource_id=resource_id, query=query)
        lines = [
            f"[{m.created_at:%Y-%m-%d} {m.role}] "
            + " ".join(p.text for p in m.parts if isinstance(p, TextPart))
            for m in found.messages
        ]
        return "\n".join(lines) or "Nothing found."

    return [update_working_memory, recall_memories]


class MemstackSessionManager(SessionManager):
    """A Memstack thread as a Strands ``SessionManager`` and hook provider (see the module docstring).

    Args:
        session_id: the thread id.
        memory: a ``Memory`` or a ``MemstackClient``.
        resource_id: the thread's owner; never chosen by the model.
        options: per-call memory options for the context (``Memory.context``'s ``options``).

    Attributes:
        session_id, resource_id, memory; tools: the Strands tools bound to this thread.

    Raises:
        ImportError: on import, when the ``strands`` extra is not installed.
    """

    def __init__(
        self,
        session_id: str,
        *,
        memory: MemoryApi,
        resource_id: str,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.resource_id = resource_id
        self.memory = memory
        self.options = options
        self.tools = memstack_tools(memory, resource_id=resource_id, thread_id=session_id)
        self._base_prompt: Any = None
        self._last_id: str | None = None

    def register_hooks(self, registry: Any, **kwargs: Any) -> None:
        """Strands' session callbacks, plus the context assembly before each invocation."""
        from strands.hooks import BeforeInvocationEvent

        super().register_hooks(registry, **kwargs)
        registry.add_callback(BeforeInvocationEvent, self._before_invocation)

    def initialize(self, agent: Any, **kwargs: Any) -> None:
        """Remember the agent's own system prompt and load the thread's history into it."""
        self._base_prompt = agent.system_prompt
        self._assemble(agent, "")

    def _before_invocation(self, event: Any) -> None:
        self._assemble(event.agent, _user_text(event.messages))

    def _assemble(self, agent: Any, query: str) -> None:
        ctx = self.memory.context(
            thread_id=self.session_id,
            resource_id=self.resource_id,
            message=query or None,
            options=self.options,
        )
        history = ctx.messages[:-1] if query else ctx.messages
        rendered = to_converse_request(render_openai([], history), tool_blocks=True)
        agent.messages = _for_strands(rendered["messages"])
        memory_text = "\n\n".join(s.text for s in ctx.system)
        base = self._base_prompt or ""
        agent.system_prompt = "\n\n".join(t for t in (base, memory_text) if t) or None
        logger.debug(
            "context assembled",
            extra={"thread_id": self.session_id, "messages": len(agent.messages), "system": len(ctx.system)},
        )

    def append_message(self, message: Any, agent: Any, **kwargs: Any) -> None:
        """Save one message the agent added (user input, the model's answer, tool results)."""
        messages = from_converse([message])
        if not messages:
            return
        saved = self.memory.save_messages(
            thread_id=self.session_id, resource_id=self.resource_id, messages=messages
        )
        if saved:
            self._last_id = saved[-1].id

    def redact_latest_message(self, redact_message: Any, agent: Any, **kwargs: Any) -> None:
        """Replace the latest saved message with ``redact_message`` (same id, same place in the thread)."""
        messages = from_converse([redact_message])
        if self._last_id is None or not messages:
            return
        replacement = {**messages[-1], "id": self._last_id}
        self.memory.save_messages(
            thread_id=self.session_id, resource_id=self.resource_id, messages=[replacement]
        )

    def sync_agent(self, agent: Any, **kwargs: Any) -> None:
        """Nothing to do: every message is saved as it is added, and the agent's state is its own."""
