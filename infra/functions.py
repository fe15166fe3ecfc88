"""Functions: ``api`` (every REST route), ``context`` (the context route, sized and warmed apart),
``indexer`` (the table's stream → embeddings → the search index), and the background observation path
(spec §2.9; ``infra/observation.py`` wires them): ``observe`` (the state machine's Observe and
RecordFailure tasks), ``reflect`` (its Reflect task) and ``sweep`` (the schedule that restarts idle work;
``functions/observe``, handler ``app.sweep``), and ``reconcile`` (a schedule that indexes messages saved
but never marked as indexed — stream records the indexer gave up on; ``functions/indexer``, handler
``app.reconcile``). Python 3.12 on arm64.

Each function has a role of its own with only what it uses (docs/dynamodb.md lists the operations):

| function | DynamoDB | S3 (``messages/*``) | search | secret (openai) / Bedrock models (bedrock) |
| --- | --- | --- | --- | --- |
| api | Get/BatchGet/Query, Put/Update/Delete/BatchWrite (transactions need no more) | get, put, delete | read/write | read |
| context | Get/BatchGet/Query, Put/Update + ConditionCheck (observation above ``block_after``) | get | read (+ delete of orphans: write) | read |
| indexer | Get/BatchGet/Query, UpdateItem (index marks); the stream | get | read/write | read |
| reconcile | Get/BatchGet/Query (the ``by_unindexed`` index), UpdateItem (index marks) | get | read/write | read |
| observe, reflect | Get/BatchGet/Query, Put/Update + ConditionCheck (the observation record's transaction, titles) | get | read/write | read |
| sweep | Get/BatchGet/Query (the ``by_pending`` index) | — | read/write | read |

With ``-c models=bedrock`` no function reads a secret; each may ``bedrock:InvokeModel`` on exactly the
embedding and chat models (``infra/models.py``). Every function builds the same ``Memory`` (``memstack.bootstrap.memory_from_env``), whose start-up checks
the search index, so all of them are principals of the search backend.

No Scan anywhere (the store never scans). Environments come from ``memstack.settings.env_names()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Annotations, Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagSuppressions
from constructs import Construct

from infra.bundling import (
    ARCHITECTURE,
    RUNTIME,
    dependencies_layer,
    function_code,
    lambda_runtime_suppression,
)
from infra.config import MemstackConfig
from infra.environment import memstack_environment, powertools_environment
from infra.models import INFERENCE_PROFILE_SUPPRESSION, invoke_statement
from infra.schedules import schedule
from infra.storage import BODIES_PREFIX
from memstack.adapters.dynamodb.items import MESSAGE_PREFIX

FUNCTIONS_DIR = Path(__file__).resolve().parent.parent / "functions"

SNAP_START_FUNCTIONS = ("api", "context")
"""The functions that get SnapStart with ``-c snapStart=true``: the ones a caller waits on. The indexer and
the observation tasks run in the background, where a cold start delays nothing a user sees."""
SECRETS_EXTENSION_PORT = 2773
"""The AWS Parameters and Secrets Lambda Extension's port (its default), set as
``PARAMETERS_SECRETS_EXTENSION_HTTP_PORT``: the functions read the OpenAI key secret through it
(``memstack.adapters.secrets``)."""
SECRETS_EXTENSION_NAMES = frozenset(
    {
        "PARAMETERS_SECRETS_EXTENSION_CACHE_ENABLED",
        "PARAMETERS_SECRETS_EXTENSION_CACHE_SIZE",
        "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT",
        "PARAMETERS_SECRETS_EXTENSION_LOG_LEVEL",
        "PARAMETERS_SECRETS_EXTENSION_MAX_CONNECTIONS",
        "SECRETS_MANAGER_TIMEOUT_MILLIS",
        "SECRETS_MANAGER_TTL",
        "SSM_PARAMETER_STORE_TIMEOUT_MILLIS",
        "SSM_PARAMETER_STORE_TTL",
    }
)
"""The extension's own variables, which CDK's ``params_and_secrets`` sets on a function that has it."""


def secrets_extension() -> lambda_.ParamsAndSecretsLayerVersion:
    """The AWS Parameters and Secrets Lambda Extension (CDK's layer of the stack's region and the functions'
    architecture) on ``SECRETS_EXTENSION_PORT``: a cold function reads the OpenAI key secret from it over
    localhost instead of building a ``secretsmanager`` client (~25 ms of CPU of its first request,
    ``benchmarks/cold_start.py``). Its cache holds the value 300 s; the functions keep it for their life."""
    return lambda_.ParamsAndSecretsLayerVersion.from_version(
        lambda_.ParamsAndSecretsVersions.V1_0_103, http_port=SECRETS_EXTENSION_PORT
    )


LIVE_ALIAS = "live"

TABLE_READ = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query")
TABLE_WRITE = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem")
INDEX_MARKS = ("dynamodb:UpdateItem",)
OBSERVATION_WRITE = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem")
"""The observation record (a Put, in thread scope inside a TransactWriteItems with a ConditionCheck on the
thread), the failure record, thread titles and working memory (UpdateItem)."""


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    description: str
    memory_mb: int
    timeout: Duration
    table_actions: tuple[str, ...]
    bucket_actions: tuple[str, ...]
    handler: str = "app.handler"
    folder: str | None = None
    """The code's folder under ``functions/`` (default: ``name``)."""
    list_bodies: bool = False
    """May list the bodies' prefix (``s3:ListBucket`` limited to it): deleting a thread deletes every object
    under the thread's key prefix, bodies no item points at included."""


SPECS = (
    FunctionSpec("api", "Memstack: the REST API (every route but context).", 1024, Duration.seconds(29),
                 TABLE_READ + TABLE_WRITE, ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"),
                 list_bodies=True),
    FunctionSpec("context", "Memstack: POST /v1/threads/{thread_id}/context (the turn's hot path).", 1769,
                 Duration.seconds(29), TABLE_READ + OBSERVATION_WRITE, ("s3:GetObject",)),
    FunctionSpec("indexer", "Memstack: the table's message stream -> embeddings -> OpenSearch.", 1024,
                 Duration.minutes(5), TABLE_READ + INDEX_MARKS, ("s3:GetObject",)),
    FunctionSpec("observe", "Memstack: observation state machine - the Observe and RecordFailure tasks.", 1024,
                 Duration.minutes(5), TABLE_READ + OBSERVATION_WRITE, ("s3:GetObject",)),
    FunctionSpec("reflect", "Memstack: observation state machine - the Reflect task.", 1024,
                 Duration.minutes(5), TABLE_READ + OBSERVATION_WRITE, ("s3:GetObject",)),
    FunctionSpec("sweep", "Memstack: every 5 minutes, restart observation work that went idle.", 1024,
                 Duration.minutes(1), TABLE_READ, (), handler="app.sweep", folder="observe"),
    FunctionSpec("reconcile", "Memstack: every 15 minutes, index messages the stream indexer gave up on.", 1024,
                 Duration.minutes(10), TABLE_READ + INDEX_MARKS, ("s3:GetObject",), handler="app.reconcile",
                 folder="indexer"),
)  # fmt: skip
BACKGROUND = frozenset({"observe", "reflect", "sweep"})
"""The background observation functions (``infra/observation.py``)."""

RECONCILE_MINUTES = 15
"""How often the ``reconcile`` function runs: a message the stream indexer gave up on (after its retries,
into the dead-letter queue) or missed is searchable at most this long after the failure has cleared."""
RECONCILE_LIMIT = 1_000
"""Unindexed messages one ``reconcile`` run takes on (the next run takes the rest)."""

STREAM_BATCH_SIZE = 100
STREAM_RETRY_ATTEMPTS = 5
STREAM_MAX_RECORD_AGE = Duration.hours(6)


class Functions(Construct):
    """The functions, their roles, and the indexer's stream mapping with its dead-letter queue.

    Args:
        table, bucket, secret: what the functions use (``secret``: the OpenAI key, ``None`` on Bedrock).
        config: the deployment's choices (embedding model, auth mode, log level, TTL, memory options …).
        functions_dir: where ``api/``, ``context/``, ``indexer/``, ``observe/`` and ``reflect/`` live
            (``app.py``; handler ``app.handler``, the sweep's ``app.sweep``).

    Attributes:
        api, context, indexer, observe, reflect, sweep, reconcile: the functions; by_name: the same by
        name; dead_letter_queue; stream_mapping; reconcile_rule (the schedule of ``reconcile``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable,
        bucket: s3.IBucket,
        secret: secretsmanager.ISecret | None,
        config: MemstackConfig,
        functions_dir: Path = FUNCTIONS_DIR,
    ) -> None:
        super().__init__(scope, construct_id)
        common = memstack_environment(
            backend="aws",
            table=table.table_name,
            bucket=bucket.bucket_name,
            embedder=config.models,
            embedding_model=config.embedding_model_name,
            embedding_dimensions=config.embedding_dimensions,
            chat_provider=config.models,
            chat_model=config.chat_model_name,
            openai_base_url=config.openai_base_url,
            openai_api_key_secret_arn=secret.secret_arn if secret is not None else None,
            message_ttl_seconds=config.message_ttl_seconds,
            options=config.memory_options_json,
        )
        api_only = memstack_environment(
            indexing="stream",
            auth=config.auth,
            jwt_resource_claim=config.jwt_resource_claim if config.auth == "jwt" else None,
        )
        self.by_name: dict[str, lambda_.Function] = {}
        for spec in SPECS:
            log_group = logs.LogGroup(
                self,
                f"{spec.name.title()}Logs",
                retention=logs.RetentionDays.ONE_MONTH,
                removal_policy=RemovalPolicy.DESTROY,
            )
            role = iam.Role(
                self,
                f"{spec.name.title()}Role",
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description=f"Memstack {spec.name} function",
            )
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn]
                )
            )
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=list(spec.table_actions),
                    resources=[table.table_arn, f"{table.table_arn}/index/*"],
                )
            )
            if spec.bucket_actions:
                role.add_to_policy(
                    iam.PolicyStatement(
                        actions=list(spec.bucket_actions),
                        resources=[bucket.arn_for_objects(f"{BODIES_PREFIX}*")],
                    )
                )
            if spec.list_bodies:
                role.add_to_policy(
                    iam.PolicyStatement(
                        actions=["s3:ListBucket"],
                        resources=[bucket.bucket_arn],
                        conditions={"StringLike": {"s3:prefix": [f"{BODIES_PREFIX}*"]}},
                    )
                )
            if secret is not None:
                secret.grant_read(role)
            else:
                role.add_to_policy(invoke_statement([config.embedding_model_name, config.chat_model_name]))
            if spec.name in ("indexer", "reconcile"):
                own = memstack_environment(indexing="inline")
            elif spec.name in BACKGROUND:
                own = memstack_environment(indexing="stream")
            else:
                own = api_only
            environment = {
                **common,
                **own,
                **powertools_environment(service=f"memstack-{spec.name}", log_level=config.log_level),
            }
            snapshotted = config.snap_start and spec.name in SNAP_START_FUNCTIONS
            function = lambda_.Function(
                self,
                spec.name.title(),
                description=spec.description,
                runtime=RUNTIME,
                architecture=ARCHITECTURE,
                handler=spec.handler,
                code=function_code(functions_dir / (spec.folder or spec.name)),
                layers=[dependencies_layer(self)],
                # a SnapStart function reads the key while its snapshot is taken: no cold start gains
                params_and_secrets=secrets_extension() if secret is not None and not snapshotted else None,
                memory_size=spec.memory_mb,
                timeout=spec.timeout,
                role=role,
                log_group=log_group,
                tracing=lambda_.Tracing.ACTIVE,
                environment=environment,
                snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if snapshotted else None,
                # a version replaced by the next deploy is deleted: each kept version's snapshot is billed
                current_version_options=(
                    lambda_.VersionOptions(removal_policy=RemovalPolicy.DESTROY) if snapshotted else None
                ),
            )
            self.by_name[spec.name] = function
            lambda_runtime_suppression(function)
            NagSuppressions.add_resource_suppressions(
                role,
                [
                    {
                        "id": "AwsSolutions-IAM5",
                        "reason": "Scoped wildcards only: the table's own indexes (<table>/index/*, for the listing "
                        "GSIs), the bodies bucket's messages/ prefix (content-addressed keys), the OpenAI key "
                        "secret imported by name (<name>-??????), the managed domain's paths (<domain>/*, es "
                        "mode), the foundation model behind a cross-region Bedrock inference profile (any region "
                        "the profile routes to; models=bedrock), and X-Ray and dynamodb:ListStreams, which have no "
                        "resource-level permissions.",
                        "applies_to": [
                            {"regex": "/^Resource::<.*Table.*\\.Arn>\\/index\\/\\*$/g"},
                            {"regex": "/^Resource::<.*Bodies.*\\.Arn>\\/messages\\/\\*$/g"},
                            {"regex": "/^Resource::<.*Domain.*\\.Arn>\\/\\*$/g"},
                            {
                                "regex": "/^Resource::arn:<AWS::Partition>:secretsmanager:.*-\\?\\?\\?\\?\\?\\?$/g"
                            },
                            INFERENCE_PROFILE_SUPPRESSION,
                            "Resource::*",
                        ],
                    }
                ],
                apply_to_children=True,
            )
        self.api = self.by_name["api"]
        self.context = self.by_name["context"]
        # What API Gateway invokes: the function, or with SnapStart its ``live`` alias on the version
        # published from this deploy (SnapStart snapshots published versions only).
        self.api_target: lambda_.IFunction = self.api
        self.context_target: lambda_.IFunction = self.context
        if config.snap_start:
            self.api_target = self._live_alias(self.api)
            self.context_target = self._live_alias(self.context)
        self.indexer = self.by_name["indexer"]
        self.observe = self.by_name["observe"]
        self.reflect = self.by_name["reflect"]
        self.sweep = self.by_name["sweep"]
        self.reconcile = self.by_name["reconcile"]

        self.dead_letter_queue = sqs.Queue(
            self,
            "IndexerDeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        NagSuppressions.add_resource_suppressions(
            self.dead_letter_queue,
            [
                {
                    "id": "AwsSolutions-SQS3",
                    "reason": "This queue is itself the indexer's on-failure destination (dead-letter queue).",
                }
            ],
        )
        self.stream_mapping = sources.DynamoEventSource(
            table,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=STREAM_BATCH_SIZE,
            max_batching_window=Duration.seconds(1),
            bisect_batch_on_error=True,
            report_batch_item_failures=True,
            retry_attempts=STREAM_RETRY_ATTEMPTS,
            max_record_age=STREAM_MAX_RECORD_AGE,
            parallelization_factor=1,
            on_failure=sources.SqsDlq(self.dead_letter_queue),
            # Only message items (sk = M#…): inserts, modifies and removes; thread metas, id pointers and
            # resources never reach the indexer.
            filters=[
                lambda_.FilterCriteria.filter(
                    {"dynamodb": {"Keys": {"sk": {"S": lambda_.FilterRule.begins_with(MESSAGE_PREFIX)}}}}
                )
            ],
        )
        self.indexer.add_event_source(self.stream_mapping)

        self.reconcile_rule = schedule(
            self,
            "ReconcileSchedule",
            description="Memstack: index messages saved but never indexed.",
            function=self.reconcile,
            minutes=RECONCILE_MINUTES,
            event={"limit": RECONCILE_LIMIT},
        )

    def _live_alias(self, function: lambda_.Function) -> lambda_.Alias:
        """The ``live`` alias on the function's current version (a new version each deploy that changes
        the function: Lambda snapshots it as it publishes)."""
        alias = lambda_.Alias(
            self, f"{function.node.id}Live", alias_name=LIVE_ALIAS, version=function.current_version
        )
        # CDK warns at construction, before the version below exists, that SnapStart needs one
        Annotations.of(function).acknowledge_warning(
            "@aws-cdk/aws-lambda:snapStartRequirePublish",
            "the function's current version is published and the live alias points to it",
        )
        return alias

    @property
    def roles(self) -> list[iam.IRole]:
        """The functions' roles (for the search backend's data-access policy)."""
        out = []
        for function in self.by_name.values():
            assert function.role is not None
            out.append(function.role)
        return out

    def use_search(self, *, endpoint: str, service: str) -> None:
        """Point every function at the search backend (``MEMSTACK_OPENSEARCH_*``)."""
        environment = memstack_environment(opensearch_endpoint=endpoint, opensearch_service=service)
        for function in self.by_name.values():
            for name, value in environment.items():
                function.add_environment(name, value)
