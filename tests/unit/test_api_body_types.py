"""A JSON body's integers and booleans are taken as JSON types them, as ``Memory`` takes its arguments:
``"12"``, ``12.0`` and ``true`` are not an integer, ``"yes"``, ``"off"`` and ``1`` not a boolean (400
naming the field). Query strings are text, so their models convert; bodies never do."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from memstack.api import schemas  # noqa: F401 - defines the bodies besides context_schemas'
from memstack.api.context_schemas import ContextBody, _Request
from memstack.api.schemas import SaveMessagesBody


def _models(base: type[BaseModel]) -> Iterator[type[BaseModel]]:
    for sub in base.__subclasses__():
        yield sub
        yield from _models(sub)


BODIES = sorted({m for m in _models(_Request) if not m.__name__.endswith("Query")}, key=lambda m: m.__name__)
"""Every request model but the query strings' (bodies and the objects they nest)."""


def _lax_scalars(node: Any, path: str = "") -> Iterator[str]:
    """Paths of the int, bool and float schemas in a core schema that are not strict (they convert)."""
    if isinstance(node, dict):
        if node.get("type") in ("int", "bool", "float") and not node.get("strict"):
            yield path
        for key, value in node.items():
            yield from _lax_scalars(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _lax_scalars(value, f"{path}[{i}]")


def test_the_bodies_are_found() -> None:
    assert {"SaveMessagesBody", "ContextBody", "CloneThreadBody", "MessageIn"} <= {m.__name__ for m in BODIES}


@pytest.mark.parametrize("model", BODIES, ids=lambda m: m.__name__)
def test_given_a_request_body_model_then_none_of_its_integers_or_booleans_converts_other_json_types(
    model: type[BaseModel],
) -> None:
    model.model_rebuild(force=True)  # deferred models build their schema on first use

    assert list(_lax_scalars(model.__pydantic_core_schema__)) == []


@pytest.mark.parametrize("value", ["2", " 12 ", "1_2", True, 3.0])
def test_given_expected_last_seq_that_is_not_a_json_integer_then_refused(value: object) -> None:
    with pytest.raises(ValidationError) as caught:
        SaveMessagesBody.model_validate({"messages": ["hi"], "expected_last_seq": value})

    assert caught.value.errors()[0]["loc"] == ("expected_last_seq",)


@pytest.mark.parametrize("value", ["yes", "off", 1, 0])
def test_given_count_tokens_that_is_not_a_json_boolean_then_refused(value: object) -> None:
    with pytest.raises(ValidationError) as caught:
        ContextBody.model_validate({"message": "hi", "count_tokens": value})

    assert caught.value.errors()[0]["loc"] == ("count_tokens",)


@pytest.mark.parametrize("value", ["no", 1])
def test_given_a_tool_result_whose_is_error_is_not_a_json_boolean_then_refused(value: object) -> None:
    part = {"type": "tool_result", "tool_call_id": "c1", "result": "ok", "is_error": value}

    with pytest.raises(ValidationError):
        SaveMessagesBody.model_validate({"messages": [{"role": "tool", "parts": [part]}]})


def test_given_json_integers_and_booleans_then_accepted() -> None:
    assert (
        SaveMessagesBody.model_validate({"messages": ["hi"], "expected_last_seq": 12}).expected_last_seq == 12
    )
    assert ContextBody.model_validate({"message": "hi", "count_tokens": True}).count_tokens is True
