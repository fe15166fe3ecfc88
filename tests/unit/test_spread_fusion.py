"""Spread-weighted hybrid fusion (docs/adr/0011-spread-weighted-fusion.md): the list whose own scores
separate its best candidates from the rest leads for that query; each embedder's prior weight."""

from __future__ import annotations

import random

import pytest

from memstack.adapters.hash_embed import HashEmbedder
from memstack.config import SemanticRecallOptions
from memstack.fusion import list_spread, neighbour_support, spread_weights
from memstack.ports import IndexHit
from memstack.recall.engine import DEFAULT_FUSION_WEIGHT, fusion_weight, list_depth, rank_hits


def scored(prefix: str, *scores: float) -> list[IndexHit]:
    return [IndexHit(f"{prefix}{n}", "t", s, seq=100 * n) for n, s in enumerate(scores, start=1)]


def test_given_scores_when_spread_measured_then_it_is_the_share_of_the_best_score_above_the_worst() -> None:
    assert list_spread([0.8, 0.6, 0.4], depth=3) == pytest.approx(0.5)
    assert list_spread([10.0, 9.0, 9.0], depth=3) == pytest.approx(0.1)


def test_given_a_list_shorter_than_asked_when_spread_measured_then_its_missing_tail_scores_zero() -> None:
    assert list_spread([5.0], depth=16) == 1.0
    assert list_spread([5.0, 5.0], depth=2) == 0.0


def test_given_no_or_non_positive_scores_when_spread_measured_then_it_is_zero() -> None:
    assert list_spread([], depth=4) == 0.0
    assert list_spread([0.0, -0.1], depth=2) == 0.0


def test_given_a_flat_vector_list_and_a_peaked_keyword_list_then_the_keyword_list_gets_the_weight() -> None:
    wv, wk = spread_weights(
        [0.61, 0.60, 0.60, 0.59], [9.0, 3.0, 2.0, 1.0], vector_weight=1.0, keyword_weight=1.0, depth=4
    )
    assert wk > 1.5 > 0.2 > wv


def test_given_equal_spreads_then_the_prior_weights_stand() -> None:
    assert spread_weights([0.8, 0.4], [8.0, 4.0], vector_weight=0.7, keyword_weight=1.0, depth=2) == (
        pytest.approx(0.7),
        pytest.approx(1.0),
    )
    assert spread_weights([0.5, 0.5], [2.0, 2.0], vector_weight=0.7, keyword_weight=1.0, depth=2) == (
        0.7,
        1.0,
    )


def test_given_a_peaked_vector_list_when_ranked_with_spread_weighting_then_its_best_hit_leads() -> None:
    # The keyword list matched only common words (all scores alike); the vector list singles out v1.
    vector = scored("v", 0.9, 0.3, 0.25, 0.2)
    keyword = scored("k", 2.1, 2.05, 2.0, 2.0)
    spread = rank_hits(vector, keyword, SemanticRecallOptions(top_k=1), limit=1)
    fixed = rank_hits(vector, keyword, SemanticRecallOptions(top_k=1, hybrid={"weighting": "fixed"}), limit=1)
    assert [h.message_id for h in spread] == ["v1"]
    assert [h.message_id for h in fixed] == ["k1"]  # equal priors, ties go to the keyword rank


def test_given_a_peaked_keyword_list_when_ranked_with_spread_weighting_then_its_best_hit_leads() -> None:
    vector = scored("v", 0.62, 0.61, 0.60, 0.60)
    keyword = scored("k", 12.0, 3.0, 2.5, 2.0)
    hits = rank_hits(vector, keyword, SemanticRecallOptions(top_k=1), limit=2)
    assert [h.message_id for h in hits] == ["k1", "k2"]


def test_given_the_hash_embedder_then_its_prior_is_half_and_a_semantic_embedders_is_the_default() -> None:
    class Semantic:
        model_id, dimension, symmetric = "semantic", 2, True

    assert fusion_weight(HashEmbedder(8)) == 0.5
    assert fusion_weight(Semantic()) == DEFAULT_FUSION_WEIGHT == 1.0  # type: ignore[arg-type]


def test_given_an_explicit_vector_weight_when_ranked_then_it_overrides_the_embedders_prior() -> None:
    vector = scored("v", 0.9, 0.3)
    keyword = scored("k", 9.0, 3.0)  # the same spread on both sides: the priors decide
    options = SemanticRecallOptions(top_k=1, hybrid={"vector_weight": 2.0})
    assert rank_hits(vector, keyword, options, limit=1, vector_prior=0.1)[0].message_id == "v1"
    assert (
        rank_hits(vector, keyword, SemanticRecallOptions(top_k=1), limit=1, vector_prior=0.1)[0].message_id
        == "k1"
    )


def test_given_hybrid_options_when_depth_asked_then_it_follows_top_k_times_candidates() -> None:
    options = SemanticRecallOptions(top_k=4)
    assert list_depth(options, 12) == 16
    assert list_depth(options, 40) == 40
    assert list_depth(SemanticRecallOptions(top_k=4, mode="vector"), 12) == 12


def test_given_random_candidates_when_supported_then_each_sum_is_its_window_neighbours_summed_in_seq_order() -> (
    None
):
    """``neighbour_support`` against its definition, term by term: every candidate with another inside
    its window gets their base scores summed in ``seq`` order (bit for bit: fusion ranks on these sums),
    and a candidate alone in its window is left out."""
    rng = random.Random(7)
    for _ in range(300):
        hits = [
            IndexHit(f"m{i}", rng.choice(["a", "b"]), 1.0, seq=seq)
            for i, seq in enumerate(rng.sample(range(1, 60), rng.randint(1, 25)))
        ]
        base = {h.message_id: rng.random() / rng.randint(1, 9) for h in hits}
        before, after = rng.randint(0, 3), rng.randint(0, 3)
        got = neighbour_support(base, hits, before, after)
        for h in hits:
            inside = sorted(
                (o.seq, o.message_id)
                for o in hits
                if o.thread_id == h.thread_id and h.seq - before <= o.seq <= h.seq + after
            )
            if len(inside) == 1:
                assert h.message_id not in got
            else:
                assert got[h.message_id] == sum(base[m] for _, m in inside) - base[h.message_id]
