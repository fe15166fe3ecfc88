"""Storage and search: the table mirrors the dev table (docs/dynamodb.md), the bucket is private, the
collection is a vector collection reachable only by the functions' roles."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match

from tests.infra.conftest import Synth


def test_given_the_stack_then_the_table_has_the_documented_keys_indexes_and_ttl(synth: Synth) -> None:
    string_key = lambda name: {"AttributeName": name, "AttributeType": "S"}  # noqa: E731
    synth.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": Match.array_with(
                [
                    string_key("pk"),
                    string_key("sk"),
                    string_key("gsi1pk"),
                    string_key("created_key"),
                    string_key("updated_key"),
                    string_key("pending_pk"),
                    string_key("pending_sk"),
                ]
            ),
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"},
            "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
            "SSESpecification": {"SSEEnabled": True},
            "DeletionProtectionEnabled": True,
        },
    )
    table = next(iter(synth.resources("AWS::DynamoDB::Table").values()))
    indexes = {i["IndexName"]: i for i in table["Properties"]["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"by_created", "by_updated", "by_pending", "by_unindexed"}
    for name, sort_key in (("by_created", "created_key"), ("by_updated", "updated_key")):
        assert indexes[name]["KeySchema"] == [
            {"AttributeName": "gsi1pk", "KeyType": "HASH"},
            {"AttributeName": sort_key, "KeyType": "RANGE"},
        ]
        assert indexes[name]["Projection"] == {"ProjectionType": "ALL"}
    # the observation sweep's sparse index: keys only (the owner is parsed from pk)
    assert indexes["by_pending"]["KeySchema"] == [
        {"AttributeName": "pending_pk", "KeyType": "HASH"},
        {"AttributeName": "pending_sk", "KeyType": "RANGE"},
    ]
    assert indexes["by_pending"]["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    # the index reconciler's sparse index: keys and the thread id (resource and message ids are in pk)
    assert indexes["by_unindexed"]["KeySchema"] == [
        {"AttributeName": "unindexed_pk", "KeyType": "HASH"},
        {"AttributeName": "unindexed_sk", "KeyType": "RANGE"},
    ]
    assert indexes["by_unindexed"]["Projection"] == {
        "ProjectionType": "INCLUDE",
        "NonKeyAttributes": ["thread_id"],
    }
    assert table["DeletionPolicy"] == "Retain"


def test_given_the_stack_then_the_cdk_table_matches_the_dev_create_table(synth: Synth) -> None:
    """The key schema and indexes PynamoDB's model would create (create_table) are the ones deployed."""
    from memstack.adapters.dynamodb.items import item_model

    model = item_model("t", region="us-east-1", host=None)
    schema = model._get_schema()  # PynamoDB's CreateTable arguments, as create_table sends them
    table = next(iter(synth.resources("AWS::DynamoDB::Table").values()))["Properties"]

    def keys(schema_keys: list[dict[str, str]]) -> set[tuple[str, str]]:
        return {(k["AttributeName"], k["KeyType"]) for k in schema_keys}

    assert keys(table["KeySchema"]) == keys(schema["key_schema"])
    attributes = {(a["AttributeName"], a["AttributeType"]) for a in table["AttributeDefinitions"]}
    assert attributes == {(a["AttributeName"], a["AttributeType"]) for a in schema["attribute_definitions"]}
    deployed = {
        i["IndexName"]: (keys(i["KeySchema"]), i["Projection"]) for i in table["GlobalSecondaryIndexes"]
    }
    dev = {
        i["index_name"]: (keys(i["key_schema"]), i["projection"]) for i in schema["global_secondary_indexes"]
    }
    assert deployed == dev
    assert not schema["local_secondary_indexes"] and "LocalSecondaryIndexes" not in table


def test_given_the_stack_then_the_bodies_bucket_blocks_public_access_and_enforces_ssl(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True,
            },
            "BucketEncryption": Match.object_like({"ServerSideEncryptionConfiguration": Match.any_value()}),
            "VersioningConfiguration": {"Status": "Enabled"},
            "LoggingConfiguration": Match.object_like({"LogFilePrefix": "bodies/"}),
            "LifecycleConfiguration": {"Rules": Match.array_with([Match.object_like({"NoncurrentVersionExpiration": {"NoncurrentDays": 30}})])},
        },
    )  # fmt: skip
    policies = synth.resources("AWS::S3::BucketPolicy")
    assert len(policies) == 2
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements
        ), "every bucket denies plain HTTP"
    for bucket in synth.resources("AWS::S3::Bucket").values():
        assert bucket["DeletionPolicy"] == "Retain"


def test_given_a_message_ttl_then_large_bodies_expire_a_day_after_their_messages(synth_jwt_es: Synth) -> None:
    synth_jwt_es.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [Match.object_like({"Prefix": "messages/", "ExpirationInDays": 31})]
                )
            }
        },
    )


def test_given_the_stack_then_the_collection_is_a_vector_collection_with_its_three_policies(
    synth: Synth,
) -> None:
    synth.template.has_resource_properties(
        "AWS::OpenSearchServerless::Collection", {"Type": "VECTORSEARCH", "Name": "memstack"}
    )
    policies = {
        p["Properties"]["Type"]: p
        for p in synth.resources("AWS::OpenSearchServerless::SecurityPolicy").values()
    }
    assert set(policies) == {"encryption", "network"}
    encryption = json.loads(policies["encryption"]["Properties"]["Policy"])
    assert encryption["AWSOwnedKey"] is True
    assert encryption["Rules"] == [{"ResourceType": "collection", "Resource": ["collection/memstack"]}]
    collection = next(iter(synth.resources("AWS::OpenSearchServerless::Collection").values()))
    assert {p for p in collection["DependsOn"] if "Policy" in p} >= {
        k for k in synth.json["Resources"] if "EncryptionPolicy" in k
    }
    synth.template.resource_count_is("AWS::OpenSearchServerless::AccessPolicy", 1)


def test_given_the_default_stack_then_the_collection_keeps_standby_replicas(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::OpenSearchServerless::Collection", {"Name": "memstack", "StandbyReplicas": "ENABLED"}
    )


def test_given_standby_replicas_off_then_the_collection_has_none(synth_bedrock: Synth) -> None:
    synth_bedrock.template.has_resource_properties(
        "AWS::OpenSearchServerless::Collection", {"Name": "memstack", "StandbyReplicas": "DISABLED"}
    )
    assert not synth_bedrock.nag_errors and not synth_bedrock.nag_warnings, "cdk-nag clean without standbys"


def test_given_standby_replicas_off_with_a_managed_domain_then_synth_fails_naming_the_flag() -> None:
    from aws_cdk import App
    from infra.config import MemstackConfig

    app = App(context={"searchService": "es", "standbyReplicas": "false"})
    with pytest.raises(ValueError, match="standbyReplicas applies to searchService=aoss only"):
        MemstackConfig.from_context(app.node)


def test_given_the_stack_then_only_the_functions_roles_get_data_access(synth: Synth) -> None:
    access = next(iter(synth.resources("AWS::OpenSearchServerless::AccessPolicy").values()))
    text = json.dumps(access["Properties"]["Policy"])
    roles = {k for k, v in synth.resources("AWS::IAM::Role").items()}
    named = {role for role in roles if role in text}
    assert named == {
        r
        for r in roles
        if any(
            f in r
            for f in (
                "FunctionsApiRole",
                "FunctionsContextRole",
                "FunctionsIndexerRole",
                "FunctionsObserveRole",
                "FunctionsReflectRole",
                "FunctionsSweepRole",
                "FunctionsReconcileRole",
                "SearchIndexSetupRole",
            )
        )
    }
    assert "aoss:*" not in text and "aoss:DeleteIndex" not in text
    # and IAM lets each of them call the collection's data plane, on that collection only
    for name, policy in synth.resources("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if "aoss:APIAccessAll" in actions:
                assert statement["Resource"] == {
                    "Fn::GetAtt": [
                        next(iter(synth.resources("AWS::OpenSearchServerless::Collection"))),
                        "Arn",
                    ]
                }, name


def test_given_the_stack_then_a_custom_resource_creates_the_index_after_the_policies(synth: Synth) -> None:
    index = next(iter(synth.resources("Custom::MemstackIndex").values()))
    assert index["Properties"]["MEMSTACK_EMBEDDING_MODEL"] == "text-embedding-3-small"
    depends = set(index["DependsOn"])
    assert any("DataAccessPolicy" in d for d in depends) and any("Collection" in d for d in depends)
    for function in synth.resources("AWS::Lambda::Function").values():
        if function["Properties"]["Environment"]["Variables"].get("POWERTOOLS_SERVICE_NAME") in (
            "memstack-api", "memstack-context", "memstack-indexer",
        ):  # fmt: skip
            assert any("SearchIndex" in d for d in function.get("DependsOn", [])), (
                "functions start after the index"
            )


def test_given_the_managed_domain_option_then_a_domain_replaces_the_collection(synth_jwt_es: Synth) -> None:
    synth_jwt_es.template.resource_count_is("AWS::OpenSearchServerless::Collection", 0)
    synth_jwt_es.template.has_resource_properties(
        "AWS::OpenSearchService::Domain",
        {
            "EngineVersion": "OpenSearch_2.19",
            "EncryptionAtRestOptions": {"Enabled": True},
            "NodeToNodeEncryptionOptions": {"Enabled": True},
            "DomainEndpointOptions": Match.object_like({"EnforceHTTPS": True}),
        },
    )
    for function in synth_jwt_es.resources("AWS::Lambda::Function").values():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "MEMSTACK_OPENSEARCH_SERVICE" in variables:
            assert variables["MEMSTACK_OPENSEARCH_SERVICE"] == "es"
