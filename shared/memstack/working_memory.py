"""Working memory, first cut (spec §2.7, §3.1): a markdown document per resource (default) or per thread,
its system message and its update tool in OpenAI function-calling form.

Instructions are in our own words, with the structure of spec §3.1: a header, guidelines, the template,
the data, notes. A later issue adds JSON-schema mode, vnext and compare-and-set merge semantics.
"""

from __future__ import annotations

from typing import Any

from memstack.config import WorkingMemoryOptions

TOOL_NAME = "updateWorkingMemory"
"""The update tool's name, as Mastra names it (spec §2.7)."""

THREAD_METADATA_KEY = "working_memory"
"""Thread metadata key holding thread-scoped working memory (Mastra: ``workingMemory``)."""

MAX_WORKING_MEMORY_CHARS = 16_000
"""Hard cap on a stored working-memory document, in characters (at most 64,000 bytes of UTF-8, so that
thread-scoped working memory fits the thread's 64 KB metadata)."""


def system_message(options: WorkingMemoryOptions, data: str | None, *, read_only: bool) -> str:
    """The working-memory system message: the tool variant, or the read-only variant.

    Args:
        options: working-memory options (template).
        data: the stored document, or ``None`` when nothing is stored yet.
        read_only: render the read-only variant (spec §3.1c): no tool, data only.
    """
    if read_only:
        shown = data if data else "No working memory data is available yet."
        return (
            "WORKING_MEMORY (READ-ONLY):\n"
            "Below is what is known about the user and this conversation from earlier sessions. "
            "Use it to personalise your answers.\n\n"
            f"<working_memory_data>\n{shown}\n</working_memory_data>\n\n"
            "Guidelines:\n"
            "1. Rely on this information where it is relevant, without reciting it.\n"
            "2. Do not tell the user about this memory system.\n"
            "3. This memory is read-only in this session: you cannot change it."
        )
    return (
        "WORKING_MEMORY:\n"
        f"Keep a record of everything about the user and this conversation that may matter later, by calling "
        f"the {TOOL_NAME} tool. When in doubt whether something will come up again, record it.\n\n"
        "Guidelines:\n"
        "1. Record facts, preferences, plans and context that could be useful in later turns.\n"
        "2. Update the record as soon as something changes, however small.\n"
        "3. Write the record in Markdown, following the template.\n"
        "4. Behave naturally: never mention this record to the user and do not ask for information "
        "about them in general terms.\n"
        f"5. The {TOOL_NAME} tool takes one parameter, `memory`, which must be a string holding the whole "
        "Markdown document — never an object.\n\n"
        f"<working_memory_template>\n{options.effective_template}\n</working_memory_template>\n\n"
        f"<working_memory_data>\n{data if data else 'null'}\n</working_memory_data>\n\n"
        "Notes:\n"
        "- Update the record whenever information in it changes.\n"
        "- Your context window may be short: this record is how you keep track of the conversation.\n"
        "- Keep every section of the template, even when it is empty.\n"
        f"- Each call to {TOOL_NAME} replaces the whole document, so always send the complete document.\n"
        f"- Call {TOOL_NAME} in every response in which you learned something relevant."
    )


def tool_definition() -> dict[str, Any]:
    """The markdown-mode update tool as an OpenAI chat-completions function definition."""
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": (
                "Replace the working memory with an updated Markdown document that keeps all relevant "
                "information about the user and the conversation."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "memory": {
                        "type": "string",
                        "description": "The complete working memory as Markdown. This MUST be a string, "
                        "never an object.",
                    }
                },
                "required": ["memory"],
                "additionalProperties": False,
            },
        },
    }
