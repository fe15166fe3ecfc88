"""An option name that no options model has is refused naming where it was given and the option meant:
every options model reachable from ``MemoryOptions``, through ``Memory.local`` and per-call options over
HTTP alike."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from memstack import Memory
from memstack.config import MemoryOptions, _Options
from memstack.errors import InvalidInput


def _models(
    model: type[BaseModel] = MemoryOptions, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], type[BaseModel]]]:
    """Every options model with the path of option names that reaches it (a union's model branch too)."""
    yield path, model
    for key, info in model.model_fields.items():
        pending: list[Any] = [info.annotation]
        while pending:
            kind = pending.pop()
            if isinstance(kind, type) and issubclass(kind, _Options):
                yield from _models(kind, (*path, info.alias or key))
            else:
                pending.extend(get_args(kind))


MODELS = list(_models())


def _nested(path: tuple[str, ...], leaf: dict[str, Any]) -> dict[str, Any]:
    data = leaf
    for part in reversed(path):
        data = {part: data}
    return data


def test_the_walk_reaches_the_nested_options() -> None:
    paths = {".".join(p) for p, _ in MODELS}
    assert {
        "",
        "semantic_recall",
        "semantic_recall.message_range",
        "observational_memory.observation",
    } <= paths


@pytest.mark.parametrize(("path", "model"), MODELS, ids=[".".join(p) or "top" for p, _ in MODELS])
def test_given_a_misspelt_option_of_any_options_model_then_the_error_names_it_and_the_option_meant(
    path: tuple[str, ...], model: type[BaseModel]
) -> None:
    for key, info in model.model_fields.items():
        name = info.alias or key
        typo = name[:-1] if len(name) > 3 else name + "x"
        if typo in {f.alias or k for k, f in model.model_fields.items()}:
            continue
        with pytest.raises(InvalidInput) as caught:
            MemoryOptions.parse(_nested(path, {typo: 1}))
        assert caught.value.field == ".".join((*path, typo))
        message = str(caught.value)
        assert f"no option {typo!r}" in message
        assert "did you mean" in message and "Extra inputs" not in message
        if path:
            assert message.startswith(f"{'.'.join(path)} has no option")


@pytest.mark.parametrize(("path", "model"), MODELS, ids=[".".join(p) or "top" for p, _ in MODELS])
def test_given_an_unrelated_name_then_the_error_lists_the_known_options(
    path: tuple[str, ...], model: type[BaseModel]
) -> None:
    with pytest.raises(InvalidInput) as caught:
        MemoryOptions.parse(_nested(path, {"zzzzqqq": 1}))
    known = sorted(f.alias or k for k, f in model.model_fields.items())
    assert f"known options: {', '.join(known)}" in str(caught.value)


def test_given_options_passed_as_one_mapping_to_memory_local_then_the_error_lists_the_options() -> None:
    with pytest.raises(InvalidInput) as caught:
        Memory.local(":memory:", embedder="hash", options={"last_messages": 3})
    assert "no option 'options'" in str(caught.value) and "last_messages" in str(caught.value)


def test_given_a_misspelt_per_call_option_then_merged_options_say_the_same() -> None:
    with pytest.raises(InvalidInput) as caught:
        MemoryOptions().merged({"semantic_recall": {"topk": 3}})
    assert caught.value.message == "semantic_recall has no option 'topk' (did you mean 'top_k'?)"
    assert caught.value.field == "semantic_recall.topk"


def test_given_a_misspelt_option_over_http_then_the_answer_says_the_same_as_the_library() -> None:
    from memstack.api import AuthConfig, create_app, handle_http

    with Memory.local(":memory:", embedder="hash") as memory:
        app = create_app(memory, auth=AuthConfig())
        body = json.dumps({"message": "hi", "options": {"semantic_recall": {"topk": 3}}}).encode()
        answer = handle_http(
            app,
            "POST",
            "/v1/threads/t1/context",
            "resource_id=u1",
            {"Content-Type": "application/json"},
            body,
        )
    error = json.loads(answer.body)["error"]
    assert answer.status == 400 and error["code"] == "invalid_input"
    assert "semantic_recall has no option 'topk' (did you mean 'top_k'?)" in error["message"]
