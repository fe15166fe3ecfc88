"""Memory options: Mastra's option names in snake_case, with Mastra's defaults (spec §2.1).

Deviations from Mastra, on purpose (docs/adr/0001-defaults-and-deviations.md):
* ``semantic_recall`` is on by default: the embedded default always has an index and an embedder.
* ``semantic_recall.mode`` (``vector | keyword | hybrid``, default ``hybrid``) and ``hybrid`` weights are
  Memstack's own.

Per-call overrides are deep-merged over the configured options (Mastra's per-request memory config):
``MemoryOptions.merged(overrides)``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from memstack.deadline import DEFAULT_CONTEXT_TIMEOUT_MS
from memstack.errors import InvalidInput, PayloadTooLarge, from_validation
from memstack.limits import SizeLimit

MAX_OPTION_TEXT_CHARS = 16_000
"""Longest text option (a working-memory template, an Observer's or Reflector's instruction), in characters."""

DEFAULT_WORKING_MEMORY_TEMPLATE = """
# User Information
- **First Name**: 
- **Last Name**: 
- **Location**: 
- **Occupation**: 
- **Interests**: 
- **Goals**: 
- **Events**: 
- **Facts**: 
- **Projects**: 
"""  # noqa: W291 — the trailing spaces after each ":" are part of Mastra's template (spec §2.1)


class _Options(BaseModel):
    # strict: "4" is not a top_k and True is not 1; an int is still a float
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class MessageRange(_Options):
    """How many neighbours of each recall hit to include, before and after it in its thread."""

    before: int = Field(1, ge=0, le=50)
    after: int = Field(1, ge=0, le=50)


class HybridOptions(_Options):
    """How hybrid recall fuses the two retrievers (see ``memstack.fusion``; tuned in docs/adr/0002).

    Attributes:
        keyword_weight: prior weight of the keyword (BM25) list.
        vector_weight: prior weight of the vector list; ``None``: the embedder's ``fusion_weight`` (1.0 for
            a semantic embedder, 0.5 for the feature-hashing one, whose similarity is word overlap —
            what BM25 measures better; docs/adr/0011-spread-weighted-fusion.md).
        weighting: ``spread``: each query scales the prior weights by how much each list's own scores
            discriminate among its candidates (``memstack.fusion.spread_weights``); ``fixed``: the priors
            as they are (the fusion of docs/adr/0002).
        rank_constant: the ``k`` of reciprocal-rank terms.
        neighbour_weight: how much a hit gains from other candidates inside its ``message_range`` window.
        candidates: how many hits each retriever contributes before fusion, as a multiple of ``top_k``.
    """

    keyword_weight: float = Field(1.0, ge=0)
    vector_weight: float | None = Field(None, ge=0)
    weighting: Literal["spread", "fixed"] = "spread"
    rank_constant: float = Field(5.0, gt=0)
    neighbour_weight: float = Field(0.25, ge=0)
    candidates: int = Field(4, ge=1, le=20)

    @model_validator(mode="after")
    def _some_weight(self) -> HybridOptions:
        if self.keyword_weight == 0 and self.vector_weight == 0:  # None: the embedder's, never 0
            raise ValueError("keyword_weight and vector_weight cannot both be 0")
        return self


class SemanticRecallOptions(_Options):
    """Semantic recall (spec §2.8). Mastra's defaults: ``top_k`` 4, ``message_range`` 1/1, ``scope`` resource.

    Attributes:
        enabled: search past messages for the new message's text.
        top_k: how many matching messages to recall (1..100), before neighbours are added. With
            ``message_range`` it sets the message budget, ``top_k × (before + 1 + after)``: windows that
            overlap or end at a thread's edge leave room for further hits (``memstack.recall.window``).
        message_range: neighbours around each hit: a number (both sides) or ``{before, after}``; a hit of a
            few words shows one more neighbour on each side that has any, when that fits the budget. 0 on
            both sides shows the hits themselves.
        scope: ``resource`` searches every thread of the resource; ``thread`` only the current thread.
        threshold: relevance floor (0..1). Vector mode: minimum cosine similarity (Mastra's meaning).
            Keyword and hybrid: each retriever's hits must reach it on their own normalised score
            (cosine similarity; ``memstack.fusion.keyword_relevance`` of BM25) before fusion, so an
            unrelated query can recall nothing. ``None``: no floor.
        filter: metadata filter applied inside the search (``memstack.filters``).
        mode: ``vector``, ``keyword`` (BM25) or ``hybrid`` (weighted fusion of both; Memstack's default).
        hybrid: fusion weights.
        chunk_chars: messages longer than this are split into chunks for indexing (Mastra: 4096 tokens
            × 4 = 16,384 characters).
        tool_text_chars: tool-call arguments and tool results are indexed as text truncated to this.
        time_zone: the caller's IANA time zone (``"Europe/Paris"``), in which a query's dates and relative
            times ("yesterday", "last week") are read (``memstack.dates``). Default ``UTC``.
        now: the caller's current time for relative times in a query (ISO 8601; naive is UTC). ``None``:
            the memory's clock.
    """

    enabled: bool = True
    top_k: int = Field(4, ge=1, le=100)
    message_range: MessageRange = MessageRange()
    scope: Literal["resource", "thread"] = "resource"
    threshold: float | None = Field(None, ge=0, le=1)
    filter: dict[str, Any] | None = None
    mode: Literal["vector", "keyword", "hybrid"] = "hybrid"
    hybrid: HybridOptions = HybridOptions()
    chunk_chars: int = Field(16_384, ge=256, le=1_000_000)
    tool_text_chars: int = Field(2_000, ge=0, le=100_000)
    time_zone: str = Field("UTC", min_length=1, max_length=64)
    now: datetime | None = Field(None, strict=False)  # JSON callers send ISO 8601 text

    @field_validator("message_range", mode="before")
    @classmethod
    def _range(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("message_range must be a number or {before, after}")
        if isinstance(value, int):
            return {"before": value, "after": value}
        return value

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from memstack.dates import time_zone
        from memstack.errors import InvalidInput

        try:
            time_zone(value)
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("filter", mode="before")
    @classmethod
    def _filter(cls, value: Any) -> Any:
        from memstack.filters import validate_filter

        return validate_filter(value, "semantic_recall.filter")


class WorkingMemoryOptions(_Options):
    """Working memory (spec §2.7): a markdown document or a JSON object, per resource or per thread.

    Attributes:
        enabled: show working memory to the model and offer its update tool.
        scope: ``resource`` (shared by every thread of the resource) or ``thread``; never both.
        template: markdown template (replace semantics); exclusive with ``schema``.
        json_schema: given as ``schema``: a JSON Schema dict or a pydantic model class. Switches to JSON
            mode (merge semantics, ``memstack.working_memory.merge``); exclusive with ``template``.
        version: ``stable``, or ``vnext`` (markdown only: append, or in-place replace via a search string).
        max_tokens: most tokens a stored working memory may have (tiktoken, the ``Memory``'s tokenizer).
    """

    model_config = ConfigDict(populate_by_name=True)

    enabled: bool = False
    scope: Literal["resource", "thread"] = "resource"
    template: Annotated[str, SizeLimit(MAX_OPTION_TEXT_CHARS)] | None = None
    json_schema: dict[str, Any] | type[BaseModel] | None = Field(None, alias="schema")
    version: Literal["stable", "vnext"] = "stable"
    max_tokens: int = Field(2_000, ge=1, le=100_000)

    @field_validator("template")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        if value is not None:
            value.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError, a ValueError
        return value

    @field_validator("json_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | type[BaseModel] | None) -> Any:
        if isinstance(value, dict):
            from memstack.working_memory.schema import check_json_schema

            check_json_schema(value)
        return value

    @model_validator(mode="after")
    def _exclusive(self) -> WorkingMemoryOptions:
        if self.template is not None and self.json_schema is not None:
            raise ValueError("template and schema are exclusive: give one of them")
        if self.version == "vnext" and self.json_schema is not None:
            raise ValueError("version 'vnext' works with a markdown template only, not with a schema")
        return self

    @property
    def mode(self) -> Literal["markdown", "json"]:
        """``json`` when a schema is set, else ``markdown``."""
        return "markdown" if self.json_schema is None else "json"

    @property
    def effective_template(self) -> str:
        """The template shown to the model, trimmed (Mastra trims it when it returns it)."""
        return (self.template or DEFAULT_WORKING_MEMORY_TEMPLATE).strip()


class MessageHistoryOptions(_Options):
    """A token budget for the whole prompt (spec §2.1 ``messageHistory``).

    When the assembled context is over ``max_tokens``, the oldest history is dropped (a tool call with
    its result) until it is at most ``max_tokens - at_max_remove_tokens`` (default 25 % of ``max_tokens``).
    """

    max_tokens: int = Field(ge=1, le=10_000_000)
    at_max_remove_tokens: int | None = Field(None, ge=0)

    @property
    def target_tokens(self) -> int:
        """What trimming aims for once the budget is exceeded."""
        remove = self.max_tokens // 4 if self.at_max_remove_tokens is None else self.at_max_remove_tokens
        return max(0, self.max_tokens - remove)


class ToolCallFilterOptions(_Options):
    """Leave tool calls and their results out of the context (spec §2.10); storage keeps them.

    ``exclude``: tool names to leave out; ``None`` leaves out every tool.
    """

    exclude: list[str] | None = None


class ModelSettings(_Options):
    """Sampling settings of the Observer's or Reflector's model calls (spec §2.9.1 ``modelSettings``).

    Attributes:
        temperature: 0..2; Mastra sends it only to models that accept a temperature.
        max_output_tokens: most tokens of one answer (1..1,000,000).
    """

    temperature: float = Field(0.3, ge=0, le=2)
    max_output_tokens: int = Field(100_000, ge=1, le=1_000_000)


class ContinuationHints(_Options):
    """Which continuation hints the agent extracts (spec §2.9.1 ``continuationHints``; both on)."""

    current_task: bool = True
    suggested_response: bool = True


def _hints(value: Any) -> Any:
    if isinstance(value, bool):
        return {"current_task": value, "suggested_response": value}
    return value


_IDLE = re.compile(r"^(\d{1,9})(ms|s|m|min|h|hr)$")
_IDLE_MS = {"ms": 1, "s": 1_000, "m": 60_000, "min": 60_000, "h": 3_600_000, "hr": 3_600_000}


class ObservationOptions(_Options):
    """The Observer's options (spec §2.9.1 ``observation.*``), with Mastra's defaults.

    Attributes:
        model: the Observer's model id; ``None`` falls back to ``reflection.model``, then to the
            top-level ``model``, then to the configured chat model (spec: "top-level model → own
            sub-model → the other sub-model → default").
        message_tokens: observe when the unobserved messages reach this many tokens (30,000).
        buffer_tokens: async buffering interval: a fraction of ``message_tokens`` in (0, 1) (0.2, i.e.
            6,000 tokens), an absolute token count ≥ 1, or ``False`` to disable all async buffering
            (observation and reflection). Must resolve to fewer than ``message_tokens``.
        buffer_activation: how much of ``message_tokens`` activation clears: a ratio in (0, 1] (0.8:
            keep 6,000 tokens unobserved), or ≥ 1000 for "tokens to keep" (fewer than ``message_tokens``).
        block_after: a multiplier of ``message_tokens`` in [1, 100) (1.2, i.e. 36,000), or an absolute
            token count ≥ 100 that must exceed ``message_tokens``; above it activation may overshoot.
        buffer_on_idle: accepted for Mastra compatibility, changing nothing: buffering already runs after
            each saved turn, in the background.
        max_tokens_per_batch: resource scope: most message tokens of one multi-thread Observer batch.
        previous_observer_tokens: tail-truncates previous observations sent to the Observer to this
            many tokens (2,000); ``0`` omits them, ``False`` sends them whole.
        observe_attachments: ``True``, ``False``, ``"auto"`` or an allowlist of mime globs
            (``["image/*", "application/pdf"]``); accepted for Mastra compatibility, changing nothing: the
            Observer reads text, with ``[Image #n: name]``/``[File #n: name]`` placeholders.
        instruction: custom instructions appended as ``=== CUSTOM INSTRUCTIONS ===`` (≤ 16,000 chars).
        thread_title: also extract a thread title.
        continuation_hints: ``{current_task, suggested_response}`` or a bool for both.
        manage_working_memory: the Observer also maintains working memory.
        model_settings: temperature 0.3, max_output_tokens 100,000.
    """

    model: str | None = Field(None, min_length=1, max_length=256)
    message_tokens: int = Field(30_000, ge=1, le=10_000_000)
    buffer_tokens: float | bool = 0.2  # False or a number: 0 stays a number (strict)
    buffer_activation: float = 0.8
    block_after: float = 1.2
    buffer_on_idle: bool = False
    max_tokens_per_batch: int = Field(10_000, ge=1, le=10_000_000)
    previous_observer_tokens: int | bool = Field(2_000, ge=0, le=10_000_000)  # False or a count (0: omit)
    observe_attachments: bool | Literal["auto"] | list[str] = ["image/*", "application/pdf"]
    instruction: Annotated[str, SizeLimit(MAX_OPTION_TEXT_CHARS)] | None = None
    thread_title: bool = False
    continuation_hints: ContinuationHints = ContinuationHints()
    manage_working_memory: bool = False
    model_settings: ModelSettings = ModelSettings()

    _c_hints = field_validator("continuation_hints", mode="before")(_hints)

    @field_validator("buffer_tokens", "previous_observer_tokens", mode="before")
    @classmethod
    def _no_true(cls, value: Any) -> Any:
        if value is True:
            raise ValueError("must be a number or false")
        return value

    @field_validator("buffer_tokens")
    @classmethod
    def _buffer_tokens(cls, value: float | Literal[False]) -> float | Literal[False]:
        if value is not False and value <= 0:
            raise ValueError("must be a fraction in (0, 1), a token count >= 1, or false")
        if value is not False and value > 1 and value != int(value):
            raise ValueError("an absolute buffer_tokens must be a whole number of tokens")
        return value

    @field_validator("buffer_activation")
    @classmethod
    def _activation(cls, value: float) -> float:
        if not (0 < value <= 1 or value >= 1000):
            raise ValueError("must be a ratio in (0, 1] or a token count >= 1000 to keep")
        return value

    @model_validator(mode="after")
    def _resolved(self) -> ObservationOptions:
        if self.buffer_tokens is not False and self.resolved_buffer_tokens >= self.message_tokens:
            raise ValueError(
                f"observation.buffer_tokens resolves to {self.resolved_buffer_tokens} tokens; it must be "
                f"fewer than observation.message_tokens ({self.message_tokens})"
            )
        if self.buffer_activation >= 1000 and self.buffer_activation >= self.message_tokens:
            raise ValueError(
                "observation.buffer_activation (tokens to keep) must be fewer than message_tokens"
            )
        _check_block_after(self.block_after, self.message_tokens, "observation")
        return self

    @property
    def resolved_buffer_tokens(self) -> int:
        """The buffering interval in tokens (0 when buffering is off)."""
        if self.buffer_tokens is False:
            return 0
        if self.buffer_tokens < 1:
            return max(1, round(self.message_tokens * self.buffer_tokens))
        return int(self.buffer_tokens)

    @property
    def retention_floor(self) -> int:
        """Tokens left unobserved after activation: ``message_tokens × (1 − ratio)``, or the tokens-to-keep."""
        if self.buffer_activation >= 1000:
            return int(self.buffer_activation)
        return round(self.message_tokens * (1 - self.buffer_activation))

    @property
    def resolved_block_after(self) -> int:
        """The block-after point in tokens."""
        return _resolve_block_after(self.block_after, self.message_tokens)


class ReflectionOptions(_Options):
    """The Reflector's options (spec §2.9.1 ``reflection.*``), with Mastra's defaults.

    Attributes:
        model: the Reflector's model id (resolution as ``observation.model``).
        observation_tokens: reflect when the observations reach this many tokens (40,000).
        buffer_activation: start a background reflection at this fraction of ``observation_tokens``,
            in (0, 1] (0.5, i.e. 20,000).
        block_after: a multiplier in [1, 100) (1.2, i.e. 48,000) or an absolute token count ≥ 100 over
            ``observation_tokens``; above it a synchronous reflection runs if none is buffered.
        instruction: custom instructions (≤ 16,000 chars).
        continuation_hints: as ``observation.continuation_hints``.
        model_settings: temperature 0, max_output_tokens 100,000.
    """

    model: str | None = Field(None, min_length=1, max_length=256)
    observation_tokens: int = Field(40_000, ge=1, le=10_000_000)
    buffer_activation: float = Field(0.5, gt=0, le=1)
    block_after: float = 1.2
    instruction: Annotated[str, SizeLimit(MAX_OPTION_TEXT_CHARS)] | None = None
    continuation_hints: ContinuationHints = ContinuationHints()
    model_settings: ModelSettings = ModelSettings(temperature=0.0)

    _c_hints = field_validator("continuation_hints", mode="before")(_hints)

    @model_validator(mode="after")
    def _resolved(self) -> ReflectionOptions:
        _check_block_after(self.block_after, self.observation_tokens, "reflection")
        return self

    @property
    def resolved_block_after(self) -> int:
        """The block-after point in tokens."""
        return _resolve_block_after(self.block_after, self.observation_tokens)


def _check_block_after(value: float, threshold: int, where: str) -> None:
    if value < 1:
        raise ValueError(f"{where}.block_after must be a multiplier >= 1 or an absolute token count >= 100")
    if value >= 100 and value <= threshold:
        raise ValueError(
            f"{where}.block_after is an absolute token count ({value:g}); it must exceed its threshold ({threshold})"
        )


def _resolve_block_after(value: float, threshold: int) -> int:
    return int(value) if value >= 100 else round(threshold * value)


class RetrievalOptions(_Options):
    """The ``recall`` tool over observation groups (spec §2.9.8): ``scope`` resource (default) or thread."""

    enabled: bool = True
    scope: Literal["resource", "thread"] = "resource"
    instructions: Annotated[str, SizeLimit(MAX_OPTION_TEXT_CHARS)] | None = None


class ObservationalMemoryOptions(_Options):
    """Observational memory (spec §2.9): an Observer compresses old messages into an observation log,
    a Reflector rewrites the log when it grows. Mastra's option names in snake_case, Mastra's defaults.

    Attributes:
        enabled: an object counts as enabled unless it says ``enabled: false``; ``MemoryOptions``'
            default is disabled.
        model: sets both agents; setting it together with ``observation.model`` or
            ``reflection.model`` is an error. ``None``: the configured chat model (Memstack ships an
            OpenAI-compatible adapter, not Mastra's default ``google/gemini-2.5-flash``).
        scope: ``thread`` (one record per thread; default) or ``resource`` (one record per resource,
            experimental): resource scope disables async buffering, so an explicit
            ``observation.buffer_tokens`` other than ``false`` is an error there.
        observation, reflection: the two agents' options.
        share_token_budget: ``message_tokens`` may grow into unused observation budget; requires
            ``observation.buffer_tokens: false``.
        activate_after_idle: force activation of buffered observations after idle: milliseconds, a
            duration ``"5m"``/``"1hr"``/``"30s"``/``"500ms"``, or ``"auto"`` (per-provider cache TTL).
        activate_on_provider_change: accepted for Mastra compatibility, changing nothing: a server does
            not see which model the agent calls.
        temporal_markers: insert temporal-gap markers (spec §2.9.7).
        retrieval: the recall tool: ``True``/``False`` or ``{scope, instructions}``.
        obscure_thread_ids: render thread ids as hashes in observations. ``None`` means automatic: on in
            resource scope, off in thread scope — what Mastra documents (its ``Memory`` never passes the
            flag, a GOTCHA in spec §2.9.1; we do what the docs say).

    Not options here: hooks and extractors (code, not configuration) and provider options.
    Unlike Mastra on DynamoDB (GOTCHA, spec §2.9.1 "Storage support"), enabling this never switches
    message history off: every adapter stores observation records.
    """

    enabled: bool = True
    model: str | None = Field(None, min_length=1, max_length=256)
    scope: Literal["thread", "resource"] = "thread"
    observation: ObservationOptions = ObservationOptions()
    reflection: ReflectionOptions = ReflectionOptions()
    share_token_budget: bool = False
    activate_after_idle: int | str | None = None
    activate_on_provider_change: bool = False
    temporal_markers: bool = False
    retrieval: RetrievalOptions = RetrievalOptions(enabled=False)
    obscure_thread_ids: bool | None = None

    @field_validator("retrieval", mode="before")
    @classmethod
    def _retrieval(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    @field_validator("activate_after_idle")
    @classmethod
    def _idle(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, bool):
            raise ValueError("must be milliseconds, a duration such as '5m', or 'auto'")
        if isinstance(value, int) and not 0 < value <= 7 * 24 * 3_600_000:
            raise ValueError("must be between 1 ms and 7 days")
        if isinstance(value, str) and value != "auto" and not _IDLE.match(value):
            raise ValueError("must be milliseconds, a duration such as '5m' or '1hr', or 'auto'")
        return value

    @model_validator(mode="after")
    def _rules(self) -> ObservationalMemoryOptions:
        if self.model is not None and (self.observation.model or self.reflection.model):
            raise ValueError(
                "observational_memory.model sets both agents: do not also set observation.model or reflection.model"
            )
        explicit = "buffer_tokens" in self.observation.model_fields_set
        if self.scope == "resource" and explicit and self.observation.buffer_tokens is not False:
            raise ValueError(
                "observational_memory.scope 'resource' disables async buffering: "
                "observation.buffer_tokens must be false (or left unset) there"
            )
        if self.scope == "resource" and "buffer_activation" in self.observation.model_fields_set:
            raise ValueError(
                "observational_memory.scope 'resource' disables async buffering: "
                "observation.buffer_activation cannot be set there"
            )
        if self.share_token_budget and self.observation.buffer_tokens is not False:
            raise ValueError(
                "observational_memory.share_token_budget requires observation.buffer_tokens: false"
            )
        return self

    @property
    def buffering(self) -> bool:
        """Whether async buffering runs: off in resource scope and with ``buffer_tokens: false``."""
        return self.scope == "thread" and self.observation.buffer_tokens is not False

    @property
    def effective_obscure_thread_ids(self) -> bool:
        """``obscure_thread_ids``, or automatic: ``True`` in resource scope."""
        return self.scope == "resource" if self.obscure_thread_ids is None else self.obscure_thread_ids

    @property
    def activate_after_idle_ms(self) -> int | Literal["auto"] | None:
        """``activate_after_idle`` in milliseconds (``"auto"`` and ``None`` pass through)."""
        value = self.activate_after_idle
        if value is None or isinstance(value, int) or value == "auto":
            return value  # type: ignore[return-value]
        match = _IDLE.match(value)
        assert match is not None
        return int(match.group(1)) * _IDLE_MS[match.group(2)]

    def models(self, default: str) -> tuple[str, str]:
        """``(observer model, reflector model)``: top-level → own → the other's → ``default``."""
        if self.model is not None:
            return self.model, self.model
        obs, ref = self.observation.model, self.reflection.model
        return obs or ref or default, ref or obs or default


class GenerateTitleOptions(_Options):
    """Thread title generation (spec §2.6 ``generateTitle``; off by default, as in Mastra).

    Attributes:
        enabled: title an untitled thread in the background after its first user message.
        instructions: replaces the default title instructions (≤ 16,000 chars).
        min_messages: the thread's own messages needed first (1..100; Mastra's default 1).
    """

    enabled: bool = True
    instructions: Annotated[str, SizeLimit(MAX_OPTION_TEXT_CHARS)] | None = None
    min_messages: int = Field(1, ge=1, le=100)


class MemoryOptions(_Options):
    """Every memory option. Build with ``MemoryOptions.parse(dict)`` to get ``InvalidInput`` errors.

    Attributes:
        last_messages: how many recent messages of the thread to show (Mastra default 10); ``False``
            or ``0`` shows none.
        semantic_recall: ``SemanticRecallOptions``, or ``True``/``False``.
        working_memory: ``WorkingMemoryOptions``.
        message_history: optional token budget; ``None``, or ``{"max_tokens": None}`` (the documented
            default "none"), is no budget.
        tool_call_filter: optional tool-call filter.
        read_only: save nothing and offer no working-memory tool.
        observational_memory: ``ObservationalMemoryOptions`` (spec §2.9), or ``True``/``False``;
            disabled by default. An object counts as enabled unless it says ``enabled: false``.
        generate_title: ``GenerateTitleOptions`` or ``True``/``False`` (default off): title untitled
            threads in the background; a title someone set is never overwritten.
        context_timeout_ms: the turn's budget, in milliseconds, for every call ``context()`` makes that
            may be slow (the synchronous Observer and Reflector, the embedder, the search index); past it
            the turn is answered from what is committed, without recall (``memstack.deadline``). Not a
            Mastra option; the default (20,000) leaves margin under API Gateway's 29 s.
    """

    last_messages: int | Literal[False] = Field(10, ge=0, le=10_000)
    semantic_recall: SemanticRecallOptions = SemanticRecallOptions()
    working_memory: WorkingMemoryOptions = WorkingMemoryOptions()
    message_history: MessageHistoryOptions | None = None
    tool_call_filter: ToolCallFilterOptions | None = None
    read_only: bool = False
    observational_memory: ObservationalMemoryOptions = ObservationalMemoryOptions(enabled=False)
    generate_title: GenerateTitleOptions = GenerateTitleOptions(enabled=False)
    context_timeout_ms: int = Field(DEFAULT_CONTEXT_TIMEOUT_MS, ge=100, le=900_000)

    @field_validator("last_messages", mode="before")
    @classmethod
    def _last(cls, value: Any) -> Any:
        if value is True:
            raise ValueError("last_messages must be a non-negative integer or false")
        return value

    @field_validator("semantic_recall", mode="before")
    @classmethod
    def _recall(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    @field_validator("message_history", mode="before")
    @classmethod
    def _history(cls, value: Any) -> Any:
        # max_tokens None is the documented default, "none": no budget, whatever else the object says
        if isinstance(value, dict) and "max_tokens" in value and value["max_tokens"] is None:
            return None
        return value

    @field_validator("working_memory", mode="before")
    @classmethod
    def _wm(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    @field_validator("observational_memory", "generate_title", mode="before")
    @classmethod
    def _om(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    @property
    def history_count(self) -> int:
        """``last_messages`` as a count (``False`` → 0)."""
        return 0 if self.last_messages is False else int(self.last_messages)

    @classmethod
    def parse(cls, data: MemoryOptions | dict[str, Any] | None) -> MemoryOptions:
        """Validate options given as a dict (or pass ``MemoryOptions`` through).

        Raises:
            InvalidInput: naming the first offending option, e.g. ``semantic_recall.top_k``.
        """
        if isinstance(data, MemoryOptions):
            return data
        if data is not None and not isinstance(data, dict):
            raise InvalidInput("options must be an object", field="options")
        try:
            return cls.model_validate(data or {})
        except ValidationError as exc:
            raise _invalid(exc) from None

    def merged(self, overrides: dict[str, Any] | None) -> MemoryOptions:
        """These options with ``overrides`` deep-merged over them (objects merge, other values replace).

        ``working_memory.max_tokens`` is the operator's limit: a call may lower it, never raise it (over
        HTTP the options come from the API caller, who must not lift the limit the deployment set).

        Raises:
            InvalidInput: an override is invalid, or raises ``working_memory.max_tokens``.
        """
        if not overrides:
            return self
        if not isinstance(overrides, dict):
            raise InvalidInput("options must be an object", field="options")
        base = self.model_dump(exclude_none=False, by_alias=True)
        # only what was set, so rules on explicit settings (resource scope and buffer_tokens) still apply
        base["observational_memory"] = self.observational_memory.model_dump(exclude_unset=True, by_alias=True)
        over = _expand_bools(overrides)
        wm_over = over.get("working_memory")
        if isinstance(wm_over, dict):  # a per-call template or schema replaces the configured one
            if wm_over.get("template") is not None:
                base["working_memory"]["schema"] = None
            if wm_over.get("schema") is not None:
                base["working_memory"]["template"] = None
        merged = MemoryOptions.parse(_deep_merge(base, over))
        limit, asked = self.working_memory.max_tokens, merged.working_memory.max_tokens
        if asked > limit:
            raise InvalidInput(
                f"working_memory.max_tokens {asked} is over the configured limit of {limit} tokens: a call "
                "may lower the limit, not raise it",
                field="options.working_memory.max_tokens",
            )
        return merged


def _expand_bools(overrides: dict[str, Any]) -> dict[str, Any]:
    out = dict(overrides)
    for key in ("semantic_recall", "working_memory", "observational_memory", "generate_title"):
        if isinstance(out.get(key), bool):
            out[key] = {"enabled": out[key]}
    for key in ("observational_memory", "generate_title"):
        value = out.get(key)
        if isinstance(value, dict) and "enabled" not in value:  # Mastra: an object counts as enabled
            out[key] = {**value, "enabled": True}
    if isinstance(out.get("semantic_recall"), dict):
        recall = dict(out["semantic_recall"])
        if isinstance(recall.get("message_range"), int) and not isinstance(recall["message_range"], bool):
            recall["message_range"] = {"before": recall["message_range"], "after": recall["message_range"]}
        out["semantic_recall"] = recall
    return out


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in ("filter", "schema"):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _invalid(exc: ValidationError) -> InvalidInput | PayloadTooLarge:
    errors = exc.errors()
    # an unknown name is reported first: a misspelt required option is also "missing", and the name the
    # caller typed is what explains both
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    # pydantic names union branches in the location (``buffer_tokens.float``); the field is what users set
    branches = ("function-", "int", "literal", "float", "bool", "str", "list[", "dict[", "constrained-")
    path = [str(p) for p in err["loc"] if not str(p).startswith(branches)]
    field = ".".join(path)
    ctx_error = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_error, InvalidInput):
        return ctx_error
    if err["type"] == "extra_forbidden" and path:
        return InvalidInput(_unknown_option(path), field=field)
    return from_validation(err["type"], f"{field or 'options'}: {err['msg']}", field or "options")


def _unknown_option(path: list[str]) -> str:
    """The message for an option name no options model has, e.g. ``["semantic_recall", "topk"]`` →
    ``semantic_recall has no option 'topk' (did you mean 'top_k'?)``, ``["lastMessages"]`` → ``there is no
    option 'lastMessages' (did you mean 'last_messages'?)``: the owner's option names are known
    here, so a misspelt one is named with the closest of them (``difflib``, as Python's own "did you mean"
    hints), else the owner's options are listed."""
    import difflib  # only on this error path: the options module is on every cold start's import

    owner, name = path[:-1], path[-1]
    model: type[BaseModel] | None = MemoryOptions
    for part in owner:
        model = _option_model(model, part) if model is not None else None
    where = f"{'.'.join(owner)} has" if owner else "there is"
    if model is None:
        return f"{where} no option {name!r}"
    known = sorted(f.alias or key for key, f in model.model_fields.items())
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"known options: {', '.join(known)}"
    return f"{where} no option {name!r} ({hint})"


def _option_model(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    """The options model of field ``name`` of ``model`` (by name or alias; a union's model branch, as in
    ``SemanticRecallOptions | bool``), or ``None`` when the field holds none (a JSON schema is a value)."""
    from typing import get_args

    for key, info in model.model_fields.items():
        if name in (key, info.alias):
            pending: list[Any] = [info.annotation]
            while pending:
                kind = pending.pop()
                if isinstance(kind, type) and issubclass(kind, _Options):
                    return kind
                pending.extend(get_args(kind))
    return None
