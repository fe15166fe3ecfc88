"""The working-memory system message (spec §3.1), in our own words, with its structure: a header,
guidelines, the template (markdown) or the schema and an empty skeleton (JSON), the data, notes.

Variants: markdown, JSON, vnext (markdown, append-or-replace), and read-only (no tool; used when the
memory is ``read_only``).
"""

from __future__ import annotations

import json

from memstack.config import WorkingMemoryOptions
from memstack.working_memory.merge import skeleton
from memstack.working_memory.schema import MemorySchema
from memstack.working_memory.service import document_version
from memstack.working_memory.tools import TOOL_NAME, VERSION_ARGUMENT


def system_message(options: WorkingMemoryOptions, data: str | None, *, read_only: bool) -> str:
    """The working-memory system message for these options.

    Args:
        options: working-memory options (template or schema, version).
        data: the stored document, or ``None`` when nothing is stored yet.
        read_only: render the read-only variant (spec §3.1c): no tool, data only.
    """
    if read_only:
        return _read_only(data)
    if options.json_schema is not None:
        return _json(options, data)
    if options.version == "vnext":
        return _vnext(options, data)
    return _markdown(options, data)


def _read_only(data: str | None) -> str:
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


def _header(kind: str) -> str:
    return (
        "WORKING_MEMORY:\n"
        f"Keep a record of everything about the user and this conversation that may matter later, by calling "
        f"the {TOOL_NAME} tool. When in doubt whether something will come up again, record it.\n\n"
        "Guidelines:\n"
        "1. Record facts, preferences, plans and context that could be useful in later turns.\n"
        "2. Update the record as soon as something changes, however small.\n"
        f"3. Write the record in {kind}, following the {'schema' if kind == 'JSON' else 'template'}.\n"
        "4. Behave naturally: never mention this record to the user and do not ask for information "
        "about them in general terms.\n"
    )


def _markdown(options: WorkingMemoryOptions, data: str | None) -> str:
    return (
        _header("Markdown")
        + f"5. The {TOOL_NAME} tool takes `memory`, which must be a string holding the whole Markdown "
        "document — never an object.\n"
        f'6. Also pass `{VERSION_ARGUMENT}`: "{document_version(data)}" (the version of the document below; '
        "after a successful update, the version the tool answers).\n\n"
        f"<working_memory_template>\n{options.effective_template}\n</working_memory_template>\n\n"
        f"<working_memory_data>\n{data if data else 'null'}\n</working_memory_data>\n\n"
        "Notes:\n"
        "- Update the record whenever information in it changes.\n"
        "- Your context window may be short: this record is how you keep track of the conversation.\n"
        "- Keep every section of the template, even when it is empty.\n"
        f"- Each call to {TOOL_NAME} replaces the whole document, so always send the complete document.\n"
        f"- Call {TOOL_NAME} in every response in which you learned something relevant."
    )


def _json(options: WorkingMemoryOptions, data: str | None) -> str:
    assert options.json_schema is not None
    schema = MemorySchema.of(options.json_schema).json
    empty = skeleton(schema)
    shape = (
        f"An empty record has this shape:\n{json.dumps(empty, ensure_ascii=False)}\n\n"
        if isinstance(empty, dict) and empty
        else ""
    )
    return (
        _header("JSON") + f"5. Pass the fields to {TOOL_NAME} as an object in its `memory` parameter.\n\n"
        f"<working_memory_schema>\n{json.dumps(schema, ensure_ascii=False)}\n</working_memory_schema>\n\n"
        + shape
        + f"<working_memory_data>\n{data if data else 'null'}\n</working_memory_data>\n\n"
        "Notes:\n"
        "- Update the record whenever information in it changes.\n"
        "- Your context window may be short: this record is how you keep track of the conversation.\n"
        "- Your update is merged into the stored record: send only new or changed fields; a field you "
        "leave out keeps its value.\n"
        "- Leave out the fields you are not changing; null in an optional field also means unchanged. To "
        'empty a field send an empty value ("" or []); null removes only entries the schema does not name.\n'
        "- An array you send replaces the stored one, so send the whole array.\n"
        f"- Call {TOOL_NAME} in every response in which you learned something relevant."
    )


def _vnext(options: WorkingMemoryOptions, data: str | None) -> str:
    custom = options.template is not None
    return (
        _header("Markdown") + "5. If nothing in the record has changed, do not call the tool.\n"
        "6. That something is not relevant to the current conversation is no reason to remove or replace it: "
        "it may matter in another conversation.\n\n"
        f"<working_memory_template>\n{options.effective_template}\n</working_memory_template>\n\n"
        f"<working_memory_data>\n{data if data else 'null'}\n</working_memory_data>\n\n"
        "Notes:\n"
        "- Add new information with updateReason append-new-memory; it is appended to the record.\n"
        "- To correct something, pass the exact text to change as searchString and its replacement as "
        "newMemory, one line at a time.\n"
        + ("- Record only information the template has a place for.\n" if custom else "")
        + f"- Call {TOOL_NAME} when you learn something relevant that the record does not hold yet."
    )
