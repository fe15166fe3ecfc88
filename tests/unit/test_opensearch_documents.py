"""How the OpenSearch adapter lays metadata out in typed fields for filtering."""

from __future__ import annotations

from memstack.adapters.opensearch.documents import field_name, flatten


def test_given_nested_metadata_when_flattened_then_each_path_is_typed_and_arrays_are_not_descended() -> None:
    fields = flatten(
        {
            "tier": ["pro", "beta", 3, None, ["x"], {"y": 1}],
            "profile": {"city": "Paris", "level": 3, "ok": True},
            "note": None,
            "a.b": "unreachable",
            "": "unreachable",
            "list": [{"b": 1}],
        }
    )

    assert fields == {
        "meta_s": {"tier": ["pro", "beta"], "profile/city": ["Paris"]},
        "meta_n": {"tier": [3], "profile/level": [3]},
        "meta_b": {"profile/ok": [True]},
        "meta_null": ["tier", "note"],
        "meta_paths": ["tier", "profile", "profile.city", "profile.level", "profile.ok", "note", "list"],
    }


def test_given_odd_keys_when_naming_fields_then_no_dot_or_pattern_character_remains() -> None:
    assert field_name("a b.c*d/e") == "a%20b/c%2Ad%2Fe"
