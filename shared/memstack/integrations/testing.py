"""Scripted models for the agent frameworks: each answers from a script instead of a provider and records
what it was shown, so examples and tests run an agent offline and can check what memory put in front of the
model. Each builder imports its framework when called (the extras stay optional).

A script is a list of turns; a turn is either answer text (``str``) or a tool call
``(call_id, tool_name, arguments)``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

__all__ = ["Turn", "scripted_agents_model", "scripted_strands_model"]

Turn = str | tuple[str, str, dict[str, Any]]


def _next(script: list[Turn]) -> Turn:
    if not script:
        raise RuntimeError(
            "the scripted model has no turn left: the agent called it more often than scripted"
        )
    return script.pop(0)


def scripted_strands_model(script: Sequence[Turn]) -> Any:
    """A ``strands.models.Model`` streaming the scripted turns as Converse stream events.

    Attributes (of the model returned):
        calls: one ``{"messages", "system", "tools"}`` per call, as the agent sent them.
    """
    from strands.models.model import Model

    class ScriptedStrandsModel(Model):
        def __init__(self) -> None:
            self.script = list(script)
            self.calls: list[dict[str, Any]] = []

        def update_config(self, **model_config: Any) -> None:
            """Nothing to configure."""

        def get_config(self) -> Any:
            return {}

        def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scripted model has no structured output")

        async def stream(
            self, messages: Any, tool_specs: Any = None, system_prompt: str | None = None, **kwargs: Any
        ) -> AsyncIterator[Any]:
            self.calls.append(
                {
                    "messages": json.loads(json.dumps(messages, default=str)),
                    "system": system_prompt,
                    "tools": [t["name"] for t in tool_specs or ()],
                }
            )
            turn = _next(self.script)
            yield {"messageStart": {"role": "assistant"}}
            if isinstance(turn, str):
                yield {"contentBlockStart": {"start": {}}}
                yield {"contentBlockDelta": {"delta": {"text": turn}}}
                stop = "end_turn"
            else:
                call_id, name, arguments = turn
                yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": call_id, "name": name}}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(arguments)}}}}
                stop = "tool_use"
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": stop}}

    return ScriptedStrandsModel()


def scripted_agents_model(script: Sequence[Turn]) -> Any:
    """An OpenAI Agents SDK ``Model`` answering with the scripted turns (``get_response``; not streamed).

    Attributes (of the model returned):
        inputs: the input items of each call, as the runner sent them.
    """
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class ScriptedAgentsModel(Model):
        def __init__(self) -> None:
            self.script = list(script)
            self.inputs: list[list[Any]] = []

        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            self.inputs.append(
                list(input) if isinstance(input, list) else [{"role": "user", "content": input}]
            )
            turn = _next(self.script)
            if isinstance(turn, str):
                text = ResponseOutputText(type="output_text", text=turn, annotations=[])
                output: Any = ResponseOutputMessage(
                    id="msg_scripted", type="message", role="assistant", status="completed", content=[text]
                )
            else:
                call_id, name, arguments = turn
                output = ResponseFunctionToolCall(
                    type="function_call", call_id=call_id, name=name, arguments=json.dumps(arguments)
                )
            return ModelResponse(output=[output], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scripted model does not stream")

    return ScriptedAgentsModel()
