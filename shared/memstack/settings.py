"""Settings: the one place that reads the environment.

Every name is ``MEMSTACK_`` + the field name in upper case (``MEMSTACK_BACKEND``, ``MEMSTACK_TABLE``, …),
except the few that AWS and OpenAI tools already define: the OpenAI key and base URL
(``OPENAI_API_KEY``, ``OPENAI_BASE_URL``), the Parameters and Secrets extension's port
(``PARAMETERS_SECRETS_EXTENSION_HTTP_PORT``) and the region (``MEMSTACK_REGION``, else ``AWS_REGION``, else
``AWS_DEFAULT_REGION``, as Lambda sets them). Reading settings never connects to anything; ``bootstrap``
builds the adapters from them, lazily.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from memstack.errors import InvalidInput

Backend = Literal["sqlite", "aws"]
EmbedderName = Literal["wordllama", "local", "hash", "openai", "bedrock"]
ChatProvider = Literal["openai", "bedrock"]
OpenSearchService = Literal["aoss", "es", "none"]


DEFAULT_LOCAL_EMBEDDER: EmbedderName = "wordllama"
"""The offline embedder used when none is named: WordLlama static embeddings. Chosen by measurement over
LoCoMo dev and LongMemEval dev (docs/adr/0007-default-local-embedder.md): 0.27 ms of CPU per turn instead of
e5's 71 ms, for 0.023 less evidence recall on LoCoMo dev in hybrid mode."""


def default_embedder(*, openai_key: bool) -> EmbedderName:
    """The embedder used when none is named — the one rule ``Memory.local()``, ``memstack serve``, the
    CLI and the settings share: ``openai`` when an OpenAI key is set, else ``DEFAULT_LOCAL_EMBEDDER``.

    Args:
        openai_key: whether an OpenAI API key is configured (``OPENAI_API_KEY``).
    """
    return "openai" if openai_key else DEFAULT_LOCAL_EMBEDDER


DEFAULT_OPENAI_CHAT_MODEL = "gpt-4o-mini"
DEFAULT_BEDROCK_CHAT_MODEL = "amazon.nova-lite-v1:0"
"""The chat models when ``MEMSTACK_CHAT_MODEL`` is unset (docs/deploy.md "Models")."""


class Settings(BaseModel):
    """Deployment settings, read from the environment (and nothing else) by ``load_settings``.

    A plain pydantic model filled by ``from_environment`` rather than a ``pydantic_settings.BaseSettings``:
    every value here is a scalar or a JSON string the validators parse, so reading the variables is a
    dictionary look-up, and pydantic-settings' import (its sources for dotenv, CLI, cloud secret stores:
    about 60 ms of CPU, measured by ``benchmarks/cold_start.py``) stays off every function's cold start.
    Names match as pydantic-settings matched them: case-insensitively, the first of a field's alias
    choices that is set.

    Attributes:
        backend: ``sqlite`` (the embedded default: one file, offline) or ``aws`` (DynamoDB + S3 +
            OpenSearch).
        db_path: the SQLite file of the ``sqlite`` backend.
        embedder: ``wordllama`` (offline static embeddings, 256-d), ``local`` (offline e5, 384-d), ``hash``
            (deterministic, 256-d), ``openai`` or ``bedrock`` (Amazon Bedrock, IAM credentials). Unset:
            ``default_embedder`` (``openai`` when an OpenAI key is set, else ``DEFAULT_LOCAL_EMBEDDER``).
        embedding_model, embedding_dimensions: the embedding model of ``openai`` (default
            ``text-embedding-3-small``) or ``bedrock`` (a Bedrock model id, default
            ``amazon.titan-embed-text-v2:0``) and its optional output size.
        chat_provider: where the chat model of the Observer, the Reflector and titles runs: ``openai`` or
            ``bedrock`` (``Converse``). Unset: ``bedrock`` when the embedder is ``bedrock``, else ``openai``.
        chat_model: that chat model (an OpenAI model name, or a Bedrock model or inference profile id).
            Unset: ``gpt-4o-mini`` on OpenAI, ``amazon.nova-lite-v1:0`` on Bedrock.
        bedrock_region: the region of Bedrock calls; unset, ``region``.
        openai_api_key, openai_base_url: the OpenAI key and an optional OpenAI-compatible endpoint.
        openai_api_key_secret_arn: a Secrets Manager secret holding the OpenAI key (its plain string value),
            read once per process by ``bootstrap`` when ``openai_api_key`` is unset (the Lambda functions).
        secrets_extension_port: the port of the AWS Parameters and Secrets Lambda Extension
            (``PARAMETERS_SECRETS_EXTENSION_HTTP_PORT``, the extension's own variable, set by infra with the
            layer): the key secret is read through it, else (unset, or the extension not answering) with a
            Secrets Manager client (``memstack.adapters.secrets``).
        region: the AWS region of DynamoDB, S3 and OpenSearch.
        table: the DynamoDB table (single-table design, docs/dynamodb.md).
        bucket: the S3 bucket for message bodies over DynamoDB's item limit; unset, such messages are
            refused with ``PayloadTooLarge``.
        dynamodb_endpoint_url, s3_endpoint_url: endpoint overrides (DynamoDB Local, moto server).
        message_ttl_seconds: optional message expiry (DynamoDB TTL), in seconds after ``created_at``.
        opensearch_endpoint: the OpenSearch URL (collection or domain endpoint, with scheme).
        opensearch_service: request signing: ``aoss`` (Serverless, SigV4), ``es`` (managed domain, SigV4)
            or ``none`` (a self-run cluster; basic auth when a user name is set).
        opensearch_username, opensearch_password: basic auth for ``none``.
        opensearch_index_prefix: index names are this prefix + the embedding model + its dimension.
        opensearch_engine: the k-NN engine (``lucene`` or ``faiss``; never ``nmslib``). Unset: ``faiss`` on
            ``aoss`` (Serverless vector collections build their knn fields on faiss; cosine on faiss needs
            OpenSearch 2.19+), ``lucene`` elsewhere (efficient filtering since 2.4).
        create_resources: create the DynamoDB table and S3 bucket when missing (local endpoints, tests);
            in AWS the stacks create them.
        indexing: ``inline`` (``save_messages`` indexes before it returns) or ``stream`` (a stream indexer
            calls ``Memory.index_saved``; the API functions on AWS).
        auth: how the HTTP API trusts the ``resource_id`` of a request: ``iam`` (API Gateway authenticated
            the caller with SigV4; the trusted backend names the resource) or ``jwt`` (a JWT authorizer;
            the resource id must equal a claim of the token, else 403). docs/api.md "Auth".
        jwt_resource_claim: in ``jwt`` mode, the claim that holds the caller's resource id (default
            ``sub``).
        options: the memory options of every ``Memory`` built from these settings
            (``MEMSTACK_OPTIONS``): a JSON object of ``MemoryOptions`` names, e.g.
            ``{"observational_memory": true}``; validated here, so an error names the variable and the
            option. Unset: the defaults.
        observation_state_machine_arn: the Step Functions state machine that runs background
            observation (spec §2.9; docs/deploy.md "Observation workflow"); set on the functions that
            schedule it. Unset: no ``StepFunctionsScheduler``.

    Raises (from ``load_settings``):
        InvalidInput: a value is malformed; ``field`` names the environment variable.
    """

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    backend: Backend = "sqlite"
    db_path: Path = Path(".memstack/memory.db")
    embedder: EmbedderName | None = None
    embedding_model: str | None = Field(default=None, min_length=1, max_length=256)
    embedding_dimensions: int | None = Field(default=None, ge=1, le=8192)
    chat_provider: ChatProvider | None = None
    chat_model: str | None = Field(default=None, min_length=1, max_length=256)
    bedrock_region: str | None = Field(default=None, pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("MEMSTACK_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("MEMSTACK_OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    openai_api_key_secret_arn: str | None = None
    secrets_extension_port: int | None = Field(
        default=None, ge=1, le=65535, validation_alias=AliasChoices("PARAMETERS_SECRETS_EXTENSION_HTTP_PORT")
    )
    region: str | None = Field(
        default=None, validation_alias=AliasChoices("MEMSTACK_REGION", "AWS_REGION", "AWS_DEFAULT_REGION")
    )
    table: str = Field(default="memstack", min_length=3, max_length=255, pattern=r"^[A-Za-z0-9_.-]+$")
    bucket: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
    dynamodb_endpoint_url: str | None = None
    s3_endpoint_url: str | None = None
    message_ttl_seconds: int | None = Field(default=None, ge=1)
    opensearch_endpoint: str | None = None
    opensearch_service: OpenSearchService = "aoss"
    opensearch_username: str | None = None
    opensearch_password: SecretStr | None = None
    opensearch_index_prefix: str = Field(default="memstack", pattern=r"^[a-z0-9][a-z0-9_-]{0,100}$")
    opensearch_engine: Literal["lucene", "faiss"] | None = None
    create_resources: bool = False
    indexing: Literal["inline", "stream"] = "inline"
    auth: Literal["iam", "jwt"] = "iam"
    jwt_resource_claim: str = Field(default="sub", min_length=1, max_length=256)
    options: dict[str, Any] | None = None
    observation_state_machine_arn: str | None = Field(
        default=None, pattern=r"^arn:[A-Za-z0-9-]+:states:[a-z0-9-]*:[0-9]*:stateMachine:[A-Za-z0-9_-]{1,80}$"
    )

    @field_validator("options", mode="before")
    @classmethod
    def _options(cls, value: Any) -> dict[str, Any] | None:
        import json

        from memstack.config import MemoryOptions

        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"must be a JSON object of memory options ({exc.msg})") from None
        if not isinstance(value, dict):
            raise ValueError("must be a JSON object of memory options")
        try:
            MemoryOptions.parse(value)
        except InvalidInput as exc:
            raise ValueError(exc.message) from None
        return value

    @field_validator("observation_state_machine_arn", mode="before")
    @classmethod
    def _empty_arn(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("openai_base_url", "dynamodb_endpoint_url", "s3_endpoint_url", "opensearch_endpoint")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        assert value is not None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be a URL starting with http:// or https://")
        return value.rstrip("/")

    @property
    def embedder_name(self) -> EmbedderName:
        """The embedder to build: the configured one, else ``default_embedder``."""
        if self.embedder is not None:
            return self.embedder
        return default_embedder(openai_key=self.openai_api_key is not None)

    @property
    def chat_provider_name(self) -> ChatProvider:
        """Where the chat model runs: the configured provider, else ``bedrock`` with the ``bedrock``
        embedder, else ``openai``."""
        if self.chat_provider is not None:
            return self.chat_provider
        return "bedrock" if self.embedder_name == "bedrock" else "openai"

    @property
    def chat_model_name(self) -> str:
        """The chat model: the configured one, else the provider's default."""
        if self.chat_model is not None:
            return self.chat_model
        if self.chat_provider_name == "bedrock":
            return DEFAULT_BEDROCK_CHAT_MODEL
        return DEFAULT_OPENAI_CHAT_MODEL

    @property
    def knn_engine(self) -> Literal["lucene", "faiss"]:
        """The k-NN engine to create the index with: the configured one, else by service (see above)."""
        if self.opensearch_engine is not None:
            return self.opensearch_engine
        return "faiss" if self.opensearch_service == "aoss" else "lucene"

    def api_key(self) -> str | None:
        """The OpenAI key as plain text (never logged), or ``None``."""
        return self.openai_api_key.get_secret_value() if self.openai_api_key is not None else None


def env_names() -> dict[str, str]:
    """Field name → the environment variable that sets it (the first one for fields with several), for
    deployment code that fills a function's environment from the same names."""
    out: dict[str, str] = {}
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        out[name] = alias.choices[0] if isinstance(alias, AliasChoices) else f"MEMSTACK_{name.upper()}"  # type: ignore[assignment]
    return out


def from_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Field name → raw value for every setting set in ``environ`` (default ``os.environ``).

    A field is set by ``MEMSTACK_<FIELD>`` or, for the few with several names, by the first of its names
    (``env_names`` gives the first) that is present; names match case-insensitively.
    """
    source = os.environ if environ is None else environ
    lowered = {name.lower(): value for name, value in source.items()}
    values: dict[str, str] = {}
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        names = alias.choices if isinstance(alias, AliasChoices) else [f"MEMSTACK_{field.upper()}"]
        for name in names:
            value = lowered.get(str(name).lower())
            if value is not None:
                values[field] = value
                break
    return values


def load_settings(**overrides: object) -> Settings:
    """Read settings from the environment; keyword ``overrides`` win over it (by field name).

    Raises:
        InvalidInput: a malformed value; ``field`` names its environment variable.
    """
    _warn_unknown_names()
    try:
        return Settings.model_validate({**from_environment(), **overrides})
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "settings"
        env = env_names().get(name, name)
        raise InvalidInput(f"setting {env}: {err['msg']}", field=env) from None


_warned: set[str] = set()


def _warn_unknown_names() -> None:
    """Log (once per name) a ``MEMSTACK_*`` variable that names no setting: a typo such as
    ``MEMSTACK_BUCKETS`` would otherwise be ignored without a word."""
    import logging

    known = set(env_names().values()) | {f"MEMSTACK_{name.upper()}" for name in Settings.model_fields}
    for name in os.environ:
        if name.startswith("MEMSTACK_") and name not in known and name not in _warned:
            _warned.add(name)
            logging.getLogger(__name__).warning(
                "unknown setting %s is ignored; the settings are: %s", name, ", ".join(sorted(known))
            )
