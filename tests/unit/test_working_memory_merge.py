"""JSON-mode merge semantics (spec §2.7 "Deep-merge"): one rule per test, on the pure functions."""

from __future__ import annotations

from typing import Any

from memstack.working_memory.merge import deep_merge, skeleton, strip_padding_nulls

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "city": {"type": ["string", "null"]},
        "prefs": {"type": "object", "properties": {"tea": {"type": "string"}, "diet": {"type": "string"}}},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name"],
}


def test_given_an_absent_key_when_merged_then_the_stored_value_stays() -> None:
    assert deep_merge({"a": 1, "b": 2}, {"b": 3}) == {"a": 1, "b": 3}


def test_given_null_when_merged_then_the_key_is_deleted() -> None:
    assert deep_merge({"a": 1, "b": 2}, {"a": None}) == {"b": 2}


def test_given_a_first_write_with_nulls_when_merged_then_no_null_is_stored() -> None:
    assert deep_merge(None, {"a": None, "b": 1}) == {"b": 1}


def test_given_nulls_inside_a_new_nested_object_when_merged_then_they_are_not_stored() -> None:
    assert deep_merge({"x": 1}, {"n": {"deep": {"gone": None, "kept": 2}, "also": None}}) == {
        "x": 1,
        "n": {"deep": {"kept": 2}},
    }


def test_given_an_array_when_merged_then_it_replaces_the_stored_array() -> None:
    assert deep_merge({"tags": ["a", "b"]}, {"tags": ["c"]}) == {"tags": ["c"]}


def test_given_an_empty_array_when_merged_then_an_empty_array_is_stored() -> None:
    assert deep_merge({"tags": ["a"]}, {"tags": []}) == {"tags": []}


def test_given_objects_when_merged_then_they_merge_recursively() -> None:
    stored = {"prefs": {"tea": "green", "diet": {"vegan": True, "nuts": False}}}
    update = {"prefs": {"diet": {"nuts": True}}}
    assert deep_merge(stored, update) == {"prefs": {"tea": "green", "diet": {"vegan": True, "nuts": True}}}


def test_given_an_object_over_a_scalar_when_merged_then_it_replaces_it() -> None:
    assert deep_merge({"a": "text"}, {"a": {"b": 1, "c": None}}) == {"a": {"b": 1}}


def test_given_a_scalar_when_merged_then_it_overwrites() -> None:
    assert deep_merge({"a": {"b": 1}}, {"a": 5}) == {"a": 5}


def test_given_a_merge_when_done_then_neither_input_is_modified() -> None:
    stored, update = {"a": {"b": 1}}, {"a": {"c": 2}}
    deep_merge(stored, update)
    assert stored == {"a": {"b": 1}} and update == {"a": {"c": 2}}


def test_given_padding_nulls_in_optional_fields_when_stripped_then_they_mean_unchanged() -> None:
    update = {"name": "Ada", "tags": None, "prefs": {"tea": None, "diet": "veg"}}
    assert strip_padding_nulls(update, SCHEMA) == {"name": "Ada", "prefs": {"diet": "veg"}}


def test_given_null_for_a_nullable_optional_field_when_stripped_then_it_is_padding_too() -> None:
    assert strip_padding_nulls({"city": None}, SCHEMA) == {}


def test_given_null_for_a_required_field_when_stripped_then_it_is_kept_as_a_delete() -> None:
    assert strip_padding_nulls({"name": None}, SCHEMA) == {"name": None}


def test_given_null_for_an_undescribed_key_when_stripped_then_it_is_kept_as_a_delete() -> None:
    assert strip_padding_nulls({"extra": None}, SCHEMA) == {"extra": None}


def test_given_a_pydantic_style_ref_schema_when_stripped_then_refs_and_nullable_branches_are_followed() -> (
    None
):
    schema = {
        "type": "object",
        "properties": {"pet": {"anyOf": [{"$ref": "#/$defs/Pet"}, {"type": "null"}]}},
        "$defs": {"Pet": {"type": "object", "properties": {"kind": {"type": "string"}}}},
    }
    assert strip_padding_nulls({"pet": {"kind": None}}, schema) == {"pet": {}}


def test_given_a_schema_when_skeleton_then_every_field_has_an_empty_value() -> None:
    assert skeleton(SCHEMA) == {"name": "", "city": "", "prefs": {"tea": "", "diet": ""}, "tags": []}


def test_given_defaults_booleans_and_nested_objects_when_skeleton_then_the_record_honours_the_schema() -> (
    None
):
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "language": {"type": "string", "default": "en"},
            "newsletter": {"type": "boolean"},
            "verified": {"type": "boolean", "default": True},
            "age": {"type": "integer"},
            "limits": {"type": "object", "properties": {"daily": {"type": "integer", "default": 3}}},
            "address": {
                "anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}],
                "default": None,
            },
        },
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "primary": {"type": "boolean"}},
            }
        },
    }
    assert skeleton(schema) == {
        "language": "en",
        "newsletter": False,
        "verified": True,
        "age": None,
        "limits": {"daily": 3},
        "address": {"city": "", "primary": False},
    }
