"""``StepFunctionsScheduler``: one execution per job key, ids-only input, repeats ignored, AWS errors mapped
to ``memstack.errors`` (moto for the happy paths, botocore's Stubber for throttling and refusals)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from memstack.adapters.stepfunctions import StepFunctionsScheduler
from memstack.errors import InvalidInput, Throttled, Unavailable
from memstack.ports import ObservationJob, ObservationScheduler

DEFINITION = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}})
JOB = ObservationJob(resource_id="r1", thread_id="t1", key="om-abc-v1-s4-threshold", reason="threshold")


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    import boto3
    import moto

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with moto.mock_aws():
        client = boto3.client("stepfunctions", region_name="us-east-1")
        arn = client.create_state_machine(
            name="observation",
            definition=DEFINITION,
            roleArn="arn:aws:iam::123456789012:role/observation",
        )["stateMachineArn"]
        yield client, arn


def test_given_a_job_when_submitted_then_one_execution_named_by_its_key_gets_the_ids(
    aws: tuple[Any, str],
) -> None:
    client, arn = aws
    scheduler = StepFunctionsScheduler(arn)
    assert isinstance(scheduler, ObservationScheduler)
    assert scheduler.region == "us-east-1"  # from the ARN
    scheduler.submit(JOB)
    executions = client.list_executions(stateMachineArn=arn)["executions"]
    assert [e["name"] for e in executions] == [JOB.key]
    described = client.describe_execution(executionArn=executions[0]["executionArn"])
    assert json.loads(described["input"]) == {
        "resource_id": "r1",
        "thread_id": "t1",
        "key": JOB.key,
        "reason": "threshold",
    }
    scheduler.close()


def test_given_the_same_key_twice_when_submitted_then_it_is_started_once_and_no_error_is_raised(
    aws: tuple[Any, str],
) -> None:
    client, arn = aws
    scheduler = StepFunctionsScheduler(arn)
    scheduler.submit(JOB)
    scheduler.submit(JOB)  # same name, same input
    scheduler.submit(
        ObservationJob(resource_id="r1", thread_id="t1", key=JOB.key, reason="sweep")
    )  # other input
    assert len(client.list_executions(stateMachineArn=arn)["executions"]) == 1


def stubbed(scheduler: StepFunctionsScheduler) -> Any:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("stepfunctions", region_name="us-east-1")
    scheduler._client = client
    return Stubber(client)


@pytest.mark.parametrize(
    ("code", "status", "raised", "words"),
    [
        ("ThrottlingException", 400, Throttled, "throttled"),
        ("ServiceUnavailable", 503, Unavailable, "HTTP 503"),
        ("AccessDeniedException", 400, Unavailable, "AccessDeniedException"),
        ("StateMachineDoesNotExist", 400, Unavailable, "StateMachineDoesNotExist"),
        ("ExecutionAlreadyExists", 400, None, ""),
    ],
)
def test_given_an_aws_error_when_submitting_then_it_is_mapped(
    monkeypatch: pytest.MonkeyPatch, code: str, status: int, raised: type[Exception] | None, words: str
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    scheduler = StepFunctionsScheduler("arn:aws:states:us-east-1:123456789012:stateMachine:observation")
    stub = stubbed(scheduler)
    stub.add_client_error(
        "start_execution",
        service_error_code=code,
        service_message="secret-ish detail arn:aws:iam::123456789012:role/x",
        http_status_code=status,
    )
    with stub:
        if raised is None:
            scheduler.submit(JOB)  # already started: ignored
        else:
            with pytest.raises(raised) as caught:
                scheduler.submit(JOB)
            assert words in str(caught.value)
            assert "secret-ish" not in str(caught.value), "the AWS message is never passed on"
            assert caught.value.__cause__ is None
    stub.assert_no_pending_responses()


def test_given_no_endpoint_when_submitting_then_unavailable_names_the_connection_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    scheduler = StepFunctionsScheduler(
        "arn:aws:states:us-east-1:123456789012:stateMachine:observation", endpoint_url="http://127.0.0.1:9"
    )
    with pytest.raises(Unavailable, match="cannot reach Step Functions"):
        scheduler.submit(JOB)


def test_given_an_empty_arn_then_invalid_input_names_the_setting() -> None:
    with pytest.raises(InvalidInput) as caught:
        StepFunctionsScheduler(" ")
    assert caught.value.field == "MEMSTACK_OBSERVATION_STATE_MACHINE_ARN"


def test_given_a_new_scheduler_then_nothing_connects_until_the_first_submit() -> None:
    scheduler = StepFunctionsScheduler("arn:aws:states:eu-west-1:123456789012:stateMachine:observation")
    assert scheduler._client is None
    assert scheduler.region == "eu-west-1"
