"""Memory options: Mastra's option names in snake_case, with Mastra's defaults (spec §2.1).

Deviations from Mastra, on purpose (docs/adr/0001-defaults-and-deviations.md):
* ``semantic_recall`` is on by default: the embedded default always has an index and an embedder.
* ``semantic_recall.mode`` (``vector | keyword | hybrid``, default ``hybrid``) and ``hybrid`` weights are
  Memstack's own.

Per-call overrides are deep-merged over the configured options (Mastra's per-request memory config):
``MemoryOptions.merged(overrides)``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from memstack.errors import InvalidInput

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
        keyword_weight: weight of the keyword (BM25) list.
        vector_weight: weight of the vector list.
        rank_constant: the ``k`` of reciprocal-rank terms.
        neighbour_weight: how much a hit gains from other candidates inside its ``message_range`` window.
        candidates: how many hits each retriever contributes before fusion, as a multiple of ``top_k``.
    """

    keyword_weight: float = Field(1.0, ge=0)
    vector_weight: float = Field(0.5, ge=0)
    rank_constant: float = Field(5.0, gt=0)
    neighbour_weight: float = Field(0.25, ge=0)
    candidates: int = Field(4, ge=1, le=20)

    @model_validator(mode="after")
    def _some_weight(self) -> HybridOptions:
        if self.keyword_weight == 0 and self.vector_weight == 0:
            raise ValueError("keyword_weight and vector_weight cannot both be 0")
        return self


class SemanticRecallOptions(_Options):
    """Semantic recall (spec §2.8). Mastra's defaults: ``top_k`` 4, ``message_range`` 1/1, ``scope`` resource.

    Attributes:
        enabled: search past messages for the new message's text.
        top_k: how many matching messages to recall (1..100), before neighbours are added.
        message_range: neighbours around each hit: a number (both sides) or ``{before, after}``.
        scope: ``resource`` searches every thread of the resource; ``thread`` only the current thread.
        threshold: minimum vector similarity (0..1) for vector mode; hybrid applies it to the vector list.
        filter: metadata filter applied inside the search (``memstack.filters``).
        mode: ``vector``, ``keyword`` (BM25) or ``hybrid`` (weighted fusion of both; Memstack's default).
        hybrid: fusion weights.
        chunk_chars: messages longer than this are split into chunks for indexing (Mastra: 4096 tokens
            × 4 = 16,384 characters).
        tool_text_chars: tool-call arguments and tool results are indexed as text truncated to this.
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

    @field_validator("message_range", mode="before")
    @classmethod
    def _range(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("message_range must be a number or {before, after}")
        if isinstance(value, int):
            return {"before": value, "after": value}
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
    template: str | None = Field(None, max_length=16_000)
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


class MemoryOptions(_Options):
    """Every memory option. Build with ``MemoryOptions.parse(dict)`` to get ``InvalidInput`` errors.

    Attributes:
        last_messages: how many recent messages of the thread to show (Mastra default 10); ``False``
            or ``0`` shows none.
        semantic_recall: ``SemanticRecallOptions``, or ``True``/``False``.
        working_memory: ``WorkingMemoryOptions``.
        message_history: optional token budget.
        tool_call_filter: optional tool-call filter.
        read_only: save nothing and offer no working-memory tool.
    """

    last_messages: int | Literal[False] = Field(10, ge=0, le=10_000)
    semantic_recall: SemanticRecallOptions = SemanticRecallOptions()
    working_memory: WorkingMemoryOptions = WorkingMemoryOptions()
    message_history: MessageHistoryOptions | None = None
    tool_call_filter: ToolCallFilterOptions | None = None
    read_only: bool = False

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

    @field_validator("working_memory", mode="before")
    @classmethod
    def _wm(cls, value: Any) -> Any:
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

        Raises:
            InvalidInput: an override is invalid.
        """
        if not overrides:
            return self
        if not isinstance(overrides, dict):
            raise InvalidInput("options must be an object", field="options")
        base = self.model_dump(exclude_none=False, by_alias=True)
        over = _expand_bools(overrides)
        wm_over = over.get("working_memory")
        if isinstance(wm_over, dict):  # a per-call template or schema replaces the configured one
            if wm_over.get("template") is not None:
                base["working_memory"]["schema"] = None
            if wm_over.get("schema") is not None:
                base["working_memory"]["template"] = None
        return MemoryOptions.parse(_deep_merge(base, over))


def _expand_bools(overrides: dict[str, Any]) -> dict[str, Any]:
    out = dict(overrides)
    for key in ("semantic_recall", "working_memory"):
        if isinstance(out.get(key), bool):
            out[key] = {"enabled": out[key]}
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


def _invalid(exc: ValidationError) -> InvalidInput:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("function-", "int", "literal")))
    ctx_error = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_error, InvalidInput):
        return ctx_error
    return InvalidInput(f"{field or 'options'}: {err['msg']}", field=field or "options")
