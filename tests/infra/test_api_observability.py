"""API (routes, auth modes, throttling, access logs) and observability (alarms, dashboard)."""

from __future__ import annotations

from typing import Any

from tests.infra.conftest import Synth
from tests.infra.test_functions import functions


def paths(synth: Synth) -> dict[str, str]:
    """Resource logical id → full path, rebuilt from the AWS::ApiGateway::Resource tree."""
    resources = synth.resources("AWS::ApiGateway::Resource")

    def path(key: str) -> str:
        props = resources[key]["Properties"]
        parent = props["ParentId"]
        prefix = path(parent["Ref"]) if "Ref" in parent else ""
        return f"{prefix}/{props['PathPart']}"

    return {key: path(key) for key in resources}


def methods(synth: Synth) -> list[tuple[str, str, dict[str, Any]]]:
    by_id = paths(synth)
    out = []
    for method in synth.resources("AWS::ApiGateway::Method").values():
        props = method["Properties"]
        resource = props["ResourceId"]
        where = by_id[resource["Ref"]] if "Ref" in resource else "/"
        out.append((where, props["HttpMethod"], props))
    return out


def target(synth: Synth, props: dict[str, Any]) -> str:
    uri = str(props["Integration"]["Uri"])
    fns = functions(synth)
    names = {
        name
        for name in fns
        if any(
            k in uri
            for k in synth.resources("AWS::Lambda::Function")
            if k.startswith(f"Functions{name.title()}")
        )
    }
    assert len(names) == 1, uri
    return names.pop()


def test_given_the_stack_then_context_goes_to_its_own_function_and_the_rest_to_api(synth: Synth) -> None:
    routes = {(path, verb): target(synth, props) for path, verb, props in methods(synth)}
    assert routes.pop(("/v1/threads/{thread_id}/context", "POST")) == "context"
    assert set(routes) == {
        ("/", "ANY"), ("/{proxy+}", "ANY"), ("/v1/{proxy+}", "ANY"), ("/v1/threads", "ANY"),
        ("/v1/threads/{thread_id}", "ANY"), ("/v1/threads/{thread_id}/{proxy+}", "ANY"),
    }  # fmt: skip
    assert set(routes.values()) == {"api"}
    for _, _, props in methods(synth):
        assert props["Integration"]["Type"] == "AWS_PROXY"


def test_given_the_stack_then_the_context_function_gets_exactly_the_routes_its_resolver_serves(
    synth: Synth,
) -> None:
    from memstack.api.app import served_routes

    sent = sorted((verb, path) for path, verb, props in methods(synth) if target(synth, props) == "context")
    assert sent == served_routes("context"), "infra/api.py and memstack.api.app.ROUTE_SETS drifted apart"


def test_given_the_default_mode_then_every_method_requires_iam(synth: Synth) -> None:
    for path, verb, props in methods(synth):
        assert props["AuthorizationType"] == "AWS_IAM", (path, verb)
    synth.template.resource_count_is("AWS::ApiGateway::Authorizer", 0)


def test_given_jwt_mode_then_every_method_uses_the_cognito_authorizer_and_the_functions_know(
    synth_jwt_es: Synth,
) -> None:
    authorizer = next(iter(synth_jwt_es.resources("AWS::ApiGateway::Authorizer")))
    for path, verb, props in methods(synth_jwt_es):
        assert props["AuthorizationType"] == "COGNITO_USER_POOLS", (path, verb)
        assert props["AuthorizerId"] == {"Ref": authorizer}
    synth_jwt_es.template.resource_count_is("AWS::Cognito::UserPool", 1)
    for name in ("api", "context"):
        variables = functions(synth_jwt_es)[name]["Environment"]["Variables"]
        assert variables["MEMSTACK_AUTH"] == "jwt"
        assert variables["MEMSTACK_JWT_RESOURCE_CLAIM"] == "custom:org"


def test_given_the_stack_then_the_stage_throttles_logs_access_and_traces(synth: Synth) -> None:
    stage = next(iter(synth.resources("AWS::ApiGateway::Stage").values()))["Properties"]
    assert stage["StageName"] == "prod"
    assert stage["TracingEnabled"] is True
    assert (
        "DestinationArn" in stage["AccessLogSetting"]
        and "$context.requestId" in stage["AccessLogSetting"]["Format"]
    )
    settings = stage["MethodSettings"][0]
    assert settings["ThrottlingRateLimit"] == 100 and settings["ThrottlingBurstLimit"] == 200
    validator = next(iter(synth.resources("AWS::ApiGateway::RequestValidator").values()))["Properties"]
    assert validator["ValidateRequestParameters"] is True
    context = [p for path, _, p in methods(synth) if path.endswith("/context")][0]
    assert context["RequestParameters"] == {"method.request.path.thread_id": True}


def alarm_metrics(synth: Synth) -> list[tuple[str, str, float]]:
    return [
        (a["Properties"]["Namespace"], a["Properties"]["MetricName"], a["Properties"]["Threshold"])
        for a in synth.resources("AWS::CloudWatch::Alarm").values()
    ]


def test_given_the_stack_then_alarms_watch_errors_throttles_5xx_and_the_dead_letter_queue(
    synth: Synth,
) -> None:
    metrics = alarm_metrics(synth)
    # api, context, indexer, observe, reflect, sweep, reconcile
    assert metrics.count(("AWS/Lambda", "Errors", 0)) == 7
    assert metrics.count(("AWS/Lambda", "Throttles", 0)) == 7
    assert ("AWS/ApiGateway", "5XXError", 0) in metrics
    assert ("AWS/SQS", "ApproximateNumberOfMessagesVisible", 0) in metrics
    assert ("AWS/Lambda", "IteratorAge", 300000) in metrics
    for alarm in synth.resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["ComparisonOperator"] == "GreaterThanThreshold"
        assert "AlarmActions" not in alarm["Properties"]
    synth.template.resource_count_is("AWS::CloudWatch::Dashboard", 1)


def test_given_an_alarm_topic_then_every_alarm_notifies_it(synth_jwt_es: Synth) -> None:
    for alarm in synth_jwt_es.resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == ["arn:aws:sns:us-east-1:123456789012:ops"]
