"""Settings and bootstrap of the background observation path: ``MEMSTACK_OPTIONS`` (checked on load, errors
name the variable), ``MEMSTACK_OBSERVATION_STATE_MACHINE_ARN`` → ``StepFunctionsScheduler``, and the chat
model made only when the options use one."""

from __future__ import annotations

import pytest

from memstack.bootstrap import chat_model_for, scheduler_for
from memstack.config import MemoryOptions
from memstack.errors import InvalidInput
from memstack.observation.requirements import needs_chat_model
from memstack.settings import load_settings

ARN = "arn:aws:states:eu-west-1:123456789012:stateMachine:ObservationStateMachine-AbC_12"


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "MEMSTACK_OPTIONS",
        "MEMSTACK_OBSERVATION_STATE_MACHINE_ARN",
        "OPENAI_API_KEY",
        "MEMSTACK_OPENAI_API_KEY",
        "MEMSTACK_OPENAI_API_KEY_SECRET_ARN",
        "MEMSTACK_REGION",
    ):
        monkeypatch.delenv(name, raising=False)


def test_given_options_json_when_loaded_then_they_are_the_settings_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "MEMSTACK_OPTIONS", '{"observational_memory": {"scope": "resource"}, "last_messages": 5}'
    )
    options = load_settings().options
    assert options == {"observational_memory": {"scope": "resource"}, "last_messages": 5}
    assert MemoryOptions.parse(options).observational_memory.scope == "resource"
    monkeypatch.setenv("MEMSTACK_OPTIONS", " ")
    assert load_settings().options is None


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("{not json", "JSON object"),
        ("[1, 2]", "JSON object"),
        ('{"observational_memory": {"scope": "galaxy"}}', "observational_memory.scope"),
        ('{"last_messages": -1}', "last_messages"),
    ],
)
def test_given_bad_options_when_loaded_then_the_error_names_the_variable_and_the_option(
    monkeypatch: pytest.MonkeyPatch, value: str, words: str
) -> None:
    monkeypatch.setenv("MEMSTACK_OPTIONS", value)
    with pytest.raises(InvalidInput) as caught:
        load_settings()
    assert caught.value.field == "MEMSTACK_OPTIONS"
    assert words in caught.value.message


def test_given_a_state_machine_arn_then_a_step_functions_scheduler_is_made_without_connecting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memstack.adapters.stepfunctions import StepFunctionsScheduler

    assert scheduler_for(load_settings()) is None
    monkeypatch.setenv("MEMSTACK_OBSERVATION_STATE_MACHINE_ARN", ARN)
    scheduler = scheduler_for(load_settings())
    assert isinstance(scheduler, StepFunctionsScheduler)
    assert scheduler.state_machine_arn == ARN and scheduler.region == "eu-west-1"
    assert scheduler._client is None
    monkeypatch.setenv("MEMSTACK_REGION", "us-west-2")  # other clients' region: the ARN's still wins
    scheduler = scheduler_for(load_settings())
    assert scheduler is not None and scheduler.region == "eu-west-1"  # type: ignore[attr-defined]


def test_given_a_malformed_arn_then_the_error_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTACK_OBSERVATION_STATE_MACHINE_ARN", "arn:aws:lambda:eu-west-1:1:function:x")
    with pytest.raises(InvalidInput) as caught:
        load_settings()
    assert caught.value.field == "MEMSTACK_OBSERVATION_STATE_MACHINE_ARN"


def test_given_options_without_background_work_then_no_chat_model_and_no_key_needed() -> None:
    settings = load_settings()
    assert not needs_chat_model(MemoryOptions.parse(None))
    assert chat_model_for(settings, None) is None
    assert chat_model_for(settings, {"semantic_recall": False}) is None


@pytest.mark.parametrize("options", [{"observational_memory": True}, {"generate_title": True}])
def test_given_background_work_without_a_key_then_the_error_names_openai_api_key(
    options: dict[str, bool],
) -> None:
    assert needs_chat_model(MemoryOptions.parse(options))
    with pytest.raises(InvalidInput) as caught:
        chat_model_for(load_settings(), options)
    assert caught.value.field == "OPENAI_API_KEY"


def test_given_background_work_and_a_key_then_the_chat_model_is_the_settings_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-sent")
    monkeypatch.setenv("MEMSTACK_CHAT_MODEL", "gpt-4.1-mini")
    chat = chat_model_for(load_settings(), {"observational_memory": True})
    assert chat is not None and chat.model_id.endswith("gpt-4.1-mini")
