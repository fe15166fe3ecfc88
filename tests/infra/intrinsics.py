"""Resolve the few CloudFormation intrinsics a synthesized state machine definition uses (``Fn::Join``,
``Fn::GetAtt``, ``Ref``), so tests can read the definition or run it (in moto)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any


def resolve(value: Any, lookup: Callable[[str, str | None], str]) -> Any:
    """``value`` with every ``Fn::Join``/``Fn::GetAtt``/``Ref`` replaced; ``lookup(logical_id, attribute)``
    gives the value of ``Fn::GetAtt [id, attribute]`` (``attribute`` ``None`` for ``Ref``)."""
    if isinstance(value, list):
        return [resolve(v, lookup) for v in value]
    if not isinstance(value, Mapping):
        return value
    if set(value) == {"Fn::Join"}:
        separator, parts = value["Fn::Join"]
        return separator.join(str(resolve(p, lookup)) for p in parts)
    if set(value) == {"Fn::GetAtt"}:
        logical, attribute = value["Fn::GetAtt"]
        return lookup(logical, attribute)
    if set(value) == {"Ref"}:
        return lookup(value["Ref"], None) if not value["Ref"].startswith("AWS::") else _pseudo(value["Ref"])
    return {k: resolve(v, lookup) for k, v in value.items()}


def _pseudo(name: str) -> str:
    return {"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}.get(
        name, name
    )


def placeholder(logical: str, attribute: str | None) -> str:
    """``arn:<logical id>`` — enough to tell which resource a definition points at."""
    return f"arn:{logical}" if attribute in (None, "Arn") else f"{logical}.{attribute}"


def state_machine_definition(
    template: Mapping[str, Any], lookup: Callable[[str, str | None], str] = placeholder
) -> dict[str, Any]:
    """The definition of the template's only state machine, parsed, intrinsics resolved by ``lookup``."""
    machines = [r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"]
    assert len(machines) == 1, f"{len(machines)} state machines"
    text = resolve(machines[0]["Properties"]["DefinitionString"], lookup)
    parsed: dict[str, Any] = json.loads(text)
    return parsed
