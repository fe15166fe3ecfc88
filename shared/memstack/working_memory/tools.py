"""The ``updateWorkingMemory`` tool: its OpenAI function definition in each mode, and reading a call
(spec §2.7 "Tool").

A call arrives in OpenAI's shape (``{"id", "type": "function", "function": {"name", "arguments"}}``,
``arguments`` a JSON string) or as a ``ToolCallPart``; both become a ``ToolCall`` here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memstack.config import WorkingMemoryOptions
from memstack.errors import InvalidInput
from memstack.model import ToolCallPart, check_text
from memstack.working_memory.schema import MemorySchema
from memstack.working_memory.service import check_input_size
from memstack.working_memory.updates import UPDATE_REASONS

TOOL_NAME = "updateWorkingMemory"
"""The update tool's name, as Mastra names it (spec §2.7)."""

VERSION_ARGUMENT = "version"
"""The markdown tool's optional argument: the version of the document the model was shown, which the
system message states (``service.document_version``). It is how that version reaches ``apply_tool_call``
when the caller passes back only the tool call: the turn's ``ModelContext`` is then not at hand, and the
model's own call is the one thing that belongs to the turn. Optional, so Mastra-shaped calls still work
(unguarded, as before)."""


def tool_definition(options: WorkingMemoryOptions | None = None) -> dict[str, Any]:
    """The update tool as an OpenAI chat-completions function definition, for the configured mode."""
    options = options or WorkingMemoryOptions()
    if options.json_schema is not None:
        return _function(_JSON_DESCRIPTION, _json_parameters(MemorySchema.of(options.json_schema).json))
    if options.version == "vnext":
        return _function(_VNEXT_DESCRIPTION, _VNEXT_PARAMETERS)
    return _function(_MARKDOWN_DESCRIPTION, _MARKDOWN_PARAMETERS)


def _function(description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": TOOL_NAME, "description": description, "parameters": parameters},
    }


_MARKDOWN_DESCRIPTION = (
    "Replace the working memory with an updated Markdown document that keeps all relevant information "
    "about the user and the conversation. Anything left out of the document is lost."
)
_MARKDOWN_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "memory": {
            "type": "string",
            "description": "The complete working memory as Markdown. This MUST be a string, never an object.",
        },
        VERSION_ARGUMENT: {
            "type": "string",
            "description": "The working memory's version as the system message gives it; copy it unchanged. "
            "An update written from an older document is then refused with the current one instead of "
            "dropping what was added since.",
        },
    },
    "required": ["memory"],
    "additionalProperties": False,
}

_JSON_DESCRIPTION = (
    "Update the working memory. The object you send is merged into what is stored: send only the fields "
    "that are new or changed and leave the others out (a field left out, or null in an optional field, "
    "keeps its value). To empty a field send an empty value; null removes only entries the schema does "
    "not name. An array replaces the stored array whole, so send the complete array."
)


def _json_parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """``{memory: <schema>}``, with the schema's ``$defs`` moved to the root so its ``$ref``s resolve."""
    inner = {k: v for k, v in schema.items() if k not in ("$defs", "definitions", "$schema")}
    params: dict[str, Any] = {
        "type": "object",
        "properties": {"memory": {**inner, "description": "The fields of working memory to add or change."}},
        "required": ["memory"],
    }
    for key in ("$defs", "definitions"):
        if key in schema:
            params[key] = schema[key]
    return params


_VNEXT_DESCRIPTION = "Add new information to the working memory, or correct information already in it."
_VNEXT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "newMemory": {
            "type": "string",
            "description": "The Markdown text to add, or to put in place of searchString.",
        },
        "searchString": {
            "type": "string",
            "description": "Text already in working memory to replace with newMemory; best one line at a time. "
            "Required unless updateReason is append-new-memory. If it is not found, newMemory is appended.",
        },
        "updateReason": {
            "type": "string",
            "enum": list(UPDATE_REASONS),
            "description": "Why you update: append-new-memory (default) adds at the end; the others replace "
            "searchString.",
        },
    },
    "required": ["newMemory"],
}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A parsed call: its id, its name and its arguments (``None`` when they were not a JSON object;
    ``error`` then says why)."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    error: str | None = None


def parse_tool_call(tool_call: object) -> ToolCall:
    """Read a tool call in any of the shapes the three model APIs give, or a ``ToolCallPart``.

    * OpenAI chat completions: ``{"id", "type": "function", "function": {"name", "arguments"}}``
      (``arguments`` JSON text; an object is taken as is);
    * Amazon Bedrock ``Converse`` (and Strands Agents): ``{"toolUse": {"toolUseId", "name", "input"}}``
      or the inner ``{"toolUseId", "name", "input"}``;
    * Anthropic Messages: ``{"type": "tool_use", "id", "name", "input"}``.

    Arguments that are not JSON, or not an object, do not raise: the ``ToolCall`` carries an ``error``
    for the model to read.

    Raises:
        InvalidInput: the call itself is malformed (no id, no name, a lone surrogate in either) or of none of
            these shapes.
        PayloadTooLarge: the arguments are larger than ``MAX_INPUT_BYTES``; refused before parsing.
    """
    if isinstance(tool_call, ToolCallPart):
        check_text(tool_call.id, "tool_call.id")
        check_input_size(json.dumps(tool_call.args, ensure_ascii=False), "tool_call.args")
        return ToolCall(tool_call.id, tool_call.name, dict(tool_call.args))
    if not isinstance(tool_call, dict):
        raise InvalidInput(
            "tool_call must be a tool call object (OpenAI, Bedrock Converse or Anthropic) or a ToolCallPart",
            field="tool_call",
        )
    if "function" in tool_call:
        return _parse_openai(tool_call)
    if isinstance(tool_call.get("toolUse"), dict):
        return _parse_input_call(tool_call["toolUse"], "toolUseId", "tool_call.toolUse")
    if "toolUseId" in tool_call:
        return _parse_input_call(tool_call, "toolUseId", "tool_call")
    if tool_call.get("type") == "tool_use":
        return _parse_input_call(tool_call, "id", "tool_call")
    raise InvalidInput(
        "tool_call must be an OpenAI tool call ({id, function}), a Bedrock toolUse ({toolUseId, name, "
        "input}) or an Anthropic tool_use block ({type: tool_use, id, name, input})",
        field="tool_call",
    )


def to_openai_tool_call(tool_call: object) -> dict[str, Any]:
    """Any shape ``parse_tool_call`` reads, as an OpenAI tool call (``arguments`` JSON text) — the shape
    the HTTP API takes. Arguments that were not an object are passed on as their JSON text, so the
    server reports the same error to the model.

    Raises:
        InvalidInput, PayloadTooLarge: as ``parse_tool_call``.
    """
    if isinstance(tool_call, dict) and "function" in tool_call:
        call = _parse_openai(tool_call)
        raw = tool_call["function"].get("arguments", "{}")
        arguments = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    else:
        call = parse_tool_call(tool_call)
        arguments = json.dumps(call.arguments if call.arguments is not None else _raw_input(tool_call))
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def _raw_input(tool_call: object) -> Any:
    if isinstance(tool_call, dict):
        inner = tool_call.get("toolUse", tool_call)
        return inner.get("input") if isinstance(inner, dict) else None
    return None


def _parse_input_call(call: dict[str, Any], id_key: str, where: str) -> ToolCall:
    """A Converse ``toolUse`` or an Anthropic ``tool_use`` block: the arguments are a JSON value."""
    call_id, name = call.get(id_key), call.get("name")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidInput(f"{where}.{id_key} must be a non-empty string", field=f"{where}.{id_key}")
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"{where}.name must be a non-empty string", field=f"{where}.name")
    args = call.get("input", {})
    try:
        check_input_size(json.dumps(args, ensure_ascii=False), f"{where}.input")
    except (TypeError, ValueError):
        raise InvalidInput(f"{where}.input must be a JSON value", field=f"{where}.input") from None
    if not isinstance(args, dict):
        return ToolCall(call_id, name, None, "the arguments must be a JSON object")
    return ToolCall(call_id, name, args)


def _parse_openai(tool_call: dict[str, Any]) -> ToolCall:
    call_id, function = tool_call.get("id"), tool_call.get("function")
    if not isinstance(call_id, str) or not call_id or not isinstance(function, dict):
        raise InvalidInput("tool_call needs an id and a function", field="tool_call")
    # the id goes back to the model in the tool result: it must be text that can be sent
    check_text(call_id, "tool_call.id")
    name = function.get("name")
    if not isinstance(name, str):
        raise InvalidInput("tool_call.function.name must be a string", field="tool_call.function.name")
    check_text(name, "tool_call.function.name")
    raw = function.get("arguments", "{}")
    if isinstance(raw, dict):
        return ToolCall(call_id, name, raw)
    if not isinstance(raw, str):
        raise InvalidInput(
            "tool_call.function.arguments must be a JSON string", field="tool_call.function.arguments"
        )
    check_input_size(raw, "tool_call.function.arguments")
    try:
        args = json.loads(raw)
    except ValueError as exc:
        return ToolCall(call_id, name, None, f"the arguments are not valid JSON ({exc})")
    except RecursionError:
        return ToolCall(call_id, name, None, "the arguments are nested too deeply")
    if not isinstance(args, dict):
        return ToolCall(call_id, name, None, "the arguments must be a JSON object")
    return ToolCall(call_id, name, args)
