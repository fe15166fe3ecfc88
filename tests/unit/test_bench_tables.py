"""Result rendering of the benchmarks: recall groups (per category, multi-session) and the speed growth check."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.recall_quality import CachingEmbedder, Scored, group_scores
from benchmarks.speed import growth


def test_given_scored_questions_when_grouped_then_all_each_category_and_multi_session() -> None:
    rows = [
        Scored("c", 1, True, 1.0, 10),
        Scored("c", 1, False, 0.0, 12),
        Scored("c", 4, True, 0.5, 8),
    ]
    g = group_scores(rows)
    assert g["all"] == {"evidence_recall": 0.5, "mean_context_messages": 10.0, "questions": 3}
    assert g["multi-hop"]["evidence_recall"] == 0.5
    assert g["single-hop"]["questions"] == 1
    assert g["multi-session evidence"]["evidence_recall"] == 0.75
    assert "temporal" not in g, "a category without questions has no row"


def test_given_p50s_at_sizes_when_growth_then_factor_and_exponent_from_smallest_non_empty_size() -> None:
    g = growth([(0, 1.0), (1000, 2.0), (100_000, 4.0)])
    assert g is not None
    assert (g["from"], g["to"], g["factor"], g["size_factor"]) == (1000, 100_000, 2.0, 100.0)
    assert g["exponent"] == pytest.approx(0.1505, abs=1e-3)
    assert g["sublinear"]
    linear = growth([(1000, 1.0), (100_000, 100.0)])
    assert linear is not None and not linear["sublinear"]
    assert growth([(0, 1.0), (1000, 2.0)]) is None, "one non-empty size gives no growth"


class _Counting:
    model_id, dimension, symmetric = "count-2", 2, True

    def __init__(self) -> None:
        self.calls: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += texts
        return [[float(len(t)), 0.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls.append(f"q:{text}")
        return [0.0, float(len(text))]


def test_given_repeated_texts_when_caching_embedder_then_each_text_embedded_once() -> None:
    inner = _Counting()
    cached = CachingEmbedder(inner)
    assert cached.embed_documents(["ab", "abc", "ab"]) == [[2.0, 0.0], [3.0, 0.0], [2.0, 0.0]]
    cached.embed_documents(["abc"])
    assert cached.embed_query("ab") == [0.0, 2.0]
    cached.embed_query("ab")
    assert inner.calls == ["ab", "abc", "q:ab"]


def test_given_per_resource_figures_when_checked_then_each_target_names_its_figures_and_verdict() -> None:
    from benchmarks.speed import resource_checks

    def figures(save: float, hybrid: float, vector: float, keyword: float) -> dict[str, object]:
        one = {"median": 0.0, "min": 0.0, "max": 0.0, "runs": 1}
        return {
            "save_ms_p50": {**one, "median": save},
            "context_ms_p50": {**one, "median": hybrid},
            "context_vector_ms_p50": {**one, "median": vector},
            "context_keyword_ms_p50": {**one, "median": keyword},
        }

    one = [
        {
            "size": 1000,
            "memstack": figures(0.8, 2.0, 1.0, 1.0),
            "mastra": {"context_ms_p50": {"median": 9.0}},
        },
        {
            "size": 100_000,
            "memstack": figures(1.2, 3.9, 12.0, 1.5),
            "mastra": {"context_ms_p50": {"median": 10.0}},
            "mastra_stored": 23_000,
        },
    ]
    corpus = [
        {"size": 10_000, "memstack": {**figures(0.7, 2.0, 0, 0), "context_cpu_ms_p50": {"median": 1.0}}},
        {"size": 100_000, "memstack": {**figures(0.7, 2.5, 0, 0), "context_cpu_ms_p50": {"median": 1.1}}},
        {"size": 1_000_000, "memstack": {**figures(0.7, 2.7, 0, 0), "context_cpu_ms_p50": {"median": 1.2}}},
    ]

    verdicts = {c["target"]: c["holds"] for c in resource_checks(one, corpus)}

    assert verdicts == {
        "hybrid context p50 at 100000 <= 2x at 1000 (one resource)": True,
        "vector context p50 at 100000 <= 2x at 1000 (one resource)": False,
        "keyword context p50 at 100000 <= 2x at 1000 (one resource)": True,
        "hybrid context p50 below Mastra's recall at 1000 (one resource)": True,
        "vector context p50 below Mastra's recall at 1000 (one resource)": True,
        "keyword context p50 below Mastra's recall at 1000 (one resource)": True,
        "hybrid context p50 below Mastra's recall at 100000 (Mastra at 23000) (one resource)": True,
        "vector context p50 below Mastra's recall at 100000 (Mastra at 23000) (one resource)": False,
        "keyword context p50 below Mastra's recall at 100000 (Mastra at 23000) (one resource)": True,
        "save p50 <= 1 ms at 1000 (one resource)": True,
        "save p50 <= 1 ms at 100000 (one resource)": False,
        "context p50 at 100000 stored <= 1.3x at 10000 (a new resource)": True,
        "context CPU ms p50 at 100000 stored <= 1.3x at 10000 (a new resource)": True,
        "context p50 at 1000000 stored <= 1.3x at 10000 (a new resource)": False,
        "context CPU ms p50 at 1000000 stored <= 1.3x at 10000 (a new resource)": True,
    }


def test_given_mastra_stopped_by_its_growth_budget_when_attached_then_each_size_says_where_it_was_measured() -> (
    None
):
    from benchmarks.speed import _attach_mastra

    def measured(stored: int, hit: bool) -> dict[str, object]:
        return {"stored_before": stored, "mastra": {"m": stored}, "mastra_grow_s": 1.0, "budget_hit": hit}

    entries: list[dict[str, object]] = [{"size": 1000}, {"size": 10_000}, {"size": 100_000}]
    _attach_mastra(entries, {"sizes": [measured(1000, False), measured(4200, True)]}, "skipped")

    assert entries[0]["mastra_stored"] == 1000 and "mastra_note" not in entries[0]
    assert entries[1]["mastra_stored"] == 4200
    assert "measured at 4200" in str(entries[1]["mastra_note"])
    assert entries[2]["mastra_note"] == "not reached: growth budget spent" and "mastra" not in entries[2]

    entries = [{"size": 1000}]
    _attach_mastra(entries, {"note": "not run: no node"}, "skipped")
    assert entries[0]["mastra_note"] == "not run: no node"
    entries = [{"size": 1000}, {"size": 10_000}]
    _attach_mastra(entries, {"sizes": [measured(1000, False)]}, "not run: above --mastra-max 1000")
    assert entries[1]["mastra_note"] == "not run: above --mastra-max 1000"


def test_given_a_dataset_without_multi_session_questions_when_rendered_then_no_such_column() -> None:
    from benchmarks.recall_quality import render_dataset

    groups = {
        "all": {"evidence_recall": 0.5, "mean_context_messages": 3.0, "questions": 2},
        "temporal-reasoning": {"evidence_recall": 1.0, "mean_context_messages": 3.0, "questions": 1},
    }
    config = {"system": "memstack", "embedder": "hash", "mode": "hybrid", "top_k": 4, "groups": groups}
    dataset = {"title": "LongMemEval", "data": "d", "conversations": 1, "questions": 2, "configs": [config]}
    text = "\n".join(render_dataset(dataset))
    assert "| memstack | hash | **hybrid** | 4 | 0.500 | 1.000 | – | 3.0 | 2 |" in text, (
        "temporal is its own column"
    )
    assert "multi-session evidence (" not in text


def test_given_a_run_of_one_scenario_only_when_plotted_then_the_other_panel_says_not_measured(
    tmp_path: Path,
) -> None:
    from benchmarks.speed import _mode_key, plot_resource

    def entry(size: int) -> dict[str, object]:
        figures = {
            _mode_key(mode, "p50"): {"median": 1.0 + size / 1e5} for mode in ("hybrid", "vector", "keyword")
        }
        return {"size": size, "memstack": {**figures, "context_cpu_ms_p50": {"median": 1.0}}}

    png = plot_resource({"one": [entry(1000), entry(100_000)], "corpus": []}, tmp_path / "speed.png")

    assert png is not None and png.stat().st_size > 0


def test_given_corpus_probe_runs_when_rendered_then_each_size_is_compared_with_the_smallest_file() -> None:
    from benchmarks.common import rotated
    from benchmarks.corpus_probe import render

    def run(size: int, regime: str, rep: int, save_cpu: float, context_cpu: float) -> dict[str, object]:
        return {
            "size": size,
            "regime": regime,
            "rep": rep,
            "load": 2.0 + rep,
            "save_ms_p50": save_cpu + 0.1,
            "save_cpu_ms_p50": save_cpu,
            "save_reads": 12.0,
            "context_ms_p50": context_cpu + 0.1,
            "context_cpu_ms_p50": context_cpu,
            "context_reads": None,
        }

    runs = [
        *(run(10_000, regime, rep, 1.0, 2.0 + rep) for regime in ("apart", "turns") for rep in range(3)),
        *(run(1_000_000, regime, rep, 1.1, 2.6 + rep) for regime in ("apart", "turns") for rep in range(3)),
    ]
    report = render(
        {
            "machine": {"cpu": "test", "cores": 2, "os": "Linux", "python": "3.11", "date": "today"},
            "reps": 3,
            "sizes": [10_000, 1_000_000],
            "file_mb": {"10000": 30, "1000000": 3019},
            "runs": runs,
            "notes": ["a note"],
        }
    )

    assert "| apart | 1000000 | 3019 | 1.20 (1.10) | 3.70 (3.60) | x1.10 / x1.20 | 12.0 | n/a |" in report
    assert "| turns | 10000 | 30 | 1.10 (1.00) | 3.10 (3.00) | x1.00 / x1.00 | 12.0 | n/a |" in report
    assert "load average 2.0–4.0" in report and "* a note" in report
    assert [rotated([1, 2, 3], n) for n in range(4)] == [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3]]
