"""The OpenAI key from Secrets Manager (``MEMSTACK_OPENAI_API_KEY_SECRET_ARN``), read lazily by bootstrap."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from memstack import bootstrap
from memstack.errors import InvalidInput, Unavailable
from memstack.settings import load_settings

REGION = "us-east-1"


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MEMSTACK_OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(bootstrap, "_secret_values", {})
    with mock_aws():
        yield boto3.client("secretsmanager", region_name=REGION)


def test_given_a_secret_arn_when_the_key_is_asked_then_it_is_read_once_per_process(secrets: Any) -> None:
    arn = secrets.create_secret(Name="memstack/openai", SecretString="sk-test\n")["ARN"]
    settings = load_settings(openai_api_key_secret_arn=arn, region=REGION)

    assert bootstrap.openai_api_key(settings) == "sk-test"
    secrets.put_secret_value(SecretId=arn, SecretString="sk-rotated")
    assert bootstrap.openai_api_key(settings) == "sk-test"  # cached: one read per cold start


def test_given_a_plain_key_when_a_secret_is_also_set_then_the_plain_key_wins_without_a_request(
    secrets: Any,
) -> None:
    settings = load_settings(
        openai_api_key="sk-plain", openai_api_key_secret_arn="arn:aws:secretsmanager:us-east-1:1:secret:none"
    )

    assert bootstrap.openai_api_key(settings) == "sk-plain"


def test_given_neither_when_the_key_is_asked_then_it_is_none(secrets: Any) -> None:
    assert bootstrap.openai_api_key(load_settings()) is None


def test_given_a_missing_secret_when_the_key_is_asked_then_unavailable_names_the_setting(
    secrets: Any,
) -> None:
    settings = load_settings(
        openai_api_key_secret_arn="arn:aws:secretsmanager:us-east-1:123456789012:secret:missing",
        region=REGION,
    )

    with pytest.raises(Unavailable) as caught:
        bootstrap.openai_api_key(settings)
    assert caught.value.field == "MEMSTACK_OPENAI_API_KEY_SECRET_ARN"


def test_given_an_empty_secret_when_the_key_is_asked_then_invalid_input(secrets: Any) -> None:
    arn = secrets.create_secret(Name="memstack/empty", SecretString="  ")["ARN"]

    with pytest.raises(InvalidInput):
        bootstrap.openai_api_key(load_settings(openai_api_key_secret_arn=arn, region=REGION))


def test_given_a_secret_when_the_aws_chat_model_is_made_then_it_gets_the_secret_key(secrets: Any) -> None:
    arn = secrets.create_secret(Name="memstack/chat", SecretString="sk-chat")["ARN"]

    chat = bootstrap.make_chat_model(load_settings(openai_api_key_secret_arn=arn, region=REGION))

    assert chat is not None
