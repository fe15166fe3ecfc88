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
from tests.secrets_extension_double import SecretsExtensionDouble

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


# the Parameters and Secrets Lambda Extension ----------------------------------------------------------


@pytest.fixture
def clients_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The services of the botocore clients made from the shared session."""
    from memstack.adapters import aws_session

    made: list[str] = []
    real = aws_session.create_client

    def create_client(service: str, **kwargs: Any) -> Any:
        made.append(service)
        return real(service, **kwargs)

    monkeypatch.setattr(aws_session, "create_client", create_client)
    return made


@pytest.fixture
def extension(secrets: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[SecretsExtensionDouble]:
    monkeypatch.delenv("AWS_SECURITY_TOKEN", raising=False)  # botocore reads it before AWS_SESSION_TOKEN
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token")
    with SecretsExtensionDouble(secrets.get_secret_value, token="session-token") as double:
        yield double


def test_given_the_extension_when_the_key_is_asked_then_it_answers_with_the_session_token_and_no_client_is_made(
    secrets: Any, extension: SecretsExtensionDouble, clients_made: list[str]
) -> None:
    arn = secrets.create_secret(Name="memstack/openai", SecretString="sk-extension\n")["ARN"]
    settings = load_settings(
        openai_api_key_secret_arn=arn, region=REGION, secrets_extension_port=extension.port
    )

    assert bootstrap.openai_api_key(settings) == "sk-extension"
    assert extension.requests == [arn]
    assert clients_made == [], "a secretsmanager client was made beside the extension"


@pytest.mark.parametrize("status", [400, 401, 500])
def test_given_an_extension_that_fails_when_the_key_is_asked_then_the_client_reads_it(
    secrets: Any, extension: SecretsExtensionDouble, clients_made: list[str], status: int
) -> None:
    arn = secrets.create_secret(Name="memstack/openai", SecretString="sk-client")["ARN"]
    extension.status = status
    settings = load_settings(
        openai_api_key_secret_arn=arn, region=REGION, secrets_extension_port=extension.port
    )

    assert bootstrap.openai_api_key(settings) == "sk-client"
    assert extension.requests == [arn]
    assert clients_made == ["secretsmanager"]


def test_given_no_extension_listening_when_the_key_is_asked_then_the_client_reads_it(
    secrets: Any, clients_made: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_SECURITY_TOKEN", raising=False)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token")
    arn = secrets.create_secret(Name="memstack/openai", SecretString="sk-client")["ARN"]
    with SecretsExtensionDouble(secrets.get_secret_value, token="session-token") as closed:
        port = closed.port  # a port that was just free, nothing listening once closed
    settings = load_settings(openai_api_key_secret_arn=arn, region=REGION, secrets_extension_port=port)

    assert bootstrap.openai_api_key(settings) == "sk-client"
    assert clients_made == ["secretsmanager"]


def test_given_credentials_without_a_session_token_when_the_key_is_asked_then_the_extension_is_not(
    secrets: Any, extension: SecretsExtensionDouble, clients_made: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    arn = secrets.create_secret(Name="memstack/openai", SecretString="sk-client")["ARN"]
    settings = load_settings(
        openai_api_key_secret_arn=arn, region=REGION, secrets_extension_port=extension.port
    )

    assert bootstrap.openai_api_key(settings) == "sk-client"
    assert extension.requests == []


def test_given_a_missing_secret_through_the_extension_when_the_key_is_asked_then_the_clients_error_is_raised(
    secrets: Any, extension: SecretsExtensionDouble
) -> None:
    settings = load_settings(
        openai_api_key_secret_arn="arn:aws:secretsmanager:us-east-1:123456789012:secret:missing",
        region=REGION,
        secrets_extension_port=extension.port,
    )

    with pytest.raises(Unavailable) as caught:
        bootstrap.openai_api_key(settings)
    assert caught.value.field == "MEMSTACK_OPENAI_API_KEY_SECRET_ARN"


def test_given_a_port_out_of_range_when_settings_are_read_then_the_variable_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PARAMETERS_SECRETS_EXTENSION_HTTP_PORT", "70000")

    with pytest.raises(InvalidInput) as caught:
        load_settings()
    assert caught.value.field == "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT"
