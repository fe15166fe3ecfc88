"""Storage: the DynamoDB table (single-table design, docs/dynamodb.md) and the bucket for large bodies.

The table mirrors ``memstack.adapters.dynamodb.create_table`` exactly — key schema ``pk``/``sk`` (strings),
the sparse listing indexes ``by_created`` and ``by_updated`` on ``gsi1pk`` (projection ALL), the sparse
index ``by_pending`` of observation records with work pending (``pending_pk``/``pending_sk``, keys only),
the sparse index ``by_unindexed`` of messages not yet indexed (``unindexed_pk``/``unindexed_sk``, plus
``thread_id``), on-demand, TTL on ``expires_at`` — plus what production needs: point-in-time recovery, a NEW_AND_OLD_IMAGES stream
(the indexer's trigger), AWS-managed encryption and deletion protection while data is retained. Index
and attribute names are imported from the adapter, so they cannot drift.
"""

from __future__ import annotations

import math

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from cdk_nag import NagSuppressions
from constructs import Construct

from memstack.adapters.dynamodb.items import BY_CREATED, BY_PENDING, BY_UNINDEXED, BY_UPDATED
from memstack.adapters.dynamodb.table import TTL_ATTRIBUTE

BODIES_PREFIX = "messages/"
"""Where the store writes large bodies (``messages/{sha256(resource_id)}/{sha256(thread_id)}/…``)."""


class Storage(Construct):
    """The memory table and the large-body bucket.

    Args:
        retain_data: RETAIN both (and protect the table from deletion); else DESTROY (dev stacks).
        message_ttl_seconds: when messages expire (DynamoDB TTL), large bodies in S3 expire one day later.

    Attributes:
        table, bucket, access_logs.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retain_data: bool = True,
        message_ttl_seconds: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if retain_data else RemovalPolicy.DESTROY
        string = dynamodb.AttributeType.STRING

        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=string),
            sort_key=dynamodb.Attribute(name="sk", type=string),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
            time_to_live_attribute=TTL_ATTRIBUTE,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=retain_data,
            removal_policy=removal,
        )
        for index, sort_key in ((BY_CREATED, "created_key"), (BY_UPDATED, "updated_key")):
            self.table.add_global_secondary_index(
                index_name=index,
                partition_key=dynamodb.Attribute(name="gsi1pk", type=string),
                sort_key=dynamodb.Attribute(name=sort_key, type=string),
                projection_type=dynamodb.ProjectionType.ALL,
            )
        # the background sweep's index (docs/dynamodb.md): ids are parsed from the table key, so keys only
        self.table.add_global_secondary_index(
            index_name=BY_PENDING,
            partition_key=dynamodb.Attribute(name="pending_pk", type=string),
            sort_key=dynamodb.Attribute(name="pending_sk", type=string),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )
        # the index reconciler's (docs/dynamodb.md): id pointers of messages not yet marked as indexed; the
        # resource and message ids are parsed from pk, the thread id is projected
        self.table.add_global_secondary_index(
            index_name=BY_UNINDEXED,
            partition_key=dynamodb.Attribute(name="unindexed_pk", type=string),
            sort_key=dynamodb.Attribute(name="unindexed_sk", type=string),
            projection_type=dynamodb.ProjectionType.INCLUDE,
            non_key_attributes=["thread_id"],
        )

        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,  # logs delivered under a bucket policy
            lifecycle_rules=[s3.LifecycleRule(id="expire-access-logs", expiration=Duration.days(90))],
            removal_policy=removal,
            auto_delete_objects=False,
        )
        NagSuppressions.add_resource_suppressions(
            self.access_logs,
            [
                {
                    "id": "AwsSolutions-S1",
                    "reason": "This is the server access log bucket of the bodies bucket; logging it to itself would loop.",
                }
            ],
        )

        rules = [
            s3.LifecycleRule(
                id="tidy-versions",
                noncurrent_version_expiration=Duration.days(30),
                abort_incomplete_multipart_upload_after=Duration.days(1),
                expired_object_delete_marker=True,
            )
        ]
        if message_ttl_seconds is not None:
            rules.append(
                s3.LifecycleRule(
                    id="expire-bodies-with-messages",
                    prefix=BODIES_PREFIX,
                    expiration=Duration.days(math.ceil(message_ttl_seconds / 86400) + 1),
                )
            )
        self.bucket = s3.Bucket(
            self,
            "Bodies",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="bodies/",
            lifecycle_rules=rules,
            removal_policy=removal,
        )
