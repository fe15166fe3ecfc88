"""Request and response bodies of the HTTP API (pydantic; they make the OpenAPI document).

Requests forbid unknown fields, so a misspelt option is a 400 naming it rather than silently ignored.
Responses reuse the domain types (``Thread``, ``Message``) so the wire shape is the library's shape.
The context route's bodies and the shared types and bases live in ``memstack.api.context_schemas`` (the
``context`` function imports that module alone) and are re-exported here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, Json, StrictInt, WithJsonSchema

from memstack.api.context_schemas import ContextBody as ContextBody
from memstack.api.context_schemas import ContextOut as ContextOut
from memstack.api.context_schemas import Id as Id
from memstack.api.context_schemas import LastN as LastN
from memstack.api.context_schemas import MessageIn as MessageIn
from memstack.api.context_schemas import MessageInput as MessageInput
from memstack.api.context_schemas import Neighbours as Neighbours
from memstack.api.context_schemas import Options as Options
from memstack.api.context_schemas import PageSize as PageSize
from memstack.api.context_schemas import ReadLimit as ReadLimit
from memstack.api.context_schemas import ResourceQuery as ResourceQuery
from memstack.api.context_schemas import Seq as Seq
from memstack.api.context_schemas import SystemOut as SystemOut
from memstack.api.context_schemas import ThreadId as ThreadId
from memstack.api.context_schemas import TurnBody as TurnBody
from memstack.api.context_schemas import _Request, _Schema
from memstack.model import Message, ModelUsage, Thread

# --- query parameters -------------------------------------------------------------------------------


class OptionsQuery(ResourceQuery):
    """Resource plus per-call memory options as a JSON object (for GET routes)."""

    options: Json[dict[str, Any]] | None = Field(
        None,
        description="Memory options for this call as a JSON object, e.g. "
        '{"working_memory":{"template":"# Notes"}}.',
    )


class ListThreadsQuery(ResourceQuery):
    """Paging and filters of ``GET /v1/threads``."""

    limit: PageSize = Field(100, description="Page size.")
    cursor: str | None = Field(None, description="next_cursor of the previous page (opaque).")
    order_by: Literal["created_at", "updated_at"] = "created_at"
    direction: Literal["asc", "desc"] = "desc"
    metadata: Json[dict[str, Any]] | None = Field(
        None, description="Equality filter on top-level thread metadata keys, as a JSON object."
    )


class IncludeItem(_Request):
    """A message by id with neighbours from its own thread (Mastra's ``include``)."""

    id: Id
    before: Neighbours = 0
    after: Neighbours = 0


class ListMessagesQuery(ResourceQuery):
    """Paging of ``GET /v1/threads/{thread_id}/messages``."""

    last: LastN | None = Field(None, description="The newest N messages (no cursor).")
    limit: PageSize = Field(40, description="Page size when paging from the start.")
    cursor: str | None = Field(None, description="next_cursor of the previous page (opaque).")
    include: Json[list[IncludeItem]] | None = Field(
        None,
        description='Extra messages with neighbours, as a JSON array: [{"id":"m1","before":1,"after":1}]. '
        "Ids of other resources are silently absent.",
    )


# --- request bodies ---------------------------------------------------------------------------------


class CreateThreadBody(_Request):
    """``POST /v1/threads``."""

    id: ThreadId | None = Field(None, description="The thread id; generated when omitted.")
    title: str = ""
    metadata: dict[str, Any] | None = None


class UpdateThreadBody(_Request):
    """``PATCH /v1/threads/{thread_id}``: omitted fields stay; metadata merges shallowly."""

    title: str | None = None
    metadata: dict[str, Any] | None = None


class CloneThreadBody(_Request):
    """``POST /v1/threads/{thread_id}/clone``."""

    new_thread_id: ThreadId | None = Field(None, description="The clone's id; generated when omitted.")
    target_resource_id: Id | None = Field(
        None,
        description="Clone into this resource instead of the source's; the caller must be allowed to act for "
        "both (IAM: any resource; JWT: only the token's own, so the same resource).",
    )
    title: str | None = None
    metadata: dict[str, Any] | None = None
    message_limit: StrictInt | None = Field(
        None, ge=0, le=1_000_000, description="Keep the newest N messages (an integer: true is refused)."
    )


class SaveMessagesBody(_Request):
    """``POST /v1/threads/{thread_id}/messages``: a batch, saved in order."""

    messages: list[MessageInput] = Field(
        description="Message objects (or plain strings: user text messages), in order; at most 1000 (413)."
    )
    expected_last_seq: Seq | None = Field(
        None,
        description="Save only if the thread's last seq is still this (the context answer's last_seq; 0 "
        "for a new thread), else 409 conflict (field expected_last_seq). The If-Match header does the same.",
    )


class DeleteMessagesBody(_Request):
    """``POST /v1/messages/delete``."""

    message_ids: list[Id] = Field(min_length=1, description="At most 1000 ids (413).")


class WorkingMemoryBody(_Request):
    """``PUT`` working memory: markdown replaces; in schema mode an object (or JSON text) merges."""

    working_memory: Annotated[Any, WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "object"}]})] = (
        Field(
            description="Markdown text; in schema mode an object (or JSON text) merged into the stored one."
        )
    )
    options: Options = None


class ToolFunction(_Request):
    """The function of an OpenAI tool call."""

    name: str
    arguments: str = Field(description="The arguments as JSON text, as the model wrote them.")


class ToolCall(_Request):
    """An OpenAI chat-completions tool call."""

    id: str
    type: Literal["function"] = "function"
    function: ToolFunction


class ToolCallBody(_Request):
    """``POST /v1/threads/{thread_id}/working-memory/tool-calls``."""

    tool_call: ToolCall
    options: Options = None
    working_memory_version: str | None = Field(
        None,
        max_length=64,
        description="The working_memory_version of the context the model was shown (or of the last tool "
        "answer): a markdown update made from an older document is refused with the current one.",
    )


class RecallToolBody(_Request):
    """``POST /v1/threads/{thread_id}/recall-tool``: the model's ``recall`` call (observational-memory
    retrieval) and the options it was offered under (``observational_memory.retrieval`` must be on)."""

    tool_call: ToolCall
    options: Options = None


class RecallBody(_Request):
    """``POST /v1/threads/{thread_id}/recall``."""

    query: str
    options: Options = None


# --- responses --------------------------------------------------------------------------------------


class ThreadList(_Schema):
    """A page of threads and the cursor of the next page (``null`` on the last page)."""

    threads: list[Thread]
    next_cursor: str | None = None


class MessageList(_Schema):
    """Messages in chronological order and the cursor of the next page (``null`` on the last page)."""

    messages: list[Message]
    next_cursor: str | None = None


class SavedMessages(_Schema):
    """The saved messages with their per-thread ``seq`` (empty when ``read_only``), and which of them are
    stored but not searchable yet (``memstack.SavedBatch``): a stored write answers 201/200, never a
    retryable error."""

    messages: list[Message]
    unindexed: list[str] = Field(
        default_factory=list,
        description="Ids of saved messages not in the search index yet (the embedder or index failed or was "
        "slower than the deadline); the server indexes them in the background. Saving them again with "
        "these ids is safe (an existing id updates in place).",
    )


class Deleted(_Schema):
    """How many of the given messages existed (for this resource) and were deleted."""

    deleted: int


class EraseCounts(_Schema):
    """How many of each kind of stored thing an erasure deleted (``memstack.EraseReceipt``)."""

    threads: int = Field(description="Threads deleted.")
    messages: int = Field(description="Messages deleted (with their large bodies in S3).")
    working_memory: int = Field(
        description="Resource records deleted (resource-scoped working memory): 0 or 1."
    )
    observation_records: int = Field(
        description="Observational-memory records deleted (pending work with them): each thread's own "
        "(thread scope) and the resource's (resource scope)."
    )
    index_documents: int = Field(description="Search-index documents (message chunks) deleted.")


class EraseOut(_Schema):
    """``DELETE /v1/resources/{resource_id}``: the receipt. A second erasure reports zeros."""

    resource_id: str
    counts: EraseCounts


class CloneOut(_Schema):
    """The clone, its messages and the map of source message id → new id."""

    thread: Thread
    messages: list[Message]
    message_id_map: dict[str, str]


class WorkingMemoryOut(_Schema):
    """The stored working memory (markdown, or JSON text in schema mode); ``null`` if never written."""

    working_memory: str | None
    scope: Literal["resource", "thread"]


class ToolCallOut(_Schema):
    """The tool-result message (not saved) and its OpenAI ``role: tool`` rendering to send back."""

    message: Message
    messages: list[dict[str, Any]]
    working_memory_version: str | None = Field(
        None,
        description="The version of the working memory the model has seen once it reads the result: pass "
        "it with its next updateWorkingMemory call.",
    )


class ObservationSummary(_Schema):
    """The observation record that serves a thread (its own, or its resource's in resource scope), without
    the buffered chunks' text or the cursors of other threads.

    Token counts are tiktoken ``o200k_base`` tokens.
    """

    scope: Literal["thread", "resource"] = Field(
        description="Whose record it is: the thread's or the resource's."
    )
    active_observations: str = Field(
        description="The observation log the model is shown ('' before the first)."
    )
    observation_tokens: int = Field(description="Tokens of active_observations.")
    generation_count: int = Field(description="Reflections so far (0 before the first).")
    origin_type: Literal["initial", "reflection"] = Field(
        description="What produced active_observations: the Observer (initial) or the Reflector."
    )
    observed_seq: int = Field(description="The last observed seq of this thread (0: nothing observed yet).")
    pending_message_tokens: int = Field(
        description="Tokens of this scope's unobserved messages at the last count."
    )
    buffered_chunks: int = Field(description="Background observations made but not yet active.")
    current_task: str | None = Field(description="The Observer's latest note of the task at hand.")
    suggested_response: str | None = Field(description="The Observer's latest hint for the next reply.")
    failure_count: int = Field(description="Consecutive failed background runs (0 after a success).")
    last_error: str | None = Field(
        description="The last failure's error class and message (never conversation text)."
    )
    updated_at: datetime | None = Field(description="When the record was last written.")
    usage: ModelUsage = Field(
        description="Observer, Reflector, title and embedding calls made for this record and their tokens "
        "(chat: as the endpoint reported them; embeddings: by Memstack's tokenizer) — the thread's cost in "
        "thread scope, the resource's in resource scope. Kept when observational memory is off."
    )


class ObservationsQuery(ResourceQuery):
    """The query of ``GET /v1/threads/{thread_id}/observations``."""

    resource_usage: bool = Field(
        False,
        description="Also sum what the resource's threads cost (resource_usage): one record read per "
        "thread in thread scope, at most 1,000 threads.",
    )


class ResourceUsageOut(_Schema):
    """What a resource's threads cost: their records' usage summed."""

    usage: ModelUsage = Field(description="The sum of the records' usage.")
    records: int = Field(description="Records summed.")
    complete: bool = Field(
        description="False when the resource has more than 1,000 threads and only the newest 1,000 were "
        "summed."
    )


class ObservationsOut(_Schema):
    """``GET /v1/threads/{thread_id}/observations``: the summary, or ``record: null`` when nothing has been
    observed, buffered or metered for the thread yet; with ``resource_usage=true`` also the resource's
    total."""

    record: ObservationSummary | None
    resource_usage: ResourceUsageOut | None = Field(
        None, description="What the resource's threads cost, when asked for (resource_usage=true)."
    )


class RecallHit(_Schema):
    """A recalled message, its fused score and ranks per retriever."""

    message_id: str
    thread_id: str
    seq: int = Field(description="The message's position in its thread (as on ``Message``).")
    score: float = Field(
        description="The fused score in hybrid mode (weighted reciprocal ranks plus neighbour support); the "
        "retriever's own score in vector or keyword mode. Higher is better."
    )
    vector_rank: int | None = Field(None, description="Rank (from 1) in the vector list; null: not in it.")
    keyword_rank: int | None = Field(None, description="Rank (from 1) in the keyword list; null: not in it.")
    vector_score: float | None = Field(
        None, description="The vector retriever's own score (cosine similarity); null: not in its list."
    )
    keyword_score: float | None = Field(
        None, description="The keyword retriever's own score (BM25, Lucene scale); null: not in its list."
    )


class RecallOut(_Schema):
    """The fused hits (best first) and the messages around them (by thread, then seq)."""

    hits: list[RecallHit]
    messages: list[Message]


class InspectBody(TurnBody):
    """``POST /v1/threads/{thread_id}/inspect``: the turn to assemble and explain (tokens always counted)."""


class LayerOut(_Schema):
    """One layer of the assembled context and its tokens (``memstack.usecases.inspect.LayerTokens``)."""

    layer: str = Field(
        description="instructions, working_memory, recall (cross-thread block), observations, reminders, "
        "history, recalled (same-thread recall), context (call-time), message (the new one) or tools."
    )
    role: Literal["system", "conversation", "tools"]
    messages: int = Field(description="Memstack messages in the layer (0 for tools).")
    tools: int = Field(0, description="Tool definitions (the tools layer).")
    tokens: int = Field(
        description="Tokens (tiktoken o200k_base, with the per-message overhead); a conversation layer is "
        "counted rendered on its own."
    )


class InspectOut(_Schema):
    """What the model sees for a turn, explained: layers in order with tokens, and the provider requests."""

    layers: list[LayerOut] = Field(description="The layers in the order the model reads them.")
    token_count: int = Field(description="Tokens of the whole OpenAI request (messages + tools).")
    system: list[SystemOut] = Field(description="The system messages, in layer order.")
    conversation: list[Message] = Field(description="The conversation as Memstack messages.")
    history_ids: list[str]
    recalled_ids: list[str]
    openai: dict[str, Any] = Field(
        description="The chat-completions request body without the model: {messages, tools?}."
    )
    bedrock: dict[str, Any] = Field(
        description="The Amazon Bedrock Converse request without modelId: {system, messages, toolConfig?}."
    )
    anthropic: dict[str, Any] = Field(
        description="The Anthropic Messages request without model and max_tokens: {system?, messages, tools?}."
    )


class IndexHealthQuery(ResourceQuery):
    """``GET /v1/index-health``: the resource, and how many of its messages to read."""

    limit: ReadLimit = Field(
        10_000, description="The most messages to read (threads by creation, seq order)."
    )


class IndexSampleOut(_Schema):
    """A message whose index entries do not match it."""

    thread_id: str
    message_id: str
    seq: int
    state: Literal["not_indexed", "stale"] = Field(
        description="not_indexed: never indexed, or saved again since; stale: indexed from other content, "
        "thread metadata or another embedder."
    )


class IndexHealthOut(_Schema):
    """How well the resource's search index matches its stored messages (``Memory.index_health``)."""

    resource_id: str
    embedding_model: str = Field(description="The embedder recall searches with (its model id).")
    dimension: int = Field(description="The index's vector dimension.")
    threads: int = Field(description="Threads read.")
    messages: int = Field(description="Messages read.")
    indexed: int = Field(description="Messages whose index entries match what indexing them now writes.")
    not_indexed: int = Field(description="Searchable messages never indexed (or saved again since).")
    stale: int = Field(description="Messages indexed from other content, thread metadata or embedder.")
    unsearchable: int = Field(description="Messages without searchable text (nothing to index).")
    complete: bool = Field(description="False when limit messages were read before the end.")
    samples: list[IndexSampleOut] = Field(description="Up to 50 not_indexed or stale messages.")


class Health(_Schema):
    """The service is up (nothing is connected to answer this)."""

    status: Literal["ok"] = "ok"
    version: str


class ErrorDetail(_Schema):
    """What went wrong: a stable ``code``, a message, and the request field at fault when known."""

    code: str
    message: str
    field: str | None = None


class ErrorOut(_Schema):
    """Every error response."""

    error: ErrorDetail
