"""JSON-schema working memory through ``Memory`` (spec §2.7 "Schema mode") and its tool calls."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import date
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from memstack import InvalidInput, Memory, MemoryOptions
from memstack.model import ToolResultPart
from memstack.working_memory.schema import MemorySchema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "city": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "prefs": {"type": "object", "properties": {"tea": {"type": "string"}}},
    },
}
WM = {"working_memory": {"enabled": True, "schema": SCHEMA}}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.local(tmp_path / "m.db", embedder="hash", **WM) as m:
        yield m


def call(arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": "updateWorkingMemory", "arguments": args}}


def stored(memory: Memory) -> Any:
    raw = memory.get_working_memory(thread_id="t", resource_id="r")
    return None if raw is None else json.loads(raw)


def result(message: Any) -> ToolResultPart:
    part = message.parts[0]
    assert isinstance(part, ToolResultPart)
    return part


def test_given_json_mode_when_two_updates_then_they_merge(memory: Memory) -> None:
    memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": {"name": "Ada"}}))
    out = memory.apply_tool_call(
        thread_id="t", resource_id="r", tool_call=call({"memory": {"tags": ["x"], "prefs": {"tea": "green"}}})
    )
    assert out.role == "tool" and result(out).tool_call_id == "c1" and not result(out).is_error
    assert stored(memory) == {"name": "Ada", "tags": ["x"], "prefs": {"tea": "green"}}


def test_given_a_first_write_with_nulls_when_applied_then_no_null_is_stored(memory: Memory) -> None:
    memory.apply_tool_call(
        thread_id="t", resource_id="r", tool_call=call({"memory": {"name": "Ada", "city": None, "age": None}})
    )
    assert stored(memory) == {"name": "Ada"}


def test_given_padding_nulls_when_applied_then_unrelated_fields_survive(memory: Memory) -> None:
    memory.update_working_memory(thread_id="t", resource_id="r", working_memory={"name": "Ada", "age": 36})
    memory.apply_tool_call(
        thread_id="t",
        resource_id="r",
        tool_call=call({"memory": {"name": None, "age": None, "city": "Oslo"}}),
    )
    assert stored(memory) == {"name": "Ada", "age": 36, "city": "Oslo"}


def test_given_null_for_a_nullable_optional_field_when_applied_then_it_is_padding_and_kept(
    memory: Memory,
) -> None:
    memory.update_working_memory(thread_id="t", resource_id="r", working_memory={"city": "Oslo", "age": 3})
    memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": {"city": None}}))
    assert stored(memory) == {"city": "Oslo", "age": 3}


def test_given_null_for_a_free_form_entry_when_applied_then_it_is_deleted(tmp_path: Path) -> None:
    free = {"type": "object", "additionalProperties": {"type": "string"}}
    with Memory.local(
        tmp_path / "free.db", embedder="hash", working_memory={"enabled": True, "schema": free}
    ) as m:
        m.update_working_memory(
            thread_id="t", resource_id="r", working_memory={"likes": "tea", "city": "Oslo"}
        )
        m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": {"city": None}}))
        assert json.loads(m.get_working_memory(thread_id="t", resource_id="r") or "{}") == {"likes": "tea"}


def test_given_no_memory_wrapper_when_applied_then_the_arguments_are_the_memory(memory: Memory) -> None:
    memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"name": "Ada"}))
    assert stored(memory) == {"name": "Ada"}


def test_given_memory_as_a_json_string_when_applied_then_it_is_parsed(memory: Memory) -> None:
    memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": '{"name": "Ada"}'}))
    assert stored(memory) == {"name": "Ada"}


def test_given_invalid_json_when_applied_then_an_error_result_and_nothing_written(memory: Memory) -> None:
    out = memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=call('{"memory": {"name": '))
    assert result(out).is_error and "not valid JSON" in result(out).result["message"]
    out = memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": "{nope"}))
    assert result(out).is_error and result(out).result["success"] is False
    assert stored(memory) is None


def test_given_a_schema_violation_when_applied_then_an_error_result_naming_the_field(memory: Memory) -> None:
    memory.update_working_memory(thread_id="t", resource_id="r", working_memory={"name": "Ada"})
    out = memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": {"age": -1}}))
    assert result(out).is_error and "age" in result(out).result["message"]
    assert stored(memory) == {"name": "Ada"}


def test_given_a_schema_violation_when_updated_directly_then_invalid_input(memory: Memory) -> None:
    with pytest.raises(InvalidInput) as err:
        memory.update_working_memory(thread_id="t", resource_id="r", working_memory={"age": "old"})
    assert err.value.field == "working_memory"


def test_given_json_mode_when_context_then_schema_skeleton_and_merge_tool(memory: Memory) -> None:
    memory.update_working_memory(thread_id="t", resource_id="r", working_memory='{"name": "Ada"}')
    ctx = memory.context(thread_id="t", resource_id="r", message="hi")
    text = ctx.system[0].text
    assert "<working_memory_schema>" in text and '"minimum": 0' in text
    assert '{"name": "", "age": null, "city": "", "tags": [], "prefs": {"tea": ""}}' in text
    assert '<working_memory_data>\n{"name": "Ada"}\n</working_memory_data>' in text
    params = ctx.tools[0]["function"]["parameters"]
    assert params["required"] == ["memory"] and params["properties"]["memory"]["properties"]["age"]


class Pet(BaseModel):
    kind: str
    name: str | None = None


class Profile(BaseModel):
    name: str | None = None
    pets: list[Pet] = []
    best_friend: Pet | None = None


def test_given_a_pydantic_model_when_applied_then_it_validates_and_refs_resolve(tmp_path: Path) -> None:
    opts = {"working_memory": {"enabled": True, "schema": Profile}}
    with Memory.local(tmp_path / "p.db", embedder="hash", **opts) as m:
        tool = m.context(thread_id="t", resource_id="r", message="x").tools[0]
        assert "$defs" in tool["function"]["parameters"]
        ok = m.apply_tool_call(
            thread_id="t", resource_id="r", tool_call=call({"memory": {"best_friend": {"kind": "cat"}}})
        )
        assert not result(ok).is_error
        bad = m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": {"pets": [{}]}}))
        assert result(bad).is_error and "pets.0.kind" in result(bad).result["message"]
        assert json.loads(m.get_working_memory(thread_id="t", resource_id="r") or "") == {
            "best_friend": {"kind": "cat"}
        }


class Person(BaseModel):
    name: str
    age: int | None = None
    born: date | None = None


COERCIBLE = [{"age": "12"}, {"age": True}, {"name": 5}, {"born": 19900203}]
"""Values pydantic's lax mode would coerce (so the stored text would not be what the model means)."""


@pytest.mark.parametrize("value", COERCIBLE, ids=repr)
@pytest.mark.parametrize("mode", ["pydantic model", "its JSON Schema"])
def test_given_a_value_the_model_type_would_coerce_when_applied_then_both_schema_forms_refuse_it(
    tmp_path: Path, mode: str, value: dict[str, Any]
) -> None:
    schema = Person if mode == "pydantic model" else Person.model_json_schema()
    opts = {"working_memory": {"enabled": True, "schema": schema}}
    with Memory.local(tmp_path / "p.db", embedder="hash", **opts) as m:
        m.update_working_memory(resource_id="r", working_memory={"name": "Ada", "age": 3})

        told = m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": value}))

        assert result(told).is_error, f"{mode} took {value} and would store it uncoerced"
        assert next(iter(value)) in result(told).result["message"]
        assert json.loads(m.get_working_memory(resource_id="r") or "") == {"name": "Ada", "age": 3}
        with pytest.raises(InvalidInput):
            m.update_working_memory(resource_id="r", working_memory=value)


def test_given_a_pydantic_model_when_json_types_match_then_stored_as_sent_and_dates_stay_strings(
    tmp_path: Path,
) -> None:
    opts = {"working_memory": {"enabled": True, "schema": Person}}
    with Memory.local(tmp_path / "p.db", embedder="hash", **opts) as m:
        sent = {"name": "Ada", "age": 12, "born": "1990-02-03"}
        told = m.apply_tool_call(thread_id="t", resource_id="r", tool_call=call({"memory": sent}))
        assert not result(told).is_error, result(told).result
        assert json.loads(m.get_working_memory(resource_id="r") or "") == sent


def test_given_template_and_schema_when_configured_then_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="exclusive"):
        MemoryOptions.parse({"working_memory": {"template": "# T", "schema": SCHEMA}})


def test_given_an_invalid_json_schema_when_configured_then_invalid_input_naming_schema() -> None:
    with pytest.raises(InvalidInput) as err:
        MemoryOptions.parse({"working_memory": {"schema": {"type": "object", "properties": 3}}})
    assert err.value.field is not None and "schema" in err.value.field


def test_given_a_per_call_schema_when_merged_then_it_replaces_the_configured_template() -> None:
    base = MemoryOptions.parse({"working_memory": {"enabled": True, "template": "# T"}})
    merged = base.merged({"working_memory": {"schema": SCHEMA}})
    assert merged.working_memory.json_schema == SCHEMA and merged.working_memory.template is None


def test_given_nan_in_a_tool_call_when_applied_then_error_result_and_nothing_written(memory: Memory) -> None:
    out = memory.apply_tool_call(thread_id="t", resource_id="r", tool_call=call('{"memory": {"age": NaN}}'))
    assert result(out).is_error and stored(memory) is None


def test_given_a_non_json_object_when_updated_directly_then_invalid_input(memory: Memory) -> None:
    with pytest.raises(InvalidInput, match="JSON"):
        memory.update_working_memory(thread_id="t", resource_id="r", working_memory={"tags": {1, 2}})


class _Listener(BaseHTTPRequestHandler):
    """Counts requests: a schema reference must never reach it."""

    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        type(self).seen.append(self.path)
        body = b'{"enum": ["FROM-THE-NETWORK"]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass


@pytest.fixture
def listener() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Listener)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Listener.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _with_ref(ref: str, **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"a": {"$ref": ref}}, **extra}


@pytest.mark.parametrize(
    "ref",
    [
        "{url}/schema.json",
        "{url}/schema.json#/properties/a",
        "{file}",
        "other.json",
        "urn:example:thing",
        "#/definitions/nope",
        "#/$defs/nope",
        "#nope-anchor",
    ],
)
def test_given_a_reference_outside_the_schema_when_configured_then_invalid_input_and_nothing_read(
    ref: str, listener: str, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"enum": ["SECRET-FROM-A-FILE"]}')
    ref = ref.format(url=listener, file=secret.as_uri())
    with pytest.raises(InvalidInput) as err:
        MemoryOptions.parse({"working_memory": {"schema": _with_ref(ref)}})
    assert err.value.field is not None and "schema" in err.value.field
    assert ref in str(err.value) and "SECRET" not in str(err.value)
    assert _Listener.seen == []


def test_given_a_dynamic_reference_outside_the_schema_when_configured_then_invalid_input(
    listener: str,
) -> None:
    schema = {"type": "object", "properties": {"a": {"$dynamicRef": f"{listener}/s.json#node"}}}
    with pytest.raises(InvalidInput):
        MemoryOptions.parse({"working_memory": {"schema": schema}})
    assert _Listener.seen == []


@pytest.mark.parametrize(
    ("schema", "document", "valid"),
    [
        (_with_ref("#/$defs/n", **{"$defs": {"n": {"type": "integer"}}}), {"a": 1}, True),
        (_with_ref("#/$defs/n", **{"$defs": {"n": {"type": "integer"}}}), {"a": "x"}, False),
        (
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                **_with_ref("#/definitions/n", definitions={"n": {"type": "string"}}),
            },
            {"a": 1},
            False,
        ),
        (_with_ref("https://json-schema.org/draft/2020-12/schema"), {"a": {"type": "string"}}, True),
        (
            {
                "$id": "https://example.com/root",
                **_with_ref("n.json", **{"$defs": {"n": {"$id": "n.json", "type": "integer"}}}),
            },
            {"a": 1},
            True,
        ),
        (
            {"type": "object", "properties": {"a": {"enum": [{"$ref": "file:///etc/passwd"}]}}},
            {"a": {"$ref": "file:///etc/passwd"}},
            True,
        ),
    ],
    ids=["local-valid", "local-invalid", "draft7-definitions", "meta-schema", "embedded-id", "ref-as-data"],
)
def test_given_references_inside_the_schema_when_validated_then_they_resolve(
    schema: dict[str, Any], document: dict[str, Any], valid: bool
) -> None:
    options = MemoryOptions.parse({"working_memory": {"schema": schema}})
    memory_schema = MemorySchema.of(options.working_memory.json_schema or {})
    if valid:
        memory_schema.validate(document)
    else:
        with pytest.raises(InvalidInput):
            memory_schema.validate(document)


def test_given_an_unchecked_schema_with_a_remote_reference_when_validated_then_invalid_input_not_a_fetch(
    listener: str,
) -> None:
    with pytest.raises(InvalidInput) as err:
        MemorySchema.of(_with_ref(f"{listener}/schema.json")).validate({"a": 1})
    assert err.value.field == "working_memory.schema" and "FROM-THE-NETWORK" not in str(err.value)
    assert _Listener.seen == []
