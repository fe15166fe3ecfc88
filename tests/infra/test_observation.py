"""The observation workflow (infra/observation.py): the state machine's states, retries and catches, its
logging and tracing, the sweep schedule, the alarms, and who may start executions (and knows the ARN)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra.config import MemstackConfig

from tests.infra.conftest import Synth, scheduled_rule
from tests.infra.intrinsics import state_machine_definition
from tests.infra.test_functions import actions

SERVICES = {f"memstack-{n}": n for n in ("api", "context", "indexer", "observe", "reflect", "sweep")}
ARN_VARIABLE = "MEMSTACK_OBSERVATION_STATE_MACHINE_ARN"


def functions(synth: Synth) -> dict[str, tuple[str, dict[str, Any]]]:
    """Name → (logical id, properties) of the Memstack functions."""
    out = {}
    for logical, resource in synth.resources("AWS::Lambda::Function").items():
        service = (
            resource["Properties"].get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME")
        )
        if service in SERVICES:
            out[SERVICES[service]] = (logical, resource["Properties"])
    assert set(out) == set(SERVICES.values())
    return out


def state_machine(synth: Synth) -> tuple[str, dict[str, Any]]:
    machines = synth.resources("AWS::StepFunctions::StateMachine")
    assert len(machines) == 1
    logical, resource = next(iter(machines.items()))
    return logical, resource["Properties"]


def statements_of(synth: Synth, props: dict[str, Any]) -> list[dict[str, Any]]:
    role = props["Role"]["Fn::GetAtt"][0]
    return [
        s
        for p in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_given_the_stack_then_observe_chooses_reflect_and_failures_are_recorded(synth: Synth) -> None:
    fns = functions(synth)
    states = state_machine_definition(synth.json)["States"]
    assert state_machine_definition(synth.json)["StartAt"] == "Observe"
    assert set(states) == {"Observe", "ShouldReflect", "Reflect", "RecordFailure", "Failed", "Done"}
    observe, reflect, record = states["Observe"], states["Reflect"], states["RecordFailure"]
    assert observe["Resource"] == f"arn:{fns['observe'][0]}"
    assert reflect["Resource"] == f"arn:{fns['reflect'][0]}"
    assert record["Resource"] == f"arn:{fns['observe'][0]}"
    ids = {
        "resource_id.$": "$.resource_id",
        "thread_id.$": "$.thread_id",
        "key.$": "$.key",
        "reason.$": "$.reason",
    }
    assert observe["Parameters"] == ids and reflect["Parameters"] == ids
    assert record["Parameters"] == {"action": "record_failure", **ids, "error.$": "$.error"}
    assert observe["ResultPath"] == "$.observe" and observe["Next"] == "ShouldReflect"
    assert states["ShouldReflect"] == {
        "Type": "Choice",
        "Choices": [{"Variable": "$.observe.should_reflect", "BooleanEquals": True, "Next": "Reflect"}],
        "Default": "Done",
    }
    assert reflect["Next"] == "Done" and states["Done"] == {"Type": "Succeed"}
    for task in (observe, reflect):
        assert task["Catch"] == [
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "RecordFailure"}
        ]
    assert "Catch" not in record and record["Next"] == "Failed"
    assert states["Failed"]["Type"] == "Fail" and states["Failed"]["Error"] == "ObservationFailed"


def test_given_the_stack_then_every_task_retries_unavailable_with_full_jitter(synth: Synth) -> None:
    states = state_machine_definition(synth.json)["States"]
    for name in ("Observe", "Reflect", "RecordFailure"):
        (retry,) = states[name]["Retry"]
        assert {"Unavailable", "Throttled", "Lambda.TooManyRequestsException", "Lambda.ServiceException",
                "Lambda.SdkClientException"} <= set(retry["ErrorEquals"])  # fmt: skip
        assert "States.ALL" not in retry["ErrorEquals"] and "InvalidInput" not in retry["ErrorEquals"]
        assert retry["JitterStrategy"] == "FULL"
        assert (retry["IntervalSeconds"], retry["BackoffRate"], retry["MaxAttempts"], retry["MaxDelaySeconds"]) == (
            2, 2, 6, 60,
        )  # fmt: skip


def test_given_the_stack_then_the_state_machine_is_standard_logged_traced_and_times_out(synth: Synth) -> None:
    _, props = state_machine(synth)
    assert props["StateMachineType"] == "STANDARD"  # execution names are unique: the idempotent start
    assert state_machine_definition(synth.json)["TimeoutSeconds"] == 900
    assert props["TracingConfiguration"] == {"Enabled": True}
    logging = props["LoggingConfiguration"]
    assert logging["Level"] == "ALL" and logging["IncludeExecutionData"] is False
    group = logging["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    assert synth.json["Resources"][group]["Properties"]["RetentionInDays"] == 30


def sweep_rule(synth: Synth) -> dict[str, Any]:
    """The observation sweep's schedule (the other rule runs the index reconciler)."""
    (rule,) = [
        r
        for r in synth.resources("AWS::Events::Rule").values()
        if r["Properties"]["Description"] == "Memstack: restart observation work that went idle."
    ]
    return rule


def test_given_the_stack_then_the_schedule_runs_the_sweep_every_five_minutes(synth: Synth) -> None:
    fns = functions(synth)
    sweep_logical, sweep = fns["sweep"]
    assert sweep["Handler"] == "app.sweep"
    assert fns["observe"][1]["Handler"] == fns["reflect"][1]["Handler"] == "app.handler"
    scheduled_rule(synth, sweep_logical, "rate(5 minutes)", {"idle_seconds": 300, "limit": 100})


def test_given_other_options_then_the_sweep_rate_and_memory_options_follow_the_context(
    synth_jwt_es: Synth,
) -> None:
    rule = sweep_rule(synth_jwt_es)
    assert rule["Properties"]["ScheduleExpression"] == "rate(10 minutes)"
    for name, (_, props) in functions(synth_jwt_es).items():
        options = json.loads(props["Environment"]["Variables"]["MEMSTACK_OPTIONS"])
        assert options == {"generate_title": True, "observational_memory": True}, name


def test_given_the_default_stack_then_no_function_sets_memory_options(synth: Synth) -> None:
    for name, (_, props) in functions(synth).items():
        assert "MEMSTACK_OPTIONS" not in props["Environment"]["Variables"], name


def test_given_bad_memory_options_then_the_config_refuses_them_at_synth() -> None:
    with pytest.raises(ValueError, match="memoryOptions: .*scope"):
        MemstackConfig(memory_options={"observational_memory": {"scope": "galaxy"}})
    with pytest.raises(ValueError, match="observationSweepMinutes"):
        MemstackConfig(observation_sweep_minutes=0)
    assert MemstackConfig(memory_options={"observational_memory": True}).memory_options_json == (
        '{"observational_memory":true}'
    )


def test_given_the_stack_then_only_the_schedulers_may_start_executions_and_know_the_arn(synth: Synth) -> None:
    logical, _ = state_machine(synth)
    for name, (_, props) in functions(synth).items():
        starts = [s for s in statements_of(synth, props) if "states:StartExecution" in actions(s)]
        variables = props["Environment"]["Variables"]
        if name in ("api", "indexer", "sweep"):
            assert len(starts) == 1, name
            assert actions(starts[0]) == ["states:StartExecution"]
            assert starts[0]["Resource"] == {"Ref": logical}
            assert variables[ARN_VARIABLE] == {"Ref": logical}, name
        else:
            assert starts == [], name
            assert ARN_VARIABLE not in variables, f"{name} must not reference the state machine (a cycle)"


def test_given_the_stack_then_the_state_machine_may_invoke_only_observe_and_reflect(synth: Synth) -> None:
    fns = functions(synth)
    _, props = state_machine(synth)
    role = props["RoleArn"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    invoke = [s for s in statements if "lambda:InvokeFunction" in actions(s)]
    targets = json.dumps([s["Resource"] for s in invoke])
    assert fns["observe"][0] in targets and fns["reflect"][0] in targets
    for other in ("api", "context", "indexer", "sweep"):
        assert fns[other][0] not in targets, other


def test_given_the_stack_then_the_background_functions_have_only_the_table_access_they_use(
    synth: Synth,
) -> None:
    fns = functions(synth)
    read = {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}
    write = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"}
    for name, expected in (("observe", read | write), ("reflect", read | write), ("sweep", read)):
        statements = statements_of(synth, fns[name][1])
        assert {a for s in statements for a in actions(s) if a.startswith("dynamodb:")} == expected, name
        s3 = {a for s in statements for a in actions(s) if a.startswith("s3:")}
        assert s3 == (set() if name == "sweep" else {"s3:GetObject"}), name
        assert fns[name][1]["Timeout"] == (60 if name == "sweep" else 300)


def test_given_the_stack_then_alarms_watch_failed_throttled_and_timed_out_executions(synth: Synth) -> None:
    logical, _ = state_machine(synth)
    found = {}
    for alarm in synth.resources("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        if props["Namespace"] == "AWS/States":
            assert props["Dimensions"] == [{"Name": "StateMachineArn", "Value": {"Ref": logical}}]
            found[props["MetricName"]] = (props["Threshold"], props["Period"], props["Statistic"])
    assert found == {
        "ExecutionsFailed": (0, 300, "Sum"),
        "ExecutionThrottled": (0, 300, "Sum"),
        "ExecutionsTimedOut": (0, 300, "Sum"),
    }
    sweep_logical = functions(synth)["sweep"][0]
    errors = [
        a["Properties"] for a in synth.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"]["MetricName"] == "Errors"
        and a["Properties"]["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": sweep_logical}}]
    ]  # fmt: skip
    assert len(errors) == 1 and errors[0]["Threshold"] == 0


def test_given_the_stack_then_the_state_machine_arn_is_an_output(synth: Synth) -> None:
    logical, _ = state_machine(synth)
    assert synth.json["Outputs"]["ObservationStateMachineArn"]["Value"] == {"Ref": logical}


def test_given_memory_options_that_are_not_json_then_the_error_names_the_key() -> None:
    from aws_cdk import App

    app = App(context={"memoryOptions": '{"observational_memory": tru'})
    with pytest.raises(ValueError, match="memoryOptions: not valid JSON"):
        MemstackConfig.from_context(app.node)
