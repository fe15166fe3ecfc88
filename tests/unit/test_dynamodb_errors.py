"""Deployment mistakes on the DynamoDB store come back as clear errors naming the setting to check."""

from __future__ import annotations

from collections.abc import Iterator

import moto
import pytest

from memstack.adapters.dynamodb import DynamoDBMemoryStore, create_table
from memstack.errors import InvalidInput, Unavailable


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    from memstack.adapters import aws_session

    # the adapters share one botocore session per process, which caches credentials: start afresh
    monkeypatch.setattr(aws_session, "_session", None)
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield monkeypatch


def test_given_no_region_when_the_store_is_used_then_invalid_input_names_memstack_region(
    env: pytest.MonkeyPatch,
) -> None:
    env.setenv("AWS_ACCESS_KEY_ID", "testing")
    env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with pytest.raises(InvalidInput) as err:
        DynamoDBMemoryStore(table_name="memstack").get_thread("r1", "t1")
    assert err.value.field == "MEMSTACK_REGION" and "region" in str(err.value)


def test_given_no_credentials_when_the_store_is_used_then_invalid_input_says_so(
    env: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        env.delenv(name, raising=False)
    env.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with pytest.raises(InvalidInput) as err:
        DynamoDBMemoryStore(table_name="memstack", endpoint_url="http://127.0.0.1:9").get_thread("r1", "t1")
    assert "credentials" in str(err.value)


def test_given_a_missing_table_when_the_store_is_used_then_unavailable_names_the_setting(
    env: pytest.MonkeyPatch,
) -> None:
    env.setenv("AWS_ACCESS_KEY_ID", "testing")
    env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    env.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with moto.mock_aws():
        with pytest.raises(Unavailable) as err:
            DynamoDBMemoryStore(table_name="nope").get_thread("r1", "t1")
        assert "MEMSTACK_TABLE" in str(err.value) and "MEMSTACK_CREATE_RESOURCES" in str(err.value)
        create_table(table_name="exists")
        store = DynamoDBMemoryStore(table_name="exists", bucket="missing-bucket", inline_max_bytes=10)
        from datetime import UTC, datetime

        from memstack.model import Message, TextPart, Thread

        now = datetime.now(UTC)
        with pytest.raises(Unavailable) as err:
            store.save_messages(
                "r1",
                "t1",
                [
                    Message(
                        id="m1",
                        thread_id="t1",
                        resource_id="r1",
                        role="user",
                        parts=(TextPart(text="x" * 50),),
                        created_at=now,
                    )
                ],
                create=Thread(id="t1", resource_id="r1", created_at=now, updated_at=now),
            )
        assert "MEMSTACK_BUCKET" in str(err.value)


def test_given_a_closed_endpoint_when_the_store_is_used_then_unavailable_names_the_endpoint(
    env: pytest.MonkeyPatch,
) -> None:
    env.setenv("AWS_ACCESS_KEY_ID", "testing")
    env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    env.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with pytest.raises(Unavailable) as err:
        DynamoDBMemoryStore(table_name="memstack", endpoint_url="http://127.0.0.1:9").get_thread("r1", "t1")
    assert "127.0.0.1:9" in str(err.value)
