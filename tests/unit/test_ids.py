"""Thread and resource ids are path segments of the HTTP API: one rule (``memstack.model.check_routable_id``)
that agrees with the resolver's path-parameter pattern, and data stored under another id before the rule
can still be copied out and removed."""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime

import pytest
from aws_lambda_powertools.event_handler.api_gateway import _SAFE_URI, _UNSAFE_URI

from memstack import InvalidInput, Memory, NotFound
from memstack.model import Thread, check_id, is_routable

POWERTOOLS_PARAMETER = re.compile(rf"[{_SAFE_URI}{_UNSAFE_URI}\w]+")
"""The pattern Powertools' resolver matches a ``<name>`` of a rule with (``_NAMED_GROUP_BOUNDARY_PATTERN``)."""


def test_given_every_character_then_an_id_of_it_is_routable_exactly_when_powertools_matches_it_and_it_is_not_a_percent() -> (
    None
):
    differ = [
        hex(code)
        for code in range(sys.maxunicode + 1)
        if not 0xD800 <= code <= 0xDFFF
        and is_routable(f"x{chr(code)}")
        != (chr(code) != "%" and POWERTOOLS_PARAMETER.fullmatch(f"x{chr(code)}") is not None)
    ]
    assert differ == []


def test_given_every_character_below_u0800_then_an_id_holding_it_is_refused_exactly_when_it_is_c0_or_del() -> (
    None
):
    refused = []
    for code in range(0x800):
        try:
            check_id(f"a{chr(code)}b", "thread_id")
        except InvalidInput as exc:
            assert exc.field == "thread_id" and "control characters" in str(exc)
            refused.append(code)
    assert refused == [*range(32), 127]  # C1 controls (0x80-0x9f) and the rest are text


@pytest.mark.parametrize("dots", [".", ".."])
def test_given_a_dot_segment_then_not_routable_though_the_pattern_matches_it(dots: str) -> None:
    assert POWERTOOLS_PARAMETER.fullmatch(dots) and not is_routable(dots)


LEGACY = "a/b#ü🙂"
"""An id a version before the rule stored: no path can carry it."""


@pytest.fixture
def legacy() -> Memory:
    memory = Memory.local(":memory:", embedder="hash", background="inline")
    now = datetime.now(UTC)
    for resource_id, thread_id in ((LEGACY, "t"), ("u1", LEGACY)):
        memory.store.create_thread(
            Thread(id=thread_id, resource_id=resource_id, created_at=now, updated_at=now)
        )
    return memory


def test_given_a_thread_stored_under_an_unroutable_id_then_it_can_be_copied_to_a_routable_one_and_deleted(
    legacy: Memory,
) -> None:
    assert [t.id for t in legacy.list_threads(resource_id="u1").threads] == [LEGACY]
    with pytest.raises(InvalidInput):
        legacy.get_thread(resource_id="u1", thread_id=LEGACY)
    assert legacy.clone_thread(
        resource_id="u1", source_thread_id=LEGACY, new_thread_id="moved"
    ).thread.id == ("moved")
    legacy.delete_thread(resource_id="u1", thread_id=LEGACY)
    assert [t.id for t in legacy.list_threads(resource_id="u1").threads] == ["moved"]
    with pytest.raises(NotFound):
        legacy.delete_thread(resource_id="u1", thread_id=LEGACY)


def test_given_a_resource_stored_under_an_unroutable_id_then_erasing_it_is_never_blocked(
    legacy: Memory,
) -> None:
    with pytest.raises(InvalidInput):
        legacy.list_threads(resource_id=LEGACY)
    assert legacy.erase_resource(resource_id=LEGACY).counts["threads"] == 1
    assert legacy.store.get_thread(LEGACY, "t") is None
