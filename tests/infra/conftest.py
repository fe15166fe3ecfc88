"""Synthesizes the stack once per test session (bundling skipped) in the configurations the tests check."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # infra/ is not an installed package

aws_cdk = pytest.importorskip(
    "aws_cdk", reason="the infra extra is not installed (pip install -e '.[infra]')"
)


@dataclass(frozen=True)
class Synth:
    """A synthesized stack: the template, its JSON and cdk-nag's findings."""

    stack: Any
    template: Any  # aws_cdk.assertions.Template
    json: dict[str, Any]
    nag_errors: list[Any]
    nag_warnings: list[Any]

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == kind}


def synthesize(**context: Any) -> Synth:
    from aws_cdk import App, Aspects
    from aws_cdk.assertions import Annotations, Match, Template
    from cdk_nag import AwsSolutionsChecks
    from infra.stack import MemstackStack

    functions = ROOT / "functions"
    # owned by the handler authors; the asset needs the folder
    for name in ("api", "context", "indexer", "observe", "reflect"):
        (functions / name).mkdir(parents=True, exist_ok=True)
    defaults = json.loads((ROOT / "cdk.json").read_text())["context"]  # as `cdk synth` would see them
    app = App(context={**defaults, "aws:cdk:bundling-stacks": [], **context})
    stack = MemstackStack(app, "Memstack")
    Aspects.of(app).add(AwsSolutionsChecks())
    template = Template.from_stack(stack)
    annotations = Annotations.from_stack(stack)
    pattern = Match.string_like_regexp("AwsSolutions-.*")
    return Synth(
        stack=stack,
        template=template,
        json=template.to_json(),
        nag_errors=annotations.find_error("*", pattern),
        nag_warnings=annotations.find_warning("*", pattern),
    )


@pytest.fixture(scope="session")
def synth() -> Synth:
    """The default deployment: Serverless collection, IAM auth, created secret."""
    return synthesize()


@pytest.fixture(scope="session")
def synth_jwt_es() -> Synth:
    """The other options: JWT (created user pool), managed domain, imported secret, message TTL, memory
    options (observational memory and titles on), a 10-minute observation sweep."""
    return synthesize(
        auth="jwt",
        jwtResourceClaim="custom:org",
        searchService="es",
        openaiSecretName="memstack/openai",
        messageTtlSeconds="2592000",
        alarmTopicArn="arn:aws:sns:us-east-1:123456789012:ops",
        memoryOptions='{"observational_memory": true, "generate_title": true}',
        observationSweepMinutes="10",
    )


@pytest.fixture(scope="session")
def synth_bedrock() -> Synth:
    """Models on Amazon Bedrock: Titan v2 embeddings at 512 dimensions, Claude 3.5 Haiku through a US
    cross-region inference profile for the Observer, the Reflector and titles, observational memory on; the
    cheaper Serverless collection (standby replicas off); SnapStart on the api and context functions."""
    return synthesize(
        models="bedrock",
        standbyReplicas="false",
        snapStart="true",
        embeddingDimensions="512",
        chatModel="us.anthropic.claude-3-5-haiku-20241022-v1:0",
        memoryOptions='{"observational_memory": true}',
    )


def scheduled_rule(
    synth: Synth, function_logical_id: str, rate: str, event: dict[str, Any]
) -> dict[str, Any]:
    """The one enabled EventBridge rule that invokes this function at ``rate`` with ``event``, checked with
    the permission EventBridge needs and the function's asynchronous retries off; returns its properties."""
    arn = {"Fn::GetAtt": [function_logical_id, "Arn"]}
    (rule,) = [
        r["Properties"]
        for r in synth.resources("AWS::Events::Rule").values()
        if r["Properties"]["Targets"][0]["Arn"] == arn
    ]
    assert rule["ScheduleExpression"] == rate and rule["State"] == "ENABLED"
    (target,) = rule["Targets"]
    assert json.loads(target["Input"]) == event
    synth.template.has_resource_properties(
        "AWS::Lambda::Permission",
        {"Action": "lambda:InvokeFunction", "Principal": "events.amazonaws.com", "FunctionName": arn},
    )
    synth.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {"FunctionName": {"Ref": function_logical_id}, "MaximumRetryAttempts": 0},
    )
    return rule
