"""The deployment's choices, read from CDK context (``cdk deploy -c key=value`` or ``cdk.json``).

Every flag has a default that deploys a working stack; docs/deploy.md lists them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from constructs import Node

SearchService = Literal["aoss", "es"]
AuthMode = Literal["iam", "jwt"]
Models = Literal["openai", "bedrock"]

DEFAULT_EMBEDDING_MODELS = {"openai": "text-embedding-3-small", "bedrock": "amazon.titan-embed-text-v2:0"}
"""The embedding model of each provider when ``embeddingModel`` is unset."""


@dataclass(frozen=True)
class MemstackConfig:
    """What a deployment can choose.

    Attributes:
        search_service: ``aoss`` (OpenSearch Serverless vector collection, the default) or ``es`` (a managed
            OpenSearch Service domain).
        auth: ``iam`` (SigV4 on every API method, the default) or ``jwt`` (a Cognito user pool authorizer;
            the functions bind the caller's resource to ``jwt_resource_claim``).
        jwt_user_pool_arn: in ``jwt`` mode, an existing user pool to trust; unset, the stack creates one.
        jwt_resource_claim: the token claim that names the caller's resource (``MEMSTACK_JWT_RESOURCE_CLAIM``).
        models: where embeddings and chat run: ``openai`` (the default; the key in Secrets Manager) or
            ``bedrock`` (Amazon Bedrock with the functions' IAM roles; no secret is created).
            docs/deploy.md "Models" says why OpenAI stays the default.
        openai_secret_arn / openai_secret_name: import an existing secret holding the OpenAI key; unset, the
            stack creates one (its value must then be set, docs/deploy.md). ``openai`` models only.
        embedding_model, embedding_dimensions: the embedding model (the index is named after it); unset,
            ``text-embedding-3-small`` on OpenAI, ``amazon.titan-embed-text-v2:0`` on Bedrock.
        chat_model: the Observer's, Reflector's and titles' model (``MEMSTACK_CHAT_MODEL``); unset,
            ``gpt-4o-mini`` on OpenAI, ``amazon.nova-lite-v1:0`` on Bedrock. On Bedrock, a model id or a
            cross-region inference profile id (``us.anthropic...``).
        openai_base_url: any OpenAI-compatible endpoint.
        message_ttl_seconds: optional message expiry (DynamoDB TTL; large bodies in S3 expire a day later).
        retain_data: keep the table, bucket, collection/domain and secret when the stack is deleted.
        throttle_rate_limit, throttle_burst_limit: API Gateway stage throttling (requests per second, burst).
        alarm_topic_arn: an SNS topic the alarms notify; unset, alarms only change state.
        log_level: ``POWERTOOLS_LOG_LEVEL`` of the functions.
        collection_name: the Serverless collection's name (3-28 lower-case letters, digits, hyphens).
        standby_replicas: the Serverless collection keeps standby replicas in a second Availability Zone
            (``true``, the default and AWS's) or not (``false``: half the OCUs, so half the idle floor, and
            no copy to fail over to while an AZ is down; benchmarks/results/aws_cost.md). AWS fixes it
            when the collection is created: changing it later leaves an existing collection as it was.
            ``aoss`` only.
        snap_start: Lambda SnapStart on the ``api`` and ``context`` functions (``false`` by default): their
            init (imports, clients, one priming context, ``memstack.snapstart``) runs once per published
            version and is snapshotted; API Gateway then invokes each function's ``live`` alias. It costs
            snapshot caching and restores (docs/deploy.md "Cold start").
        api_execution_logs: turn on API Gateway execution logging (needs the account-wide API Gateway
            CloudWatch role, which this stack then creates).
        memory_options: the memory options of every function (``MEMSTACK_OPTIONS``), e.g.
            ``{"observational_memory": true, "generate_title": true}``; checked at synth with
            ``MemoryOptions.parse``. Unset: the library's defaults (observational memory off).
        observation_sweep_minutes: how often the schedule restarts idle observation work (1-1440).
    """

    search_service: SearchService = "aoss"
    auth: AuthMode = "iam"
    jwt_user_pool_arn: str | None = None
    jwt_resource_claim: str = "sub"
    models: Models = "openai"
    openai_secret_arn: str | None = None
    openai_secret_name: str | None = None
    embedding_model: str | None = None
    chat_model: str | None = None
    embedding_dimensions: int | None = None
    openai_base_url: str | None = None
    message_ttl_seconds: int | None = None
    retain_data: bool = True
    throttle_rate_limit: int = 100
    throttle_burst_limit: int = 200
    alarm_topic_arn: str | None = None
    log_level: str = "INFO"
    collection_name: str = "memstack"
    standby_replicas: bool = True
    snap_start: bool = False
    api_execution_logs: bool = False
    tags: dict[str, str] = field(default_factory=dict)
    memory_options: dict[str, Any] | None = None
    observation_sweep_minutes: int = 5

    def __post_init__(self) -> None:
        if self.search_service not in ("aoss", "es"):
            raise ValueError(f"searchService must be 'aoss' or 'es', not {self.search_service!r}")
        if self.auth not in ("iam", "jwt"):
            raise ValueError(f"auth must be 'iam' or 'jwt', not {self.auth!r}")
        if self.openai_secret_arn and self.openai_secret_name:
            raise ValueError("give openaiSecretArn or openaiSecretName, not both")
        if self.models not in ("openai", "bedrock"):
            raise ValueError(f"models must be 'openai' or 'bedrock', not {self.models!r}")
        if self.models == "bedrock":
            self._check_bedrock()
        name = self.collection_name
        if not (
            3 <= len(name) <= 28
            and name[0].isalpha()
            and all(c.islower() or c.isdigit() or c == "-" for c in name)
        ):
            raise ValueError(
                "collectionName must be 3-28 lower-case letters, digits or hyphens, starting with a letter"
            )
        if not self.standby_replicas and self.search_service != "aoss":
            raise ValueError("standbyReplicas applies to searchService=aoss only (a managed domain sizes its nodes)")
        if self.memory_options is not None:
            from memstack.config import MemoryOptions
            from memstack.errors import InvalidInput

            try:
                MemoryOptions.parse(self.memory_options)
            except InvalidInput as exc:
                raise ValueError(f"memoryOptions: {exc.message}") from None
        if not 1 <= self.observation_sweep_minutes <= 1440:
            raise ValueError("observationSweepMinutes must be from 1 to 1440")

    def _check_bedrock(self) -> None:
        from memstack.adapters.bedrock import BedrockEmbedder
        from memstack.errors import InvalidInput

        if self.openai_secret_arn or self.openai_secret_name or self.openai_base_url:
            raise ValueError(
                "openaiSecretArn, openaiSecretName and openaiBaseUrl apply to models=openai only"
            )
        try:
            BedrockEmbedder(self.embedding_model_name, dimensions=self.embedding_dimensions)
        except InvalidInput as exc:
            raise ValueError(f"embeddingModel/embeddingDimensions: {exc.message}") from None

    @property
    def embedding_model_name(self) -> str:
        """The embedding model: the configured one, else the provider's default."""
        return self.embedding_model or DEFAULT_EMBEDDING_MODELS[self.models]

    @property
    def chat_model_name(self) -> str:
        """The chat model: the configured one, else the provider's default (``memstack.settings``)."""
        from memstack.settings import DEFAULT_BEDROCK_CHAT_MODEL, DEFAULT_OPENAI_CHAT_MODEL

        if self.chat_model:
            return self.chat_model
        return DEFAULT_BEDROCK_CHAT_MODEL if self.models == "bedrock" else DEFAULT_OPENAI_CHAT_MODEL

    @property
    def memory_options_json(self) -> str | None:
        """``memory_options`` as the compact JSON of ``MEMSTACK_OPTIONS`` (``None`` when unset)."""
        if self.memory_options is None:
            return None
        return json.dumps(self.memory_options, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_context(cls, node: Node) -> MemstackConfig:
        """The configuration from the CDK context of ``node`` (camelCase keys; strings from ``-c`` are
        converted: ``"true"``/``"false"``, numbers)."""

        def get(key: str) -> Any:
            value = node.try_get_context(key)
            return None if value in (None, "") else value

        def flag(key: str, default: bool) -> bool:
            value = get(key)
            if value is None:
                return default
            if isinstance(value, bool):
                return value
            return str(value).strip().lower() in ("1", "true", "yes", "on")

        def number(key: str) -> int | None:
            value = get(key)
            return None if value is None else int(value)

        defaults = cls()
        tags = get("tags")
        options = get("memoryOptions")
        return cls(
            search_service=get("searchService") or defaults.search_service,
            auth=get("auth") or defaults.auth,
            jwt_user_pool_arn=get("jwtUserPoolArn"),
            jwt_resource_claim=get("jwtResourceClaim") or defaults.jwt_resource_claim,
            models=get("models") or defaults.models,
            openai_secret_arn=get("openaiSecretArn"),
            openai_secret_name=get("openaiSecretName"),
            embedding_model=get("embeddingModel"),
            chat_model=get("chatModel"),
            embedding_dimensions=number("embeddingDimensions"),
            openai_base_url=get("openaiBaseUrl"),
            message_ttl_seconds=number("messageTtlSeconds"),
            retain_data=flag("retainData", defaults.retain_data),
            throttle_rate_limit=number("throttleRateLimit") or defaults.throttle_rate_limit,
            throttle_burst_limit=number("throttleBurstLimit") or defaults.throttle_burst_limit,
            alarm_topic_arn=get("alarmTopicArn"),
            log_level=get("logLevel") or defaults.log_level,
            collection_name=get("collectionName") or defaults.collection_name,
            standby_replicas=flag("standbyReplicas", defaults.standby_replicas),
            snap_start=flag("snapStart", defaults.snap_start),
            api_execution_logs=flag("apiExecutionLogs", defaults.api_execution_logs),
            tags=json.loads(tags) if isinstance(tags, str) else dict(tags or {}),
            memory_options=_json_context("memoryOptions", options) if isinstance(options, str) else options,
            observation_sweep_minutes=number("observationSweepMinutes") or defaults.observation_sweep_minutes,
        )


def _json_context(name: str, text: str) -> Any:
    """A CDK context value given as JSON text; ``ValueError`` naming the key when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{name}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
