"""Working memory (spec §2.7, §3.1): a markdown document or a JSON object per resource (default) or per
thread, its system message, its ``updateWorkingMemory`` tool and safe concurrent updates.

One job per module:
* ``schema`` — JSON-mode schemas: checking, ``$ref`` following, validation;
* ``merge`` — JSON-mode merge semantics, padding nulls, the empty skeleton;
* ``updates`` — what one update does to the stored document (markdown, JSON, vnext), pure;
* ``service`` — storage slots, size caps and the compare-and-set retry loop;
* ``tools`` — the tool definition per mode and reading a tool call;
* ``instructions`` — the system message variants.
"""

from __future__ import annotations

from memstack.working_memory.instructions import system_message
from memstack.working_memory.service import (
    MAX_INPUT_BYTES,
    MAX_WORKING_MEMORY_CHARS,
    THREAD_METADATA_KEY,
)
from memstack.working_memory.tools import TOOL_NAME, tool_definition

__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_WORKING_MEMORY_CHARS",
    "THREAD_METADATA_KEY",
    "TOOL_NAME",
    "system_message",
    "tool_definition",
]
