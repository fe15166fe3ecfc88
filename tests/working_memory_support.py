"""The model's ``updateWorkingMemory`` call as OpenAI sends it, for tests of tool calls."""

from __future__ import annotations

import json
from typing import Any


def update_call(call_id: str, memory: str) -> dict[str, Any]:
    """An OpenAI tool call replacing the markdown working memory with ``memory``."""
    arguments = json.dumps({"memory": memory})
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "updateWorkingMemory", "arguments": arguments},
    }
