"""Metadata filters: validation (errors name the field path) and the reference evaluator's semantics."""

from __future__ import annotations

import math
from typing import Any

import pytest

from memstack.errors import InvalidInput, PayloadTooLarge
from memstack.filters import MAX_CONDITIONS, MAX_DEPTH, MAX_LIST_VALUES, matches, validate_filter

# validation ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None])
def test_given_no_filter_when_validated_then_none(value: Any) -> None:
    assert validate_filter(value) is None


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"role": "user"},
        {"age": {"$gte": 18, "$lt": 65}},
        {"profile.city": {"$in": ["Paris", "Berlin"]}, "vip": True},
        {"$and": [{"a": 1}, {"$or": [{"b": None}, {"c": {"$exists": False}}]}]},
        {"$not": {"a": {"$nin": [1, "1", True, None]}}},
        {"a": {"$not": {"$not": {"$gt": 1.5}}}},
        {"a": {"$ne": None, "$eq": "x"}},
        {"a": {"$gt": True}},
        {"a": 2**63 - 1},
    ],
)
def test_given_a_well_formed_filter_when_validated_then_it_is_returned_unchanged(
    value: dict[str, Any],
) -> None:
    assert validate_filter(value) is value


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("role = user", "filter"),
        (["a"], "filter"),
        ({1: "x"}, "filter"),
        ({"$foo": 1}, "filter.$foo"),
        ({"$gt": 1}, "filter.$gt"),
        ({"$in": [1]}, "filter.$in"),
        ({"": 1}, "filter."),
        ({"a..b": 1}, "filter.a..b"),
        ({".a": 1}, "filter..a"),
        ({"a.": 1}, "filter.a."),
        ({"age": {}}, "filter.age"),
        ({"age": {"b": 1}}, "filter.age"),
        ({"age": {"$gt": 1, "b": 1}}, "filter.age"),
        ({"age": [1, 2]}, "filter.age"),
        ({"age": {"$foo": 1}}, "filter.age.$foo"),
        ({"age": {"$and": [{"a": 1}]}}, "filter.age.$and"),
        ({"age": {"$or": [{"a": 1}]}}, "filter.age.$or"),
        ({"age": {"$in": []}}, "filter.age.$in"),
        ({"age": {"$in": "x"}}, "filter.age.$in"),
        ({"age": {"$in": [1, [2]]}}, "filter.age.$in[1]"),
        ({"age": {"$nin": [1, {"a": 1}]}}, "filter.age.$nin[1]"),
        ({"age": {"$exists": 1}}, "filter.age.$exists"),
        ({"age": {"$exists": "yes"}}, "filter.age.$exists"),
        ({"age": {"$gt": None}}, "filter.age.$gt"),
        ({"age": {"$lte": [1]}}, "filter.age.$lte"),
        ({"age": {"$lt": {"x": 1}}}, "filter.age.$lt"),
        ({"age": {"$gt": math.nan}}, "filter.age.$gt"),
        ({"age": {"$eq": math.inf}}, "filter.age.$eq"),
        ({"age": {"$eq": b"x"}}, "filter.age.$eq"),
        ({"age": 2**63}, "filter.age"),
        ({"age": {"$not": 5}}, "filter.age.$not"),
        ({"age": {"$not": {}}}, "filter.age.$not"),
        ({"age": {"$not": {"b": 1}}}, "filter.age.$not"),
        ({"$and": []}, "filter.$and"),
        ({"$and": {"a": 1}}, "filter.$and"),
        ({"$or": [{}]}, "filter.$or[0]"),
        ({"$or": ["a"]}, "filter.$or[0]"),
        ({"$not": []}, "filter.$not"),
        ({"$not": {}}, "filter.$not"),
        ({"$and": [{"a": 1}, {"age": {"$gt": None}}]}, "filter.$and[1].age.$gt"),
        ({"$and": [{"a": 1}, {"age": {"$in": [1, 2, (3,)]}}]}, "filter.$and[1].age.$in[2]"),
        ({"$or": [{"a": 1}, {"$not": {"$bar": 2}}]}, "filter.$or[1].$not.$bar"),
    ],
)
def test_given_a_malformed_filter_when_validated_then_invalid_input_names_the_path(
    value: Any, field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        validate_filter(value)

    assert err.value.field == field


def test_given_a_field_name_when_validating_then_error_paths_start_with_it() -> None:
    with pytest.raises(InvalidInput) as err:
        validate_filter({"$or": [{"a": 1}, {"b": {"$regex": "x"}}]}, "semantic_recall.filter")

    assert err.value.field == "semantic_recall.filter.$or[1].b.$regex"


def _nested_and(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    for _ in range(depth - 1):
        value = {"$and": [value]}
    return value


def test_given_nesting_at_the_limit_when_validated_then_it_passes() -> None:
    assert validate_filter(_nested_and(MAX_DEPTH)) is not None


def test_given_nesting_past_the_limit_when_validated_then_invalid_input() -> None:
    with pytest.raises(InvalidInput) as err:
        validate_filter(_nested_and(MAX_DEPTH + 1))

    assert "deeper" in err.value.message
    assert err.value.field is not None and err.value.field.startswith("filter.$and[0]")


def test_given_field_level_not_past_the_depth_limit_when_validated_then_invalid_input() -> None:
    condition: dict[str, Any] = {"$gt": 1}
    for _ in range(MAX_DEPTH):
        condition = {"$not": condition}

    with pytest.raises(InvalidInput, match="deeper"):
        validate_filter({"a": condition})


def test_given_conditions_at_the_limit_when_validated_then_it_passes() -> None:
    assert validate_filter({f"k{i}": i for i in range(MAX_CONDITIONS)}) is not None


def test_given_too_many_conditions_when_validated_then_payload_too_large_names_the_filter() -> None:
    value = {"$and": [{f"k{i}": {"$gt": 0, "$lt": 10}} for i in range(MAX_CONDITIONS // 2 + 1)]}

    with pytest.raises(PayloadTooLarge) as err:
        validate_filter(value)

    assert err.value.field == "filter"
    assert str(MAX_CONDITIONS) in err.value.message


def test_given_an_in_list_past_the_limit_when_validated_then_payload_too_large() -> None:
    assert validate_filter({"a": {"$in": list(range(MAX_LIST_VALUES))}}) is not None
    with pytest.raises(PayloadTooLarge) as err:
        validate_filter({"a": {"$in": list(range(MAX_LIST_VALUES + 1))}})

    assert err.value.field == "filter.a.$in"


def test_given_a_malformed_filter_when_evaluating_then_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        matches({"a": {"$regex": "x"}}, {"a": "x"})


# evaluator ----------------------------------------------------------------------------------------

DOC: dict[str, Any] = {
    "role": "user",
    "age": 30,
    "score": 0.5,
    "vip": True,
    "muted": False,
    "note": None,
    "zip": "30",
    "tags": ["a", "b", 1, ["c"]],
    "empty": [],
    "profile": {"city": "Paris", "level": 3, "address": {"street": "Rue"}},
    "flat": "n/a",
    "a.b": "literal dotted key",
}


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        # equality, and types never mix
        ({"role": "user"}, True),
        ({"role": "User"}, False),
        ({"age": 30}, True),
        ({"age": 30.0}, True),
        ({"age": "30"}, False),
        ({"zip": 30}, False),
        ({"vip": True}, True),
        ({"vip": 1}, False),
        ({"age": True}, False),
        ({"muted": False}, True),
        ({"muted": 0}, False),
        ({"note": None}, True),
        ({"missing": None}, False),
        ({"profile": "Paris"}, False),
        # $ne / $nin match a missing key
        ({"role": {"$ne": "user"}}, False),
        ({"role": {"$ne": "admin"}}, True),
        ({"missing": {"$ne": 1}}, True),
        ({"note": {"$ne": None}}, False),
        ({"missing": {"$ne": None}}, True),
        ({"age": {"$ne": "30"}}, True),
        ({"missing": {"$nin": [1, 2]}}, True),
        ({"age": {"$nin": [1, 30]}}, False),
        # ranges: same kind only, false on missing
        ({"age": {"$gt": 29}}, True),
        ({"age": {"$gt": 30}}, False),
        ({"age": {"$gte": 30}}, True),
        ({"age": {"$lt": 30.5}}, True),
        ({"age": {"$lte": 29.9}}, False),
        ({"age": {"$gt": "29"}}, False),
        ({"zip": {"$gt": "29"}}, True),
        ({"zip": {"$lt": 100}}, False),
        ({"role": {"$gt": "admin"}}, True),
        ({"role": {"$lt": "admin"}}, False),
        ({"vip": {"$gt": False}}, True),
        ({"vip": {"$gt": 0}}, False),
        ({"age": {"$gte": False}}, False),
        ({"missing": {"$lt": 1}}, False),
        ({"missing": {"$gte": ""}}, False),
        ({"age": {"$gt": 18, "$lt": 65}}, True),
        ({"age": {"$gt": 18, "$lt": 25}}, False),
        # $in
        ({"age": {"$in": [1, 30]}}, True),
        ({"age": {"$in": ["30", True]}}, False),
        ({"note": {"$in": [None]}}, True),
        ({"missing": {"$in": [None]}}, False),
        # $exists
        ({"note": {"$exists": True}}, True),
        ({"missing": {"$exists": True}}, False),
        ({"missing": {"$exists": False}}, True),
        ({"profile.level": {"$exists": True}}, True),
        ({"profile.zip": {"$exists": False}}, True),
        # dotted paths
        ({"profile.city": "Paris"}, True),
        ({"profile.address.street": "Rue"}, True),
        ({"profile.level": {"$gte": 3}}, True),
        ({"flat.city": {"$exists": False}}, True),
        ({"tags.0": "a"}, False),
        ({"a.b": "literal dotted key"}, False),
        # arrays: any element, one level
        ({"tags": "a"}, True),
        ({"tags": "c"}, False),
        ({"tags": 1}, True),
        ({"tags": True}, False),
        ({"tags": {"$in": ["z", "b"]}}, True),
        ({"tags": {"$ne": "a"}}, False),
        ({"tags": {"$ne": "z"}}, True),
        ({"tags": {"$nin": ["a", "z"]}}, False),
        ({"tags": {"$gt": "a"}}, True),
        ({"tags": {"$gt": 1}}, False),
        ({"empty": "a"}, False),
        ({"empty": {"$ne": "a"}}, True),
        ({"empty": {"$exists": True}}, True),
        # logic
        ({"role": "user", "age": 30}, True),
        ({"role": "user", "age": 31}, False),
        ({"$and": [{"role": "user"}, {"vip": True}]}, True),
        ({"$and": [{"role": "user"}, {"vip": False}]}, False),
        ({"$or": [{"role": "admin"}, {"vip": True}]}, True),
        ({"$or": [{"role": "admin"}, {"vip": False}]}, False),
        ({"$not": {"role": "admin"}}, True),
        ({"$not": {"role": "user", "age": 30}}, False),
        ({"$not": {"role": "user", "age": 31}}, True),
        ({"age": {"$not": {"$gt": 40}}}, True),
        ({"age": {"$not": {"$gt": 20}}}, False),
        ({"missing": {"$not": {"$gt": 1}}}, True),
        ({"missing": {"$not": {"$exists": False}}}, False),
        (
            {
                "$or": [
                    {"$and": [{"age": {"$gte": 18}}, {"muted": True}]},
                    {"profile.city": {"$in": ["Paris"]}},
                ]
            },
            True,
        ),
        ({}, True),
        (None, True),
    ],
)
def test_given_a_filter_when_evaluated_against_metadata_then_mongodb_semantics_hold(
    filter: dict[str, Any] | None, expected: bool
) -> None:
    assert matches(filter, DOC) is expected


def test_given_nan_in_metadata_when_compared_then_it_never_matches() -> None:
    assert matches({"x": {"$lt": 1}}, {"x": math.nan}) is False
    assert matches({"x": {"$ne": 1}}, {"x": math.nan}) is True
