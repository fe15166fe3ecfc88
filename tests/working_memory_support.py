"""The model's ``updateWorkingMemory`` call as OpenAI sends it, for tests of tool calls."""

from __future__ import annotations

import json
from typing import Any


def update_call(call_id: str, memory: str, version: str | None = None) -> dict[str, Any]:
    """An OpenAI tool call replacing the markdown working memory with ``memory``; with ``version``, the
    version the model copied from the system message rides along as the tool's ``version`` argument."""
    arguments = json.dumps({"memory": memory} if version is None else {"memory": memory, "version": version})
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "updateWorkingMemory", "arguments": arguments},
    }
