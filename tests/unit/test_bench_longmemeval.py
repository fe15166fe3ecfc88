"""The answer-quality harness's readers (benchmarks/answer_quality.py): LongMemEval's JSON format on a tiny
fixture, the judge's verdict parsing, and the skip without a chat model."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from benchmarks.answer_quality import configured, judge_verdict, read_longmemeval

FIXTURE = [
    {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "What degree did I graduate with?",
        "answer": "Business Administration",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["s_a", "s_b"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 10:00"],
        "haystack_sessions": [
            [
                {
                    "role": "user",
                    "content": "I graduated with a degree in Business Administration.",
                    "has_answer": True,
                },
                {"role": "assistant", "content": "Congratulations!"},
            ],
            [
                {"role": "user", "content": "Any tips for a trip to Lisbon?"},
                {"role": "assistant", "content": ""},
            ],
        ],
        "answer_session_ids": ["s_a"],
    },
    {
        "question_id": "q2_abs",
        "question_type": "temporal-reasoning",
        "question": "When did I adopt a cat?",
        "answer": "You did not mention adopting a cat.",
        "haystack_sessions": [[{"role": "user", "content": "I like dogs."}]],
    },
]


@pytest.fixture
def lme_file(tmp_path: Path) -> Path:
    path = tmp_path / "longmemeval_tiny.json"
    path.write_text(json.dumps(FIXTURE))
    return path


def test_given_longmemeval_json_when_read_then_one_resource_per_instance_with_threads_per_session(
    lme_file: Path,
) -> None:
    corpora = read_longmemeval(lme_file)
    assert [c.resource_id for c in corpora] == ["lme-q1", "lme-q2_abs"]
    first = corpora[0]
    assert list(first.sessions) == ["lme-q1-s_a", "lme-q1-s_b"]
    assert [m["content"] for m in first.sessions["lme-q1-s_b"]] == ["Any tips for a trip to Lisbon?"], (
        "empty turns dropped"
    )
    assert first.sessions["lme-q1-s_a"][0]["created_at"] == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    assert first.sessions["lme-q1-s_a"][1]["role"] == "assistant"


def test_given_longmemeval_json_when_read_then_question_carries_date_answer_and_type(lme_file: Path) -> None:
    first, second = read_longmemeval(lme_file)
    (qa,) = first.questions
    assert qa.question == "(Today is 2023/05/30 (Tue) 23:40.) What degree did I graduate with?"
    assert qa.answer == "Business Administration"
    assert qa.category == "single-session-user"
    assert second.questions[0].category == "temporal-reasoning (abstention)"
    assert list(second.sessions) == ["lme-q2_abs-s0"], "session ids default to s<n> when the file has none"


def test_given_a_limit_when_read_longmemeval_then_only_the_first_instances(lme_file: Path) -> None:
    assert len(read_longmemeval(lme_file, limit=1)) == 1


def test_given_judge_replies_when_parsed_then_correct_only_for_correct() -> None:
    assert judge_verdict("CORRECT")
    assert judge_verdict(" correct.")
    assert not judge_verdict("WRONG")
    assert not judge_verdict("WRONG — not CORRECT")


def test_given_no_key_or_endpoint_when_configured_then_reason_to_skip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert configured() is not None and "OPENAI_API_KEY" in str(configured())
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert configured() is None
