"""Models on Amazon Bedrock (``-c models=bedrock``): no secret, the Bedrock settings in every function's
environment, ``bedrock:InvokeModel`` on exactly the configured model ARNs, cdk-nag and cfn-lint clean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from infra.config import MemstackConfig

from tests.infra.conftest import Synth
from tests.infra.intrinsics import placeholder, resolve
from tests.infra.test_compliance import cfn_lint, describe
from tests.infra.test_functions import actions, functions, role_statements

INDEX_SETUP = "memstack-index-setup"
CHAT = "us.anthropic.claude-3-5-haiku-20241022-v1:0"


def memstack_functions(synth: Synth) -> dict[str, dict[str, Any]]:
    """Every Memstack function (the seven), by its Powertools service name."""
    out = {}
    for resource in synth.resources("AWS::Lambda::Function").values():
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        service = variables.get("POWERTOOLS_SERVICE_NAME", "")
        if service.startswith("memstack-") and service != INDEX_SETUP:
            out[service] = resource["Properties"]
    assert len(out) == 7, sorted(out)
    return out


def test_given_bedrock_models_then_no_secret_is_created_read_or_output(synth_bedrock: Synth) -> None:
    synth_bedrock.template.resource_count_is("AWS::SecretsManager::Secret", 0)
    assert "OpenAIKeySecretArn" not in synth_bedrock.json.get("Outputs", {})
    for props in memstack_functions(synth_bedrock).values():
        assert "MEMSTACK_OPENAI_API_KEY_SECRET_ARN" not in props["Environment"]["Variables"]
    for policy in synth_bedrock.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert not any(a.startswith("secretsmanager:") for a in actions(statement))


def test_given_bedrock_models_then_every_function_is_configured_for_bedrock(synth_bedrock: Synth) -> None:
    for name, props in memstack_functions(synth_bedrock).items():
        variables = props["Environment"]["Variables"]
        assert {k: variables.get(k) for k in ("MEMSTACK_EMBEDDER", "MEMSTACK_CHAT_PROVIDER")} == {
            "MEMSTACK_EMBEDDER": "bedrock",
            "MEMSTACK_CHAT_PROVIDER": "bedrock",
        }, name
        assert variables["MEMSTACK_EMBEDDING_MODEL"] == "amazon.titan-embed-text-v2:0"
        assert variables["MEMSTACK_EMBEDDING_DIMENSIONS"] == "512"
        assert variables["MEMSTACK_CHAT_MODEL"] == CHAT


def test_given_bedrock_models_then_each_role_may_invoke_exactly_the_configured_models(
    synth_bedrock: Synth,
) -> None:
    expected = [
        "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0",
        f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/{CHAT}",
        "arn:aws:bedrock:*::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0",
    ]
    for name, props in memstack_functions(synth_bedrock).items():
        statements = [
            s
            for s in role_statements(synth_bedrock, props)
            if any(a.startswith("bedrock:") for a in actions(s))
        ]
        assert len(statements) == 1, name
        assert actions(statements[0]) == ["bedrock:InvokeModel"]
        assert sorted(resolve(statements[0]["Resource"], placeholder)) == sorted(expected)


def test_given_the_default_stack_then_no_function_may_call_bedrock(synth: Synth) -> None:
    for name, props in functions(synth).items():
        assert not any(a.startswith("bedrock:") for s in role_statements(synth, props) for a in actions(s)), (
            name
        )


def test_given_bedrock_models_then_the_index_is_named_after_the_bedrock_embedder(
    synth_bedrock: Synth,
) -> None:
    [index_setup] = [
        r["Properties"]["Environment"]["Variables"]
        for r in synth_bedrock.resources("AWS::Lambda::Function").values()
        if r["Properties"].get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME")
        == INDEX_SETUP
    ]
    assert (index_setup["MEMSTACK_EMBEDDER"], index_setup["MEMSTACK_EMBEDDING_MODEL"]) == (
        "bedrock",
        "amazon.titan-embed-text-v2:0",
    )


def test_given_bedrock_models_then_cdk_nag_reports_no_unsuppressed_finding(synth_bedrock: Synth) -> None:
    assert not synth_bedrock.nag_errors, describe(synth_bedrock.nag_errors)
    assert not synth_bedrock.nag_warnings, describe(synth_bedrock.nag_warnings)


def test_given_bedrock_models_then_cfn_lint_passes(synth_bedrock: Synth, tmp_path: Path) -> None:
    path = tmp_path / "Memstack.template.json"
    path.write_text(json.dumps(synth_bedrock.json, indent=1))
    result = cfn_lint(path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"models": "azure"}, "models must be"),
        ({"models": "bedrock", "embeddingModel": "text-embedding-3-small"}, "is not supported"),
        ({"models": "bedrock", "embeddingDimensions": "1536"}, "256, 512, 1024"),
        ({"models": "bedrock", "openaiSecretName": "memstack/openai"}, "models=openai only"),
    ],
)
def test_given_a_bad_models_choice_when_configured_then_synth_fails_naming_it(
    context: dict[str, str], message: str
) -> None:
    from aws_cdk import App

    app = App(context=context)
    with pytest.raises(ValueError, match=message):
        MemstackConfig.from_context(app.node)
