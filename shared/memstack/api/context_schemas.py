"""The context route's request and response bodies, and the types and bases every route's bodies share
(pydantic; with ``memstack.api.schemas`` they make the OpenAPI document).

Apart from ``memstack.api.schemas`` so that the ``context`` function, which serves that route alone
(``memstack.api.app.ROUTE_SETS``), imports only these: defining the other routes' ~40 models cost its
import ~12 ms of CPU even with their validators deferred (``import app`` in 20 fresh interpreters each, a
loaded 2-core machine: medians 212 against 224 ms). ``memstack.api.schemas`` re-exports every name here, so
a body is imported from there as from here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

from memstack.api import ids
from memstack.context import SystemKind
from memstack.errors import InvalidInput
from memstack.model import MAX_ID_LENGTH, Author, Message, Part, Role, check_routable_id
from memstack.usecases.checks import MAX_PAGE, MAX_SEQ

Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)]


def _in_range(minimum: int, maximum: int) -> WrapValidator:
    """Refuse anything but an integer in ``minimum..maximum`` with the library's message
    (``usecases.checks.check_limit``: ``must be an integer from 1 to 1000``), whichever check failed."""

    def check(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError(
                "int_range",
                "must be an integer from {minimum} to {maximum}",
                {"minimum": minimum, "maximum": maximum},
            ) from None

    return WrapValidator(check)


PageSize = Annotated[int, Field(ge=1, le=MAX_PAGE), _in_range(1, MAX_PAGE)]
"""A page size (``limit``), as ``Memory`` takes it."""
LastN = Annotated[int, Field(ge=0, le=MAX_PAGE), _in_range(0, MAX_PAGE)]
"""``last``: the newest N messages."""
Neighbours = Annotated[StrictInt, Field(ge=0, le=100), _in_range(0, 100)]
"""``include`` items' ``before``/``after`` (strict: ``true`` is refused)."""
Seq = Annotated[StrictInt, Field(ge=0, le=MAX_SEQ), _in_range(0, MAX_SEQ)]
"""A thread's ``seq`` (``expected_last_seq``), in a JSON body: an integer, as ``Memory`` takes it (strict:
``"12"``, ``12.0`` and ``true`` are refused)."""
ReadLimit = Annotated[int, Field(ge=1, le=100_000), _in_range(1, 100_000)]
"""How many messages ``index-health`` reads."""


def _routable(value: str) -> str:
    """``value`` if ``check_routable_id`` takes it; else its error, in the library's words (the first rule
    broken: a control character is named as one, not as a character outside the rule)."""
    try:
        return check_routable_id(value, "id")
    except InvalidInput as exc:
        raise PydanticCustomError(ids.NOT_ROUTABLE, exc.message.removeprefix("id ")) from None


RoutableId = Annotated[Id, AfterValidator(_routable)]
"""A thread or resource id in a query or a body: one the API can address in a path (``ids``)."""
ThreadId = Annotated[
    RoutableId,
    Field(
        description="A thread id the API can route: Unicode letters and digits, '_' and "
        f"{ids.ROUTABLE_SPECIALS!r}; not '.' or '..' (docs/api.md).",
    ),
]
"""A thread id that enters through a body: the API must be able to address it in a path later (``ids``)."""
Options = Annotated[
    dict[str, Any] | None,
    Field(
        description="Memory options for this call, deep-merged over the configured ones (Mastra's names in "
        "snake_case: last_messages, semantic_recall, working_memory, message_history, tool_call_filter, "
        "read_only, observational_memory, generate_title; README 'Options')."
    ),
]


class _Schema(BaseModel):
    # defer_build: a model's validator and serializer are built on its first use, not at import (a Lambda
    # function's cold start builds only the models of the routes it serves; benchmarks/cold_start.py)
    model_config = ConfigDict(defer_build=True)


class _Request(_Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    def __repr__(self) -> str:
        # the fields given, never their values: Powertools' route adapter formats the route's arguments
        # into a debug line on every request (an f-string, built even with debug logging off), and a body
        # holds message text; a full repr also cost a context request ~10 µs
        return f"{type(self).__name__}({', '.join(sorted(self.model_fields_set))})"


# --- query parameters -------------------------------------------------------------------------------


class ResourceQuery(_Request):
    """The query of every route but health: the resource the call acts for."""

    resource_id: RoutableId = Field(description="The resource (owner) the call acts for.")


# --- request bodies ---------------------------------------------------------------------------------


class MessageIn(_Request):
    """A message to save or show: ``content`` (text) or ``parts``, not both."""

    id: Id | None = Field(None, description="Client-supplied id; saving an existing id updates it in place.")
    role: Role = "user"
    content: str | None = None
    parts: list[Part] | None = None
    created_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    author: Author | None = None

    def to_input(self) -> dict[str, Any]:
        """The message as ``Memory`` takes it (only the fields the caller set, plus the role)."""
        data = self.model_dump(exclude_unset=True, exclude={"parts"})
        data["role"] = self.role
        if self.parts is not None:
            data["parts"] = [p.model_dump() for p in self.parts]
        return data


def _text_message(value: Any) -> Any:
    return {"role": "user", "content": value} if isinstance(value, str) else value


def _string_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


MessageInput = Annotated[MessageIn, BeforeValidator(_text_message)]
"""A ``MessageIn``, or a plain string taken as a user text message."""


class TurnBody(_Request):
    """The turn to assemble: what ``POST …/context`` and ``POST …/inspect`` take (``Memory.context``)."""

    message: MessageInput | None = Field(
        None, description="The new user message (not saved): a message object or a plain string."
    )
    instructions: Annotated[
        list[str] | None,
        BeforeValidator(_string_list),
        WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
    ] = Field(None, description="System instructions (a string or a list), shown first.")
    context: list[MessageInput] | None = Field(
        None, description="Call-time messages shown after history, never saved; at most 1000 (413)."
    )
    options: Options = None

    def turn(self) -> dict[str, Any]:
        """The keyword arguments of ``Memory.context`` besides the thread and the resource."""
        return {
            "message": self.message.to_input() if self.message is not None else None,
            "instructions": self.instructions,
            "context": [m.to_input() for m in self.context] if self.context is not None else None,
            "options": self.options,
        }


class ContextBody(TurnBody):
    """``POST /v1/threads/{thread_id}/context``: the turn to assemble."""

    count_tokens: StrictBool = Field(
        False,
        description="Count the tokens of messages + tools (tiktoken o200k_base) into token_count. Off by "
        "default: loading the tokenizer costs a cold function ~250 ms of CPU. A token budget in the "
        "options counts them anyway.",
    )


# --- responses --------------------------------------------------------------------------------------


class SystemOut(_Schema):
    """One system message and the layer it comes from."""

    kind: SystemKind
    text: str


class ContextOut(_Schema):
    """What the model sees for the turn.

    ``messages`` and ``tools`` go straight to ``chat.completions.create(messages=..., tools=...)``.
    """

    messages: list[dict[str, Any]] = Field(description="OpenAI chat messages (ModelContext.to_openai()).")
    tools: list[dict[str, Any]] = Field(description="OpenAI function tools (may be empty).")
    token_count: int | None = Field(
        description="Tokens of messages + tools (tiktoken o200k_base); null unless the request set "
        "count_tokens or a token budget applied."
    )
    system: list[SystemOut] = Field(description="The system messages, in layer order.")
    conversation: list[Message] = Field(
        description="History with same-thread recall, call-time context, then the new message."
    )
    history_ids: list[str]
    recalled_ids: list[str]
    last_seq: int = Field(
        description="The thread's last seq when read (0: no message yet): expected_last_seq of a save."
    )
    working_memory_version: str | None = Field(
        description="The version of the working memory shown (null: not shown): pass it with the model's "
        "updateWorkingMemory call."
    )
