"""Functions: runtime, environment from the settings names, least privilege, the indexer's stream mapping."""

from __future__ import annotations

import json
from typing import Any

from infra.environment import POWERTOOLS_NAMES
from infra.functions import SECRETS_EXTENSION_NAMES, SECRETS_EXTENSION_PORT

from memstack.settings import env_names
from tests.infra.conftest import Synth, scheduled_rule

SERVICES = {"memstack-api": "api", "memstack-context": "context", "memstack-indexer": "indexer"}


def functions(synth: Synth) -> dict[str, dict[str, Any]]:
    """The three Memstack functions' properties by name (the index set-up function is separate)."""
    out = {}
    for resource in synth.resources("AWS::Lambda::Function").values():
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        service = variables.get("POWERTOOLS_SERVICE_NAME")
        if service in SERVICES:
            out[SERVICES[service]] = resource["Properties"]
    assert set(out) == {"api", "context", "indexer"}
    return out


def role_statements(synth: Synth, function: dict[str, Any]) -> list[dict[str, Any]]:
    role = function["Role"]["Fn::GetAtt"][0]
    statements = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    assert not synth.json["Resources"][role]["Properties"].get("ManagedPolicyArns"), "no managed policies"
    return statements


def actions(statement: dict[str, Any]) -> list[str]:
    value = statement["Action"]
    return value if isinstance(value, list) else [value]


def dynamodb_actions(statements: list[dict[str, Any]]) -> set[str]:
    return {
        a for s in statements for a in actions(s) if a.startswith("dynamodb:") and a != "dynamodb:ListStreams"
    }


def test_given_the_stack_then_every_function_is_python_3_12_on_arm64(synth: Synth) -> None:
    for resource in synth.resources("AWS::Lambda::Function").values():
        props = resource["Properties"]
        if props.get("Runtime", "").startswith("python"):
            assert props["Runtime"] == "python3.12"
            assert props["Architectures"] == ["arm64"]
            # the sweep: functions/observe; the reconciler: functions/indexer
            assert props["Handler"] in ("app.handler", "app.sweep", "app.reconcile")
    for props in functions(synth).values():
        assert props["TracingConfig"] == {"Mode": "Active"}


def test_given_the_stack_then_every_variable_is_a_settings_name_or_powertools(synth: Synth) -> None:
    allowed = set(env_names().values()) | POWERTOOLS_NAMES | SECRETS_EXTENSION_NAMES
    for resource in synth.resources("AWS::Lambda::Function").values():
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        unknown = set(variables) - allowed
        assert not unknown, f"variables no setting reads: {sorted(unknown)}"


def test_given_the_stack_then_the_functions_get_the_aws_backend_settings(synth: Synth) -> None:
    fns = functions(synth)
    for name, props in fns.items():
        variables = props["Environment"]["Variables"]
        assert variables["MEMSTACK_BACKEND"] == "aws"
        assert variables["MEMSTACK_EMBEDDER"] == "openai"
        assert variables["MEMSTACK_OPENSEARCH_SERVICE"] == "aoss"
        for required in (
            "MEMSTACK_TABLE",
            "MEMSTACK_BUCKET",
            "MEMSTACK_OPENSEARCH_ENDPOINT",
            "MEMSTACK_OPENAI_API_KEY_SECRET_ARN",
        ):
            assert required in variables, f"{name} lacks {required}"
        assert "OPENAI_API_KEY" not in variables, "the key comes from Secrets Manager, never the environment"
        assert variables["POWERTOOLS_SERVICE_NAME"] == f"memstack-{name}"
    assert fns["api"]["Environment"]["Variables"]["MEMSTACK_INDEXING"] == "stream"
    assert fns["context"]["Environment"]["Variables"]["MEMSTACK_INDEXING"] == "stream"
    assert fns["indexer"]["Environment"]["Variables"]["MEMSTACK_INDEXING"] == "inline"
    assert fns["api"]["Environment"]["Variables"]["MEMSTACK_AUTH"] == "iam"


def test_given_the_stack_then_no_role_can_scan_or_touch_dynamodb_everywhere(synth: Synth) -> None:
    for name, policy in synth.resources("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            acts = actions(statement)
            assert "dynamodb:Scan" not in acts and "dynamodb:*" not in acts, name
            if any(a.startswith("dynamodb:") and a != "dynamodb:ListStreams" for a in acts):
                assert statement["Resource"] != "*", f"{name}: DynamoDB actions on '*'"


def test_given_the_stack_then_each_function_has_only_the_table_access_it_uses(synth: Synth) -> None:
    fns = functions(synth)
    read = {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}
    api = dynamodb_actions(role_statements(synth, fns["api"]))
    assert api == read | {
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
    }
    # context writes only the observation record (synchronous observation above block_after) and titles
    assert dynamodb_actions(role_statements(synth, fns["context"])) == read | {
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:ConditionCheckItem",
    }
    indexer = dynamodb_actions(role_statements(synth, fns["indexer"]))
    assert indexer == read | {
        "dynamodb:UpdateItem",
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
    }
    assert "dynamodb:DeleteItem" not in indexer and "dynamodb:PutItem" not in indexer


def test_given_the_stack_then_bucket_access_is_on_the_bodies_prefix_only(synth: Synth) -> None:
    fns = functions(synth)
    expected = {
        "api": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"},
        "context": {"s3:GetObject"},
        "indexer": {"s3:GetObject"},
    }
    for name, props in fns.items():
        s3 = [s for s in role_statements(synth, props) if any(a.startswith("s3:") for a in actions(s))]
        assert {a for s in s3 for a in actions(s)} == expected[name], name
        for statement in s3:
            if actions(statement) == ["s3:ListBucket"]:  # deleting a thread lists its bodies' prefix
                assert statement["Condition"] == {"StringLike": {"s3:prefix": ["messages/*"]}}, statement
                continue
            assert json.dumps(statement["Resource"]).endswith('"/messages/*"]]}'), statement["Resource"]


def test_given_the_stack_then_every_function_reads_the_key_secret_and_nothing_else_there(
    synth: Synth,
) -> None:
    secret = next(iter(synth.resources("AWS::SecretsManager::Secret")))
    for name, props in functions(synth).items():
        statements = [
            s
            for s in role_statements(synth, props)
            if any(a.startswith("secretsmanager:") for a in actions(s))
        ]
        assert len(statements) == 1, name
        assert set(statements[0]["Action"]) == {
            "secretsmanager:GetSecretValue",
            "secretsmanager:DescribeSecret",
        }
        assert statements[0]["Resource"] == {"Ref": secret}
        assert props["Environment"]["Variables"]["MEMSTACK_OPENAI_API_KEY_SECRET_ARN"] == {"Ref": secret}


def test_given_the_stack_then_the_indexer_reads_message_items_from_the_stream_with_partial_failures(
    synth: Synth,
) -> None:
    mappings = synth.resources("AWS::Lambda::EventSourceMapping")
    assert len(mappings) == 1
    props = next(iter(mappings.values()))["Properties"]
    table = next(iter(synth.resources("AWS::DynamoDB::Table")))
    assert props["EventSourceArn"] == {"Fn::GetAtt": [table, "StreamArn"]}
    assert props["FunctionName"] == {
        "Ref": next(k for k in synth.resources("AWS::Lambda::Function") if k.startswith("FunctionsIndexer"))
    }
    assert props["FilterCriteria"] == {
        "Filters": [
            {
                "Pattern": json.dumps(
                    {"dynamodb": {"Keys": {"sk": {"S": [{"prefix": "M#"}]}}}}, separators=(",", ":")
                )
            }
        ]
    }
    assert props["BisectBatchOnFunctionError"] is True
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["MaximumRetryAttempts"] == 5
    assert props["BatchSize"] == 100
    queue = next(k for k in synth.resources("AWS::SQS::Queue") if "DeadLetters" in k)
    assert props["DestinationConfig"] == {"OnFailure": {"Destination": {"Fn::GetAtt": [queue, "Arn"]}}}


def test_given_the_stack_then_the_dead_letter_queue_is_encrypted_and_tls_only(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::SQS::Queue", {"SqsManagedSseEnabled": True, "MessageRetentionPeriod": 1209600}
    )
    policy = next(iter(synth.resources("AWS::SQS::QueuePolicy").values()))
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
               for s in policy["Properties"]["PolicyDocument"]["Statement"])  # fmt: skip


def test_given_an_imported_secret_then_no_secret_is_created_and_the_name_is_granted(
    synth_jwt_es: Synth,
) -> None:
    synth_jwt_es.template.resource_count_is("AWS::SecretsManager::Secret", 0)
    props = functions(synth_jwt_es)["api"]
    assert "memstack/openai" in json.dumps(
        props["Environment"]["Variables"]["MEMSTACK_OPENAI_API_KEY_SECRET_ARN"]
    )


def test_given_the_stack_then_every_python_function_uses_the_one_shared_dependency_layer(
    synth: Synth,
) -> None:
    layers = synth.resources("AWS::Lambda::LayerVersion")
    assert len(layers) == 1, "one dependency layer for the stack, not one copy per function"
    (layer_id, layer), *_ = layers.items()
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    python = [
        props
        for props in (r["Properties"] for r in synth.resources("AWS::Lambda::Function").values())
        if props.get("Runtime", "").startswith("python")
    ]
    assert len(python) == 8  # api, context, indexer, observe, reflect, sweep, reconcile, the index set-up
    for props in python:
        ours = [layer for layer in props["Layers"] if "ParamsandsecretslayerMap" not in json.dumps(layer)]
        assert ours == [{"Ref": layer_id}]  # beside it, AWS's Parameters and Secrets extension


def test_given_the_stack_then_a_schedule_runs_the_index_reconciler_every_15_minutes(synth: Synth) -> None:
    (logical, props), *others = [
        (name, r["Properties"])
        for name, r in synth.resources("AWS::Lambda::Function").items()
        if r["Properties"].get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME")
        == "memstack-reconcile"
    ]
    assert not others
    assert props["Handler"] == "app.reconcile"
    assert props["Timeout"] == 600
    assert props["Environment"]["Variables"]["MEMSTACK_INDEXING"] == "inline"  # it indexes what it finds
    table = dynamodb_actions(role_statements(synth, props))
    assert table == {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:UpdateItem"}
    scheduled_rule(synth, logical, "rate(15 minutes)", {"limit": 1000})


def test_given_the_key_secret_then_every_function_reads_it_through_the_parameters_and_secrets_extension(
    synth: Synth,
) -> None:
    for resource in synth.resources("AWS::Lambda::Function").values():
        props = resource["Properties"]
        variables = props.get("Environment", {}).get("Variables", {})
        if "MEMSTACK_OPENAI_API_KEY_SECRET_ARN" not in variables:
            continue
        found = [layer["Fn::FindInMap"] for layer in props.get("Layers", []) if "Fn::FindInMap" in layer]
        assert found, f"{variables['POWERTOOLS_SERVICE_NAME']} has no extension layer"
        ((table, _region, key),) = found  # the region's layer, from CDK's table of the extension's ARNs
        arn = synth.json["Mappings"][table]["us-east-1"][key]
        assert ":177933569100:layer:AWS-Parameters-and-Secrets-Lambda-Extension-Arm64:" in arn
        assert variables["PARAMETERS_SECRETS_EXTENSION_HTTP_PORT"] == str(SECRETS_EXTENSION_PORT)


def test_given_bedrock_models_then_no_function_has_the_secrets_extension(synth_bedrock: Synth) -> None:
    for resource in synth_bedrock.resources("AWS::Lambda::Function").values():
        props = resource["Properties"]
        assert "Parameters-and-Secrets" not in json.dumps(props.get("Layers", []))
        assert "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT" not in props.get("Environment", {}).get(
            "Variables", {}
        )
