"""The pure parts of the benchmarks (benchmarks/common.py): percentiles, spreads, tables, multi-session evidence."""

from __future__ import annotations

import pytest
from benchmarks.common import (
    evidence_sessions,
    fmt_spread,
    is_multi_session,
    markdown_table,
    percentile,
    spread,
)


def test_given_values_when_percentile_then_nearest_rank_like_the_mastra_peer() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 0.5) == 3.0  # sorted[floor(0.5*5)] = sorted[2]
    assert percentile(values, 0.95) == 5.0  # sorted[min(4, floor(4.75))]
    assert percentile(values, 0.0) == 1.0
    assert percentile([7.0, 1.0], 0.5) == 7.0, (
        "two values: index floor(1.0) = the larger, as the peer's pct()"
    )


def test_given_no_values_or_a_bad_quantile_when_percentile_then_value_error() -> None:
    with pytest.raises(ValueError):
        percentile([], 0.5)
    with pytest.raises(ValueError):
        percentile([1.0], 1.5)


def test_given_run_p50s_when_spread_then_median_min_max_and_run_count() -> None:
    s = spread([3.0, 1.0, 2.0])
    assert s == {"median": 2.0, "min": 1.0, "max": 3.0, "runs": 3}
    assert fmt_spread(s) == "2.00 (1.00–3.00, 3 runs)"
    assert fmt_spread(spread([1.5])) == "1.50 (1 run)"
    assert fmt_spread(None) == "not run"


def test_given_rows_when_markdown_table_then_header_separator_and_escaped_cells() -> None:
    table = markdown_table(["a", "b"], [[1, "x|y"], ["2", 0.5]])
    assert table.splitlines() == ["| a | b |", "|---|---|", "| 1 | x\\|y |", "| 2 | 0.5 |"]


def test_given_a_short_row_when_markdown_table_then_value_error() -> None:
    with pytest.raises(ValueError, match="1 cells"):
        markdown_table(["a", "b"], [[1]])


def test_given_locomo_dia_ids_when_evidence_sessions_then_sessions_from_the_d_prefix() -> None:
    assert evidence_sessions(["D1:3", "D1:9"]) == {"1"}
    assert evidence_sessions(["conv-26:D2:1", "conv-26:D10:4"]) == {"2", "10"}
    assert evidence_sessions(["garbage"]) == set()


def test_given_a_session_map_when_evidence_sessions_then_the_map_wins() -> None:
    session_of = {"conv-26:D1:3": "conv-26-session_1", "conv-26:D1:4": "conv-26-session_1"}
    assert evidence_sessions(["conv-26:D1:3", "conv-26:D1:4"], session_of) == {"conv-26-session_1"}


def test_given_evidence_in_two_sessions_when_is_multi_session_then_true_and_one_session_false() -> None:
    assert is_multi_session(["D1:3", "D4:2"])
    assert not is_multi_session(["D1:3", "D1:5"])
    assert not is_multi_session([])
