"""Renderings of a ``ModelContext`` for model APIs other than OpenAI chat completions.

Each renderer starts from the OpenAI chat-completions rendering (``memstack.context.render_openai``), so
the step order, the tool-call pairing (a call only with its result) and the tool set are decided in one
place and every format shows the model the same conversation:

* ``converse`` — Amazon Bedrock ``Converse`` (``system``, ``messages`` with ``toolUse``/``toolResult``
  blocks, ``toolConfig``); also the message shape of Strands Agents.
* ``anthropic`` — Anthropic Messages (``system``, ``messages`` with ``tool_use``/``tool_result`` blocks,
  ``tools``).

``from_converse`` and ``from_anthropic`` read those messages back as Memstack messages to save.
"""

from __future__ import annotations

from memstack.render.anthropic import to_anthropic_request, to_anthropic_tools
from memstack.render.converse import to_converse_request, to_converse_tools
from memstack.render.inbound import from_anthropic, from_converse

__all__ = [
    "from_anthropic",
    "from_converse",
    "to_anthropic_request",
    "to_anthropic_tools",
    "to_converse_request",
    "to_converse_tools",
]
