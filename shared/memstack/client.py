"""``MemstackClient``: the HTTP API (docs/api.md) with the methods of ``Memory``.

    from memstack.client import MemstackClient

    client = MemstackClient("http://127.0.0.1:8765", resource_id="user-42")        # memstack serve
    client = MemstackClient("https://abc.execute-api.eu-west-1.amazonaws.com/prod",  # deployed, IAM auth
                            resource_id="user-42", sigv4=True)
    ctx = client.context(thread_id="trip-1", message="Any snack ideas?")
    openai.chat.completions.create(**ctx.to_openai(), model="gpt-4o-mini")

Each method takes the arguments of the ``Memory`` method of the same name; ``resource_id`` may be left out
when the client was given a default. Answers are the library's types (``Thread``, ``Message``,
``ThreadPage``, ``MessagePage``, ``CloneResult``, ``RecallResult``) except ``context``, which returns a
``RemoteContext`` (the ``ModelContext`` fields the API sends, and the same ``to_openai()``), and
``get_observations``, which returns a ``RemoteObservations`` summary (or ``None``).

Errors are the library's: the API's ``{"error": {"code", "message", "field"}}`` becomes the
``memstack.errors`` class of its code (``field`` kept, ``status`` set to the HTTP status); an answer without
that shape (API Gateway's own 403/429/5xx) maps by status; a request that never got an answer (connection
refused, timeout) raises ``Unavailable``, and so does an answer of an unexpected shape. Thread ids go in the
URL percent-encoded; an id the API cannot route (``memstack.model.check_routable_id``: e.g. with ``/``,
``#``, ``?``, ``%``, or ``.``/``..``) raises ``InvalidInput`` (field ``thread_id``) before anything is sent,
as ``Memory`` refuses it. Arguments are checked by ``Memory``'s rules where the client shapes them (a list
argument given a string is ``InvalidInput``, never split into characters). No httpx or pydantic exception
escapes: every failure is a ``memstack.errors`` class.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from memstack.context import SystemMessage
from memstack.errors import (
    Forbidden,
    InvalidInput,
    MemstackError,
    Unavailable,
    error_class,
)
from memstack.fusion import FusedHit
from memstack.memory import CloneResult, Include
from memstack.model import (
    ERASE_COUNT_KEYS,
    EraseReceipt,
    Message,
    MessagePage,
    ModelUsage,
    SavedBatch,
    Thread,
    ThreadPage,
    ToolCallPart,
    check_routable_id,
)
from memstack.recall import RecallResult
from memstack.usecases.checks import as_batch, as_context_messages, as_texts, check_metadata_filter
from memstack.usecases.inspect import ContextInspection, IndexHealth, IndexSample, LayerTokens

DEFAULT_TIMEOUT = 30.0
"""Seconds per request (connect, read, write, pool) unless the constructor says otherwise."""

SIGV4_SERVICE = "execute-api"

_GATEWAY_ERRORS: dict[int, type[MemstackError]] = {
    401: Forbidden,
    411: InvalidInput,
    500: Unavailable,
    502: Unavailable,
    504: Unavailable,
}
"""Statuses that API Gateway or a proxy answers without the API's error body (a crashed or timed-out
function is 502/504; the function's own 500s have a body). Other statuses map through the error table
(``memstack.errors.error_class``)."""
_MESSAGE_IN_FIELDS = ("id", "role", "parts", "created_at", "metadata", "author")

T = TypeVar("T")


@dataclass(frozen=True)
class RemoteContext:
    """The context of a turn as the API answers it: what ``Memory.context`` returns, over HTTP.

    Attributes:
        system: the system messages in layer order (instructions, working memory, recall).
        messages: the conversation (``Message``): history with same-thread recall interleaved, call-time
            context messages, then the new message — as ``ModelContext.messages``.
        tools: OpenAI function tools (the working-memory tool when enabled); may be empty.
        token_count: tokens of the OpenAI messages and tools (tiktoken ``o200k_base``), counted by the server
            when asked (``count_tokens=True``) or when a token budget applied; else ``None``.
        history_ids: ids of the messages that came from the thread's history.
        recalled_ids: ids of every message semantic recall brought in.
        openai_messages: the chat-completions messages, rendered by the server.
        last_seq: the thread's last ``seq`` when read, as ``ModelContext.last_seq``.
        versions: what the model was shown, as ``ModelContext.versions`` (``working_memory``);
            ``apply_tool_call(context=...)`` checks and updates it.
    """

    system: list[SystemMessage]
    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)
    token_count: int | None = None
    history_ids: list[str] = field(default_factory=list)
    recalled_ids: list[str] = field(default_factory=list)
    openai_messages: list[dict[str, Any]] = field(default_factory=list)
    last_seq: int = 0
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def working_memory_version(self) -> str | None:
        """The version of the working-memory document the model was shown (``None``: not shown)."""
        return self.versions.get("working_memory")

    @property
    def message_ids(self) -> set[str]:
        """Ids of every stored message the model is shown (history and recall)."""
        return set(self.history_ids) | set(self.recalled_ids)

    def to_openai(self) -> dict[str, Any]:
        """Chat-completions input, as ``ModelContext.to_openai()``: ``{"messages": [...], "tools": [...]}``
        (``tools`` omitted when empty: the OpenAI API refuses an empty list)."""
        out: dict[str, Any] = {"messages": [dict(m) for m in self.openai_messages]}
        if self.tools:
            out["tools"] = list(self.tools)
        return out

    def to_bedrock(self) -> dict[str, Any]:
        """Amazon Bedrock ``Converse`` input, as ``ModelContext.to_bedrock()``."""
        from memstack.render.converse import to_converse_request

        return to_converse_request(self.openai_messages, self.tools)

    def to_anthropic(self) -> dict[str, Any]:
        """Anthropic Messages input, as ``ModelContext.to_anthropic()``."""
        from memstack.render.anthropic import to_anthropic_request

        return to_anthropic_request(self.openai_messages, self.tools)


@dataclass(frozen=True)
class RemoteObservations:
    """The observation record that serves a thread, as ``GET /v1/threads/{thread_id}/observations`` sums
    it up (``ObservationRecord`` without the buffered chunks' text or other threads' cursors).

    Attributes:
        scope: ``thread`` (the thread's own record) or ``resource`` (the resource's, shared by its threads).
        active_observations: the observation log the model is shown (``""`` before the first).
        observation_tokens: tokens of ``active_observations``.
        generation_count: reflections so far.
        origin_type: ``initial`` (Observer) or ``reflection`` (Reflector).
        observed_seq: the last observed ``seq`` of this thread (0: nothing observed yet).
        pending_message_tokens: tokens of unobserved messages at the last count.
        buffered_chunks: how many background observations wait to be activated.
        current_task, suggested_response: the Observer's latest hints (``None`` if none).
        failure_count, last_error: consecutive failed background runs and the last error (no message text).
        updated_at: when the record was last written (aware UTC), if known.
        usage: the model and embedding calls made for the record and their tokens (``ModelUsage``).
    """

    scope: str
    active_observations: str
    observation_tokens: int
    generation_count: int
    origin_type: str
    observed_seq: int
    pending_message_tokens: int
    buffered_chunks: int
    current_task: str | None = None
    suggested_response: str | None = None
    failure_count: int = 0
    last_error: str | None = None
    updated_at: datetime | None = None
    usage: ModelUsage = field(default_factory=ModelUsage)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RemoteObservations:
        """Read the API's ``record`` object.

        Raises:
            KeyError, TypeError, ValueError: a shape the client cannot read (``_parse`` maps them).
        """
        updated = data.get("updated_at")
        return cls(
            scope=_str(data["scope"]),
            active_observations=_str(data["active_observations"]),
            observation_tokens=int(data["observation_tokens"]),
            generation_count=int(data["generation_count"]),
            origin_type=_str(data["origin_type"]),
            observed_seq=int(data["observed_seq"]),
            pending_message_tokens=int(data["pending_message_tokens"]),
            buffered_chunks=int(data["buffered_chunks"]),
            current_task=_opt_str(data.get("current_task")),
            suggested_response=_opt_str(data.get("suggested_response")),
            failure_count=int(data.get("failure_count") or 0),
            last_error=_opt_str(data.get("last_error")),
            updated_at=datetime.fromisoformat(_str(updated)) if updated is not None else None,
            usage=ModelUsage.model_validate(data.get("usage") or {}),
        )


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _opt_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


class SigV4Auth(httpx.Auth):
    """httpx auth that signs each request with AWS Signature Version 4 (botocore's signer), as API Gateway's
    IAM authorization (``AWS_IAM``) expects.

    Signed: the method, the URL as sent (path and query exactly as encoded), the body's SHA-256, ``host``,
    ``content-type`` and ``x-amz-*`` headers. Credentials are read per request, so refreshing credentials
    (roles, SSO) keep working.

    Args:
        credentials: botocore ``Credentials``; ``None`` resolves them with botocore's default chain
            (environment, profile, container, instance metadata).
        region: the API's region; ``None`` is the one in an ``*.execute-api.<region>.amazonaws.com`` URL
            (given as ``url``), else botocore's region (``AWS_REGION``, ``AWS_DEFAULT_REGION``, profile).
        service: the signing name (``execute-api`` for API Gateway).
        profile: a named profile for the default chain.
        url: the API's URL, to read the region from when none is configured.

    Raises:
        InvalidInput: no credentials or no region could be found (``field`` ``sigv4``).
    """

    requires_request_body = True

    def __init__(
        self,
        credentials: Any = None,
        *,
        region: str | None = None,
        service: str = SIGV4_SERVICE,
        profile: str | None = None,
        url: str | None = None,
    ) -> None:
        import botocore.session

        if credentials is None or region is None:
            session = botocore.session.Session(profile=profile)
            if credentials is None:
                credentials = session.get_credentials()
            region = region or _region_from_url(url) or session.get_config_variable("region")
        if credentials is None:
            raise InvalidInput("no AWS credentials found for SigV4 signing", field="sigv4")
        if not region:
            raise InvalidInput("no AWS region for SigV4 signing: pass sigv4={'region': ...}", field="sigv4")
        self.credentials = credentials
        self.region: str = region
        self.service = service

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from botocore.auth import SigV4Auth as BotoSigV4Auth
        from botocore.awsrequest import AWSRequest

        frozen = self.credentials.get_frozen_credentials()
        signed = {
            k: v
            for k, v in request.headers.items()
            if k.lower() in ("host", "content-type") or k.lower().startswith("x-amz-")
        }
        aws = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers=signed)
        BotoSigV4Auth(frozen, self.service, self.region).add_auth(aws)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            value = aws.headers.get(name)
            if value is not None:
                request.headers[name] = value
        yield request


def _region_from_url(url: str | None) -> str | None:
    if not url:
        return None
    host = httpx.URL(url).host
    parts = host.split(".")
    if "execute-api" in parts:
        i = parts.index("execute-api")
        return parts[i + 1] if i + 1 < len(parts) else None
    return None


def _q(value: str) -> str:
    """Percent-encode as SigV4's canonical form does (RFC 3986 unreserved characters kept), so the signature
    and the server's view of the query agree."""
    return quote(value, safe="-_.~")


def _json(value: Any) -> str:
    """``value`` as compact JSON text.

    Raises:
        InvalidInput: a value JSON cannot hold (``field`` ``body``).
    """
    try:
        return json.dumps(to_jsonable_python(value), ensure_ascii=False, separators=(",", ":"))
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise InvalidInput(
            f"the request cannot be sent as JSON: {type(exc).__name__}", field="body"
        ) from None


def _routable(value: Any, field_name: str = "thread_id") -> str:
    """``value`` if the API can address it in a path: ``Memory``'s own rule (``check_routable_id``), so a
    client refuses exactly the ids ``Memory`` refuses, with the same message.

    Raises:
        InvalidInput: not a routable id (``field_name``).
    """
    return check_routable_id(value, field_name)


def _parse(build: Callable[[], T]) -> T:
    """``build()`` over an answer's JSON; a shape the client cannot read raises ``Unavailable`` (never
    pydantic's or a ``KeyError``)."""
    try:
        return build()
    except (ValidationError, KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, MemstackError):
            raise
        raise Unavailable(f"the Memstack API answered an unexpected shape: {type(exc).__name__}") from None


def _message_in(message: object, field_name: str, *, thread_id: str, resource_id: str) -> Any:
    """A message as the API takes it (``MessageIn``: no ``thread_id``/``resource_id``/``seq``).

    A ``thread_id``/``resource_id`` the message carries must be the call's, as ``Memory`` requires
    (``memstack.inputs``); the API's body has no such keys, so a matching one is dropped here.

    Raises:
        InvalidInput: not a string, a mapping or a ``Message``, or of another thread or resource
            (``field_name``), as ``Memory`` refuses it.
    """
    if isinstance(message, str):
        return message
    if isinstance(message, Message):
        _same_envelope(message.model_dump(), field_name, thread_id=thread_id, resource_id=resource_id)
        data = message.model_dump(mode="json", include=set(_MESSAGE_IN_FIELDS))
        if data.get("author") is None:
            data.pop("author", None)
        return data
    if not isinstance(message, Mapping):
        raise InvalidInput(f"{field_name} must be an object or a string", field=field_name)
    _same_envelope(message, field_name, thread_id=thread_id, resource_id=resource_id)
    return to_jsonable_python({k: v for k, v in message.items() if k not in ("thread_id", "resource_id")})


def _same_envelope(data: Mapping[str, Any], field_name: str, *, thread_id: str, resource_id: str) -> None:
    """Refuse a message of another thread or resource with ``Memory``'s words.

    Raises:
        InvalidInput: naming ``<field_name>.thread_id`` or ``.resource_id``.
    """
    for key, expected in (("thread_id", thread_id), ("resource_id", resource_id)):
        if data.get(key) not in (None, expected):
            raise InvalidInput(
                f"{field_name}.{key} does not match the call's {key}", field=f"{field_name}.{key}"
            )


def _tool_call(call: Mapping[str, Any] | ToolCallPart) -> Any:
    """The call as the API takes it: OpenAI's shape, whichever of the three shapes it came in (Bedrock
    ``toolUse`` and Anthropic ``tool_use`` calls are converted here; ``parse_tool_call``)."""
    from memstack.working_memory.tools import to_openai_tool_call

    if isinstance(call, ToolCallPart):
        return to_openai_tool_call(call)
    return to_openai_tool_call(to_jsonable_python(dict(call)))


def _include(item: object, i: int) -> dict[str, Any]:
    """An ``include`` item as the API takes it.

    Raises:
        InvalidInput: neither an ``Include`` nor a mapping (field ``include[i]``), as ``Memory`` refuses it.
    """
    if isinstance(item, Include):
        return {"id": item.id, "before": item.before, "after": item.after}
    if not isinstance(item, Mapping):
        raise InvalidInput("include items are {id, before, after} objects", field=f"include[{i}]")
    return dict(item)


def error_from_response(response: httpx.Response) -> MemstackError:
    """The ``memstack.errors`` exception for an error answer.

    The API's ``{"error": {"code", "message", "field"?}}`` maps by ``code`` through the error table of
    ``memstack.errors`` (the one the server answers from; unknown codes, e.g. ``internal``, to
    ``MemstackError`` with that code); other bodies (API Gateway's ``{"message": ...}``, proxies' HTML) map
    by status (5xx gateway errors → ``Unavailable``). The exception's ``status`` is the HTTP status.
    """
    status = response.status_code
    code: str | None = None
    message = f"HTTP {status}"
    field_name: str | None = None
    try:
        body = response.json()
    except ValueError:
        body = None
    inner = body.get("error") if isinstance(body, dict) else None
    if isinstance(inner, dict) and isinstance(inner.get("code"), str):
        code = inner["code"]
        message = str(inner.get("message") or message)
        field_name = inner.get("field") if isinstance(inner.get("field"), str) else None
        cls = error_class(code, status) or MemstackError
    else:
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            message = f"HTTP {status}: {body['message']}"
        cls = _GATEWAY_ERRORS.get(status) or error_class(status=status) or _fallback(status)
        code = cls.code if cls is not MemstackError else ("internal" if status >= 500 else "http_error")
    exc = cls(message, field=field_name, code=code)
    exc.status = status
    return exc


def _fallback(status: int) -> type[MemstackError]:
    return Unavailable if status >= 500 else MemstackError


@dataclass(frozen=True)
class Call(Generic[T]):
    """One API request and how to read its answer.

    Attributes:
        method: the HTTP method.
        path: the segments after ``/v1`` (each percent-encoded when sent).
        query: query values; ``None`` values are left out, dicts and lists sent as JSON.
        body: the JSON body, or ``None``.
        read: turns the answer's JSON (``None`` for 204) into the result; may raise ``KeyError``,
            ``TypeError``, ``ValueError``, pydantic's ``ValidationError`` on a shape it cannot read.
    """

    method: str
    path: list[str]
    query: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    read: Callable[[Any], T] = field(default=lambda data: data)


class Calls:
    """The API's requests, one per ``Memory`` method (``Call`` objects), shared by ``MemstackClient`` and
    ``AsyncMemstackClient``: each checks what the client can check, says what to send and how to read the
    answer, so the two clients have no request logic of their own and cannot drift."""

    @staticmethod
    def _none(data: Any) -> None:
        return None

    @staticmethod
    def health() -> Call[dict[str, Any]]:
        def read(data: Any) -> dict[str, Any]:
            if not isinstance(data, dict):
                raise Unavailable("the Memstack API answered an unexpected shape: health")
            return data

        return Call("GET", ["health"], read=read)

    @staticmethod
    def create_thread(
        resource_id: str, thread_id: str | None, title: str, metadata: dict[str, Any] | None
    ) -> Call[Thread]:
        if thread_id is not None:
            _routable(thread_id)
        body = {"id": thread_id, "title": title, "metadata": metadata}
        return Call(
            "POST",
            ["threads"],
            {"resource_id": resource_id},
            {k: v for k, v in body.items() if v is not None},
            Thread.model_validate,
        )

    @staticmethod
    def get_thread(resource_id: str, thread_id: str) -> Call[Thread]:
        return Call(
            "GET", ["threads", _routable(thread_id)], {"resource_id": resource_id}, read=Thread.model_validate
        )

    @staticmethod
    def list_threads(
        resource_id: str,
        limit: int,
        cursor: str | None,
        order_by: str,
        direction: str,
        metadata: dict[str, Any] | None,
    ) -> Call[ThreadPage]:
        if metadata is not None:
            check_metadata_filter(metadata)  # Memory's rule: "x" is not an object, not "invalid JSON"
        query = {
            "resource_id": resource_id,
            "limit": limit,
            "cursor": cursor,
            "order_by": order_by,
            "direction": direction,
            "metadata": metadata,
        }
        return Call("GET", ["threads"], query, read=ThreadPage.model_validate)

    @staticmethod
    def update_thread(
        resource_id: str, thread_id: str, title: str | None, metadata: dict[str, Any] | None
    ) -> Call[Thread]:
        body = {k: v for k, v in {"title": title, "metadata": metadata}.items() if v is not None}
        return Call(
            "PATCH",
            ["threads", _routable(thread_id)],
            {"resource_id": resource_id},
            body,
            Thread.model_validate,
        )

    @staticmethod
    def delete_thread(resource_id: str, thread_id: str) -> Call[None]:
        return Call(
            "DELETE", ["threads", _routable(thread_id)], {"resource_id": resource_id}, read=Calls._none
        )

    @staticmethod
    def erase_resource(resource_id: str) -> Call[EraseReceipt]:
        def read(data: Any) -> EraseReceipt:
            return EraseReceipt(
                resource_id=_str(data["resource_id"]),
                counts={k: int(data["counts"][k]) for k in ERASE_COUNT_KEYS},
            )

        return Call("DELETE", ["resources", _routable(resource_id, "resource_id")], read=read)

    @staticmethod
    def clone_thread(
        resource_id: str,
        source_thread_id: str,
        new_thread_id: str | None,
        title: str | None,
        metadata: dict[str, Any] | None,
        message_limit: int | None,
        target_resource_id: str | None = None,
    ) -> Call[CloneResult]:
        if new_thread_id is not None:
            _routable(new_thread_id, "new_thread_id")
        body = {
            "new_thread_id": new_thread_id,
            "target_resource_id": target_resource_id,
            "title": title,
            "metadata": metadata,
            "message_limit": message_limit,
        }

        def read(data: Any) -> CloneResult:
            return CloneResult(
                thread=Thread.model_validate(data["thread"]),
                messages=[Message.model_validate(m) for m in data["messages"]],
                message_id_map=dict(data["message_id_map"]),
            )

        return Call(
            "POST",
            ["threads", _routable(source_thread_id), "clone"],
            {"resource_id": resource_id},
            {k: v for k, v in body.items() if v is not None},
            read,
        )

    @staticmethod
    def save_messages(
        resource_id: str,
        thread_id: str,
        messages: Sequence[Message | Mapping[str, Any] | str],
        expected_last_seq: int | None = None,
    ) -> Call[SavedBatch]:
        batch = as_batch(messages, "messages")
        ids = {"thread_id": thread_id, "resource_id": resource_id}
        body: dict[str, Any] = {
            "messages": [_message_in(m, f"messages[{i}]", **ids) for i, m in enumerate(batch)]
        }
        if expected_last_seq is not None:
            body["expected_last_seq"] = expected_last_seq
        return Call(
            "POST",
            ["threads", _routable(thread_id), "messages"],
            {"resource_id": resource_id},
            body,
            lambda data: SavedBatch(
                (Message.model_validate(m) for m in data["messages"]),
                unindexed=[str(i) for i in data.get("unindexed") or []],
            ),
        )

    @staticmethod
    def list_messages(
        resource_id: str,
        thread_id: str,
        last: int | None,
        limit: int,
        cursor: str | None,
        include: Sequence[Include | Mapping[str, Any]] | None,
    ) -> Call[MessagePage]:
        query = {
            "resource_id": resource_id,
            "last": last,
            "limit": limit,
            "cursor": cursor,
            "include": None
            if include is None
            else [_include(x, i) for i, x in enumerate(as_batch(include, "include"))],
        }
        return Call(
            "GET", ["threads", _routable(thread_id), "messages"], query, read=MessagePage.model_validate
        )

    @staticmethod
    def delete_messages(resource_id: str, message_ids: Sequence[str]) -> Call[int]:
        return Call(
            "POST",
            ["messages", "delete"],
            {"resource_id": resource_id},
            {"message_ids": as_batch(message_ids, "message_ids", empty_ok=False)},
            lambda data: int(data["deleted"]),
        )

    @staticmethod
    def _wm_path(thread_id: str | None) -> list[str]:
        """The route names the thread when the call does; the server's options merged with the call's
        decide the scope, as ``Memory`` does (the client cannot know the server's configured scope)."""
        if thread_id is None:
            return ["working-memory"]
        return ["threads", _routable(thread_id), "working-memory"]

    @staticmethod
    def get_working_memory(
        resource_id: str, thread_id: str | None, options: dict[str, Any] | None
    ) -> Call[str | None]:
        def read(data: Any) -> str | None:
            value = data.get("working_memory")
            return value if isinstance(value, str) else None

        return Call(
            "GET",
            Calls._wm_path(thread_id),
            {"resource_id": resource_id, "options": options},
            read=read,
        )

    @staticmethod
    def update_working_memory(
        resource_id: str,
        thread_id: str | None,
        working_memory: str | dict[str, Any],
        options: dict[str, Any] | None,
    ) -> Call[None]:
        body: dict[str, Any] = {"working_memory": working_memory}
        if options is not None:
            body["options"] = options
        return Call("PUT", Calls._wm_path(thread_id), {"resource_id": resource_id}, body, Calls._none)

    @staticmethod
    def _tool_message(
        route: str,
        resource_id: str,
        thread_id: str,
        tool_call: Mapping[str, Any] | ToolCallPart,
        options: dict[str, Any] | None,
        extra: Mapping[str, Any] | None = None,
        read: Callable[[Any], Message] = lambda data: Message.model_validate(data["message"]),
    ) -> Call[Message]:
        body: dict[str, Any] = {"tool_call": _tool_call(tool_call), **(extra or {})}
        if options is not None:
            body["options"] = options
        return Call(
            "POST",
            ["threads", _routable(thread_id), *route.split("/")],
            {"resource_id": resource_id},
            body,
            read,
        )

    @staticmethod
    def apply_tool_call(
        resource_id: str,
        thread_id: str,
        tool_call: Mapping[str, Any] | ToolCallPart,
        options: dict[str, Any] | None,
        context: RemoteContext | None = None,
        working_memory_version: str | None = None,
    ) -> Call[Message]:
        seen = working_memory_version or (context.working_memory_version if context is not None else None)

        def read(data: Any) -> Message:
            now_seen = data.get("working_memory_version")
            if context is not None and isinstance(now_seen, str):
                context.versions["working_memory"] = now_seen  # the model's redo in this turn goes through
            return Message.model_validate(data["message"])

        extra = {"working_memory_version": seen} if seen is not None else None
        return Calls._tool_message(
            "working-memory/tool-calls", resource_id, thread_id, tool_call, options, extra, read
        )

    @staticmethod
    def apply_recall_tool(
        resource_id: str,
        thread_id: str,
        tool_call: Mapping[str, Any] | ToolCallPart,
        options: dict[str, Any] | None,
    ) -> Call[Message]:
        return Calls._tool_message("recall-tool", resource_id, thread_id, tool_call, options)

    @staticmethod
    def get_observations(resource_id: str, thread_id: str) -> Call[RemoteObservations | None]:
        def read(data: Any) -> RemoteObservations | None:
            record = data["record"]
            return None if record is None else RemoteObservations.from_json(record)

        return Call(
            "GET", ["threads", _routable(thread_id), "observations"], {"resource_id": resource_id}, read=read
        )

    @staticmethod
    def recall(
        resource_id: str, thread_id: str, query: str, options: dict[str, Any] | None
    ) -> Call[RecallResult]:
        body: dict[str, Any] = {"query": query}
        if options is not None:
            body["options"] = options

        def read(data: Any) -> RecallResult:
            return RecallResult(
                hits=[
                    FusedHit(
                        message_id=str(h["message_id"]),
                        thread_id=str(h["thread_id"]),
                        score=float(h["score"]),
                        vector_rank=h.get("vector_rank"),
                        keyword_rank=h.get("keyword_rank"),
                        seq=int(h.get("seq") or 0),
                        vector_score=_opt_float(h.get("vector_score")),
                        keyword_score=_opt_float(h.get("keyword_score")),
                    )
                    for h in data["hits"]
                ],
                messages=[Message.model_validate(m) for m in data["messages"]],
            )

        return Call(
            "POST", ["threads", _routable(thread_id), "recall"], {"resource_id": resource_id}, body, read
        )

    @staticmethod
    def context(
        resource_id: str,
        thread_id: str,
        message: Message | Mapping[str, Any] | str | None,
        instructions: str | Sequence[str] | None,
        context: Sequence[Message | Mapping[str, Any] | str] | None,
        options: dict[str, Any] | None,
        count_tokens: bool = False,
    ) -> Call[RemoteContext]:
        body = _turn_body(resource_id, thread_id, message, instructions, context, options)
        if count_tokens:
            body["count_tokens"] = True

        def read(data: Any) -> RemoteContext:
            return RemoteContext(
                system=[SystemMessage(text=s["text"], kind=s["kind"]) for s in data["system"]],
                messages=[Message.model_validate(m) for m in data["conversation"]],
                tools=list(data.get("tools") or []),
                token_count=None if data.get("token_count") is None else int(data["token_count"]),
                history_ids=list(data.get("history_ids") or []),
                recalled_ids=list(data.get("recalled_ids") or []),
                openai_messages=list(data["messages"]),
                last_seq=int(data.get("last_seq") or 0),
                versions=(
                    {"working_memory": data["working_memory_version"]}
                    if isinstance(data.get("working_memory_version"), str)
                    else {}
                ),
            )

        return Call(
            "POST", ["threads", _routable(thread_id), "context"], {"resource_id": resource_id}, body, read
        )

    @staticmethod
    def inspect_context(
        resource_id: str,
        thread_id: str,
        message: Message | Mapping[str, Any] | str | None,
        instructions: str | Sequence[str] | None,
        context: Sequence[Message | Mapping[str, Any] | str] | None,
        options: dict[str, Any] | None,
    ) -> Call[ContextInspection]:
        body = _turn_body(resource_id, thread_id, message, instructions, context, options)

        def read(data: Any) -> ContextInspection:
            return ContextInspection(
                layers=[
                    LayerTokens(x["layer"], x["role"], int(x["messages"]), int(x["tokens"]), int(x["tools"]))
                    for x in data["layers"]
                ],
                token_count=int(data["token_count"]),
                system=[SystemMessage(text=s["text"], kind=s["kind"]) for s in data["system"]],
                messages=[Message.model_validate(m) for m in data["conversation"]],
                history_ids=list(data["history_ids"]),
                recalled_ids=list(data["recalled_ids"]),
                requests={name: dict(data[name]) for name in ("openai", "bedrock", "anthropic")},
            )

        return Call(
            "POST", ["threads", _routable(thread_id), "inspect"], {"resource_id": resource_id}, body, read
        )

    @staticmethod
    def index_health(resource_id: str, limit: int) -> Call[IndexHealth]:
        def read(data: Any) -> IndexHealth:
            counts = ("threads", "messages", "indexed", "not_indexed", "stale", "unsearchable")
            return IndexHealth(
                resource_id=_str(data["resource_id"]),
                embedding_model=_str(data["embedding_model"]),
                dimension=int(data["dimension"]),
                complete=bool(data["complete"]),
                samples=[
                    IndexSample(_str(x["thread_id"]), _str(x["message_id"]), int(x["seq"]), x["state"])
                    for x in data["samples"]
                ],
                **{name: int(data[name]) for name in counts},
            )

        return Call("GET", ["index-health"], {"resource_id": resource_id, "limit": limit}, read=read)


def _turn_body(
    resource_id: str,
    thread_id: str,
    message: Message | Mapping[str, Any] | str | None,
    instructions: str | Sequence[str] | None,
    context: Sequence[Message | Mapping[str, Any] | str] | None,
    options: dict[str, Any] | None,
) -> dict[str, Any]:
    """The body of the context and inspect routes: the turn's fields that were given, shaped by the rules
    ``Memory.context`` applies (``as_texts``, ``as_context_messages``), so a string is never split.

    Raises:
        InvalidInput, PayloadTooLarge: as ``Memory.context`` raises them for these fields.
    """
    body: dict[str, Any] = {}
    ids = {"thread_id": thread_id, "resource_id": resource_id}
    if message is not None:
        body["message"] = _message_in(message, "message", **ids)
    if instructions is not None:
        body["instructions"] = as_texts(instructions, "instructions")
    extra = as_context_messages(context)
    if extra is not None:
        body["context"] = [_message_in(m, f"context[{i}]", **ids) for i, m in enumerate(extra)]
    if options is not None:
        body["options"] = options
    return body


def _auth(base_url: str, sigv4: bool | Mapping[str, Any]) -> httpx.Auth | None:
    """The SigV4 signer the ``sigv4`` argument asks for (see ``MemstackClient``), or ``None``."""
    if not sigv4:
        return None
    options = dict(sigv4) if isinstance(sigv4, Mapping) else {}
    options.setdefault("url", base_url)
    return SigV4Auth(**options)


def _resource(given: str | None, default: str | None) -> str:
    rid = given if given is not None else default
    if not rid:
        raise InvalidInput(
            "resource_id is required (per call or as the client's default)", field="resource_id"
        )
    return rid


@contextmanager
def _transport_errors(method: str = "", url: str = "") -> Iterator[None]:
    """httpx's failures to get an answer as ``memstack.errors``: an invalid URL → ``InvalidInput`` (field
    ``base_url``); transport errors, timeouts, decoding and redirect errors → ``Unavailable``. The message
    names the request (``method`` and ``url`` without its query string, which holds the resource id) and
    the cause, e.g. ``ConnectError: [Errno 111] Connection refused``."""
    where = f" ({method} {url.partition('?')[0]})" if url else ""
    try:
        yield
    except httpx.InvalidURL as exc:
        raise InvalidInput(f"the request URL is invalid{where}: {exc}", field="base_url") from None
    except (httpx.HTTPError, httpx.StreamError) as exc:
        cause = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise Unavailable(f"the Memstack API did not answer{where}: {cause}") from exc


def _wire_request(base_url: str, call: Call[Any]) -> tuple[str, str, bytes | None, dict[str, str] | None]:
    """``(method, url, content, headers)`` of ``call``: path segments percent-encoded (thread ids were
    checked by the builder with ``_routable``); query values that are ``None`` left out, others sent as
    given (strings) or as JSON (dicts and lists); the body as compact JSON.

    Raises:
        InvalidInput: a value JSON cannot hold (field ``body``).
    """
    url = base_url + "/v1/" + "/".join(_q(p) for p in call.path)
    params = []
    for name, value in call.query.items():
        if value is None:
            continue
        text = (
            value
            if isinstance(value, str)
            else _json(value)
            if isinstance(value, dict | list)
            else str(value)
        )
        params.append(f"{_q(name)}={_q(text)}")
    if params:
        url += "?" + "&".join(params)
    content = None if call.body is None else _json(call.body).encode("utf-8")
    headers = {"Content-Type": "application/json"} if content is not None else None
    return call.method, url, content, headers


def _wire_answer(response: httpx.Response, call: Call[T]) -> T:
    """``call``'s result from the API's answer.

    Raises:
        MemstackError: an error answer, mapped (``error_from_response``). Unavailable: an answer that is not
            JSON or of a shape ``call.read`` cannot read.
    """
    if response.status_code >= 400:
        raise error_from_response(response)
    data: Any = None
    if response.status_code != 204 and response.content:
        try:
            data = response.json()
        except ValueError as exc:
            raise Unavailable(f"the Memstack API answered {response.status_code} without JSON") from exc
    return _parse(lambda: call.read(data))


class MemstackClient:
    """A Memstack API over HTTP with the methods of ``Memory`` (thread-safe; one connection pool).

    Args:
        base_url: the API's root, without ``/v1``: ``http://127.0.0.1:8765`` (``memstack serve``) or the
            stage URL ``https://<id>.execute-api.<region>.amazonaws.com/<stage>``.
        resource_id: the default resource of every call (each method's ``resource_id`` overrides it).
        timeout: seconds per request, or an ``httpx.Timeout``.
        sigv4: ``True`` signs every request with SigV4 for ``execute-api`` (botocore's credential chain and
            region; the region is also read from an execute-api URL); a dict passes ``SigV4Auth``'s
            arguments (``region``, ``profile``, ``credentials``, ``service``); ``False`` does not sign.
        headers: headers sent with every request (e.g. ``Authorization: Bearer <jwt>`` in JWT mode).
        transport: an httpx transport (tests: ``httpx.MockTransport``).

    Raises:
        InvalidInput: ``sigv4`` asked for and no credentials or region found.
    """

    def __init__(
        self,
        base_url: str,
        *,
        resource_id: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        sigv4: bool | Mapping[str, Any] = False,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.resource_id = resource_id
        self._http = httpx.Client(
            timeout=timeout, headers=dict(headers or {}), transport=transport, auth=_auth(base_url, sigv4)
        )

    # plumbing ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> MemstackClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rid(self, resource_id: str | None) -> str:
        return _resource(resource_id, self.resource_id)

    def _run(self, call: Call[T]) -> T:
        """Send ``call`` and read its answer.

        Raises:
            MemstackError: the API's error, mapped (``error_from_response``). Unavailable: no answer, or an
                answer of a shape the client cannot read. InvalidInput: the URL is invalid.
        """
        method, url, content, headers = _wire_request(self.base_url, call)
        with _transport_errors(method, url):
            response = self._http.request(method, url, content=content, headers=headers)
        return _wire_answer(response, call)

    # health --------------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """``{"status": "ok", "version": ...}`` (no store access on the server)."""
        return self._run(Calls.health())

    # threads -------------------------------------------------------------------------------------

    def create_thread(
        self,
        *,
        resource_id: str | None = None,
        thread_id: str | None = None,
        title: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> Thread:
        """Create a thread (``Memory.create_thread``).

        Raises:
            InvalidInput, Conflict: as ``Memory.create_thread``.
        """
        return self._run(Calls.create_thread(self._rid(resource_id), thread_id, title, metadata))

    def get_thread(self, *, thread_id: str, resource_id: str | None = None) -> Thread:
        """The thread (``Memory.get_thread``).

        Raises:
            NotFound: missing or another resource's.
        """
        return self._run(Calls.get_thread(self._rid(resource_id), thread_id))

    def list_threads(
        self,
        *,
        resource_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        order_by: str = "created_at",
        direction: str = "desc",
        metadata: dict[str, Any] | None = None,
    ) -> ThreadPage:
        """A page of the resource's threads (``Memory.list_threads``); pass ``next_cursor`` back.

        Raises:
            InvalidInput: bad paging or filter.
        """
        return self._run(
            Calls.list_threads(self._rid(resource_id), limit, cursor, order_by, direction, metadata)
        )

    def update_thread(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Thread:
        """Partial update; metadata merges (``Memory.update_thread``).

        Raises:
            NotFound, InvalidInput, PayloadTooLarge: as ``Memory.update_thread``.
        """
        return self._run(Calls.update_thread(self._rid(resource_id), thread_id, title, metadata))

    def delete_thread(self, *, thread_id: str, resource_id: str | None = None) -> None:
        """Delete the thread and its messages (``Memory.delete_thread``).

        Raises:
            NotFound: missing or another resource's.
        """
        self._run(Calls.delete_thread(self._rid(resource_id), thread_id))

    def erase_resource(self, *, resource_id: str | None = None) -> EraseReceipt:
        """Erase everything the resource owns (``Memory.erase_resource``; ``DELETE /v1/resources/{id}``).
        Idempotent: a second call returns zero counts.

        Raises:
            InvalidInput: an id the API cannot route or refuses. Forbidden: JWT mode and the token is
                another resource's. Unavailable: a backend failed midway (call again to finish).
        """
        return self._run(Calls.erase_resource(self._rid(resource_id)))

    def clone_thread(
        self,
        *,
        source_thread_id: str,
        resource_id: str | None = None,
        new_thread_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        message_limit: int | None = None,
        target_resource_id: str | None = None,
    ) -> CloneResult:
        """Copy a thread and its messages (``Memory.clone_thread``), into this resource or into
        ``target_resource_id`` (the caller must be allowed both).

        Raises:
            NotFound: the source is missing or another resource's. Conflict: ``new_thread_id`` exists.
            Forbidden: the caller may not act for ``target_resource_id``.
        """
        return self._run(
            Calls.clone_thread(
                self._rid(resource_id),
                source_thread_id,
                new_thread_id,
                title,
                metadata,
                message_limit,
                target_resource_id,
            )
        )

    # messages ------------------------------------------------------------------------------------

    def save_messages(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        messages: Sequence[Message | Mapping[str, Any] | str],
        expected_last_seq: int | None = None,
    ) -> SavedBatch:
        """Save a batch in order (``Memory.save_messages``); returns the saved messages with ``seq`` and the
        ids stored but not searchable yet (``SavedBatch.unindexed``).
        ``expected_last_seq`` (``RemoteContext.last_seq``) refuses it if the thread moved on since.

        Raises:
            InvalidInput, NotFound, Conflict, PayloadTooLarge, Unavailable: as ``Memory.save_messages``.
        """
        return self._run(Calls.save_messages(self._rid(resource_id), thread_id, messages, expected_last_seq))

    def list_messages(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        last: int | None = None,
        limit: int = 40,
        cursor: str | None = None,
        include: Sequence[Include | Mapping[str, Any]] | None = None,
    ) -> MessagePage:
        """Messages of a thread in order (``Memory.list_messages``).

        Raises:
            NotFound: the thread is missing or another resource's. InvalidInput: bad arguments.
        """
        return self._run(Calls.list_messages(self._rid(resource_id), thread_id, last, limit, cursor, include))

    def delete_messages(self, *, resource_id: str | None = None, message_ids: Sequence[str]) -> int:
        """Delete messages by id; returns how many existed for this resource (``Memory.delete_messages``).

        Raises:
            InvalidInput: an empty list or bad ids. PayloadTooLarge: over 1000 ids.
        """
        return self._run(Calls.delete_messages(self._rid(resource_id), message_ids))

    # working memory ------------------------------------------------------------------------------

    def get_working_memory(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> str | None:
        """The stored working memory, or ``None`` if never written or working memory is off
        (``Memory.get_working_memory``).

        The server's configured options merged with ``options`` decide whether working memory is on and
        its scope, as they do for ``Memory``: ``thread_id`` is sent in the route, and in resource scope the
        resource's document is read whatever the thread.

        Raises:
            InvalidInput: thread scope without ``thread_id``.
            NotFound: thread scope and the thread is missing or another resource's.
        """
        return self._run(Calls.get_working_memory(self._rid(resource_id), thread_id, options))

    def update_working_memory(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        working_memory: str | dict[str, Any],
        options: dict[str, Any] | None = None,
    ) -> None:
        """Replace (markdown) or merge (schema) working memory (``Memory.update_working_memory``); on/off and
        scope as in ``get_working_memory``.

        Raises:
            InvalidInput: working memory is off (field ``working_memory``), thread scope without
                ``thread_id``; and as ``Memory.update_working_memory``.
            Forbidden, PayloadTooLarge, NotFound, Conflict: as ``Memory.update_working_memory``.
        """
        self._run(Calls.update_working_memory(self._rid(resource_id), thread_id, working_memory, options))

    def apply_tool_call(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        tool_call: Mapping[str, Any] | ToolCallPart,
        options: dict[str, Any] | None = None,
        context: RemoteContext | None = None,
        working_memory_version: str | None = None,
    ) -> Message:
        """Run the model's ``updateWorkingMemory`` call (``Memory.apply_tool_call``): pass the turn's
        ``context`` (or its ``working_memory_version``) so that an update made from a document that has
        since moved on is refused with the current one; ``context`` then records what the model has seen.

        Args:
            tool_call: an OpenAI tool call ``{"id", "type": "function", "function": {"name", "arguments"}}``
                (the SDK's object: ``call.model_dump()``), a Bedrock ``toolUse`` or Anthropic ``tool_use``
                block, or a ``ToolCallPart``.

        Returns:
            The ``tool`` message to send back (not saved); ``memstack.context.tool_messages(message)``
            renders it for chat completions.

        Raises:
            InvalidInput, NotFound, Conflict: as ``Memory.apply_tool_call``.
        """
        return self._run(
            Calls.apply_tool_call(
                self._rid(resource_id), thread_id, tool_call, options, context, working_memory_version
            )
        )

    # observational memory ------------------------------------------------------------------------

    def get_observations(
        self, *, thread_id: str, resource_id: str | None = None
    ) -> RemoteObservations | None:
        """The observation record that serves the thread (``Memory.get_observation_record``, summed up),
        or ``None`` when nothing has been observed or buffered for it yet.

        Raises:
            NotFound: the thread is missing or another resource's.
        """
        return self._run(Calls.get_observations(self._rid(resource_id), thread_id))

    def apply_recall_tool(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        tool_call: Mapping[str, Any] | ToolCallPart,
        options: dict[str, Any] | None = None,
    ) -> Message:
        """Run the model's ``recall`` call (``Memory.apply_recall_tool``: the messages behind an observation
        group, when ``observational_memory.retrieval`` is on).

        Args:
            tool_call: the call in any shape ``apply_tool_call`` takes, named ``recall``.
            options: the options the context was assembled with (they must enable retrieval).

        Returns:
            The ``tool`` message to send back (not saved); the model's own mistakes (bad arguments, an
            unknown cursor) are an error result in it, not an exception.

        Raises:
            InvalidInput: not a ``recall`` call, malformed, or retrieval not enabled.
            PayloadTooLarge: the arguments are too large.
        """
        return self._run(Calls.apply_recall_tool(self._rid(resource_id), thread_id, tool_call, options))

    # context -------------------------------------------------------------------------------------

    def recall(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        query: str,
        options: dict[str, Any] | None = None,
    ) -> RecallResult:
        """Semantic recall alone (``Memory.recall``): hits (best first) and their neighbour windows.

        Raises:
            InvalidInput: bad arguments. Unavailable: embedder or index failed.
        """
        return self._run(Calls.recall(self._rid(resource_id), thread_id, query, options))

    def context(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        message: Message | Mapping[str, Any] | str | None = None,
        instructions: str | Sequence[str] | None = None,
        context: Sequence[Message | Mapping[str, Any] | str] | None = None,
        options: dict[str, Any] | None = None,
        count_tokens: bool = False,
    ) -> RemoteContext:
        """Assemble what the model sees for a turn (``Memory.context``); nothing is saved.

        Args:
            count_tokens: have the server count ``token_count`` (it loads its tokenizer once per process).

        Returns:
            A ``RemoteContext``: ``.to_openai()`` → ``{"messages", "tools"}`` for chat completions,
            ``.to_bedrock()``, ``.to_anthropic()``; ``.messages``, ``.system``, ``.tools``, ``.token_count``
            as on ``ModelContext``.

        Raises:
            InvalidInput: bad input (another resource's thread id reads as an empty new thread).
        """
        return self._run(
            Calls.context(
                self._rid(resource_id), thread_id, message, instructions, context, options, count_tokens
            )
        )

    def inspect_context(
        self,
        *,
        thread_id: str,
        resource_id: str | None = None,
        message: Message | Mapping[str, Any] | str | None = None,
        instructions: str | Sequence[str] | None = None,
        context: Sequence[Message | Mapping[str, Any] | str] | None = None,
        options: dict[str, Any] | None = None,
    ) -> ContextInspection:
        """What the model sees for a turn, explained: the arguments of ``context``; nothing is saved.

        Returns:
            A ``ContextInspection``: the layers in order with their tokens, the total, and the exact
            OpenAI, Bedrock Converse and Anthropic request bodies (``requests``).

        Raises:
            InvalidInput: bad input.
        """
        return self._run(
            Calls.inspect_context(self._rid(resource_id), thread_id, message, instructions, context, options)
        )

    def index_health(self, *, resource_id: str | None = None, limit: int = 10_000) -> IndexHealth:
        """How the resource's search index matches its first ``limit`` messages (``Memory.index_health``).

        Raises:
            InvalidInput: ``limit`` outside 1..100,000.
        """
        return self._run(Calls.index_health(self._rid(resource_id), limit))
