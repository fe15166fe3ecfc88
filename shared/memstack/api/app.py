"""The resolver: Powertools ``APIGatewayRestResolver`` (routing, ``Response``, exception handlers, the
middleware) with the route modules' ``Router``s included (``ROUTE_SETS``), each route's request validated by
its own pydantic models (``memstack.api.validation``), the error mapping, the body size limit and the auth
check — shared by the Lambda functions and ``memstack serve``.

Request pipeline (``MemstackResolver.resolve``), in order:

1. the body size limit (``max_body_bytes``, checked on the raw event, before anything is parsed) → 413;
2. a body that is not JSON by its ``Content-Type`` (media types compared case-insensitively) → 415;
3. ``resource_id`` given more than once → 400; the auth check of a non-empty ``resource_id``
   (``AuthConfig``; not on ``/v1/health``) → 403 (a missing or empty one is left to step 5: 400);
4. route matching: no route for the path → 404; a route for the path but not the method → 405 with
   ``Allow``; then the query's names against the route's declared parameters: an unknown or a repeated
   single-valued parameter → 400 naming it (``_check_query``, one place for every route but health);
5. request validation by the route's models (``memstack.api.validation``: → 400 naming the field); the
   route — one ``Memory`` call — and its answer checked and written as JSON, inside a span ``api.<route>``
   (``memstack.observability.use_case``), then one access-log line;
6. any error → ``memstack.api.errors`` (the one place that maps errors to HTTP).
"""

from __future__ import annotations

import base64
import importlib
import json
import logging
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

import pydantic_core
from aws_lambda_powertools.event_handler.api_gateway import APIGatewayRestResolver, Response, ResponseBuilder
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
    ResponseValidationError,
)
from aws_lambda_powertools.shared.json_encoder import Encoder

from memstack import deadline
from memstack.api import errors
from memstack.api.auth import AuthConfig, auth_from_env
from memstack.api.deps import API_PREFIX, HEALTH_PATH, MemoryProvider, ServerMisconfigured, serving
from memstack.api.validation import RoutePlan, route_plan
from memstack.errors import InvalidInput, MemstackError, NotFound, PayloadTooLarge, UnsupportedMediaType
from memstack.observability import use_case

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
    from aws_lambda_powertools.event_handler.router import APIGatewayRouter
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from memstack.memory import Memory

__all__ = [
    "API_PREFIX",
    "HEALTH_PATH",
    "MAX_BODY_BYTES",
    "ROUTE_SETS",
    "MemoryProvider",
    "MemstackResolver",
    "RouteSet",
    "ServerMisconfigured",
    "create_app",
    "route_routers",
    "served_routes",
]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body the API reads, in bytes (4 MiB): under Lambda's 6 MB synchronous payload limit even
when API Gateway base64-encodes the body (×4/3). Larger bodies are refused with 413 before parsing."""

RouteSet = Literal["all", "context"]
"""Which routes a resolver serves: ``all``, or ``context`` (the hot path on a function of its own)."""

ROUTE_SETS: dict[RouteSet, tuple[str, ...]] = {
    "all": (
        "health",
        "context",
        "recall",
        "threads",
        "messages",
        "working_memory",
        "observations",
        "resources",
        "inspect",
    ),
    "context": ("context",),
}
"""The route modules (of ``memstack.api.routes``) whose routers each route set includes, in order (the
OpenAPI document lists paths in this order); a resolver imports only its own set's modules, so the
``context`` function never imports the other routes' code. The ``context`` set is what API Gateway sends to
the ``context`` function: infra/api.py builds those methods from ``served_routes("context")``."""


def route_routers(routes: RouteSet) -> list[APIGatewayRouter]:
    """The routers of a route set (``ROUTE_SETS``), their modules imported now.

    Raises:
        KeyError: ``routes`` is not a route set.
    """
    return [importlib.import_module(f"memstack.api.routes.{name}").router for name in ROUTE_SETS[routes]]


class MemstackResolver(APIGatewayRestResolver):
    """``APIGatewayRestResolver`` with Memstack's pre-checks (size, media type, auth) and validation by the
    routes' own models (``memstack.api.validation``; Powertools' OpenAPI validation stays off).

    Build it with ``create_app``; call ``resolve(event, context)`` with an API Gateway REST proxy event.
    """

    def __init__(
        self,
        memory: MemoryProvider,
        auth: Callable[[], AuthConfig],
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        super().__init__(
            # off: each route's models validate its requests (``_request_scope``), without Powertools'
            # OpenAPI validation middleware and the field machinery it imports and builds per parameter
            enable_validation=False,
            serializer=dump_json_text,
            json_body_deserializer=load_json_body,
            # never Powertools' debug mode (POWERTOOLS_DEV or POWERTOOLS_EVENT_HANDLER_DEBUG): it prints
            # every event to stdout, with its resource id and message text (STYLE.md "Observability")
            debug=False,
        )
        self._memory_provider = memory
        self._auth_provider = auth
        self.max_body_bytes = max_body_bytes
        self._event: Any = None
        # what the pre-check derives from the registered routes alone, built once per route table
        # (``_route_table``) instead of on every request
        self._table: tuple[tuple[int, int], list[Any], dict[int, RoutePlan]] | None = None

    # Powertools keeps the event being resolved on the ``BaseRouter`` class, shared by every resolver of
    # the process; ``memstack serve`` resolves concurrent requests on several resolvers, so each keeps its
    # own (set where Powertools converts the event, read wherever Powertools or a handler asks for it).
    @property
    def current_event(self) -> Any:
        """The event being resolved by this resolver (``APIGatewayProxyEvent``)."""
        return self._event

    @current_event.setter
    def current_event(self, value: Any) -> None:
        self._event = value

    def _to_proxy_event(self, event: dict[str, Any]) -> Any:
        proxy = super()._to_proxy_event(event)
        self._event = proxy
        return proxy

    def resolve(self, event: Mapping[str, Any], context: LambdaContext | None) -> dict[str, Any]:
        """The API Gateway proxy response for ``event`` (``statusCode``, ``multiValueHeaders``, ``body``,
        ``isBase64Encoded``). Never raises: every error becomes an error response."""
        event = _decoded_path(event)
        try:
            rejected = self._precheck(event)
        except Exception as exc:
            rejected = errors.internal_error(exc)
        if rejected is not None:
            builder: ResponseBuilder[Any] = ResponseBuilder(rejected, serializer=self._serializer)
            return builder.build(self._to_proxy_event(dict(event)), self._cors)
        with serving(self._memory_provider, self.authorize):
            return super().resolve(_json_content_type(event), context)  # type: ignore[arg-type]

    def routes(self) -> list[tuple[str, str]]:
        """The ``(method, path)`` pairs this resolver serves, paths in OpenAPI form
        (``/v1/threads/{thread_id}/context``), sorted."""
        return sorted((r.method, r.openapi_path) for r in self._routes())

    def _precheck(self, event: Mapping[str, Any]) -> Response[Any] | None:
        try:
            _check_body(event, self.max_body_bytes)
            _check_text_of_request(event)
            path = str(event.get("path") or "/")
            health = path.rstrip("/") == HEALTH_PATH  # liveness: no resource, no auth, any query
            resource_id = None if health else _single_query_value(event, "resource_id")
            if resource_id is not None:  # a missing or empty one: validation answers 400 (required)
                self._auth().authorize(event, resource_id)
            method = str(event.get("httpMethod") or "").upper()
            routes, plans = self._route_table()
            # the method first: a path is matched against the routes of this method only, and against
            # every route only to answer 405 (a regular expression per route, on every request)
            route = next((r for r in routes if r.method == method and r.rule.match(path)), None)
            if route is None:
                allowed = sorted({r.method for r in routes if r.rule.match(path)})
                if allowed:
                    return errors.method_not_allowed(method, allowed)
                return None  # no route: Powertools answers 404 through the NotFoundError handler
            if not health:
                _check_query(event, plans[id(route)].query_names)
        except MemstackError as exc:
            return errors.from_memstack_error(exc)
        return None

    def authorize(self, resource_id: str) -> None:
        """Check that the caller of the current request may act for ``resource_id``: the pre-check does it
        for a ``resource_id`` in the query; a route that takes the resource from its path calls this.

        Raises:
            Forbidden: ``jwt`` mode and the token's claim is missing or names another resource.
            ServerMisconfigured: the auth settings are invalid.
        """
        self._auth().authorize(self.current_event.raw_event, resource_id)

    def _auth(self) -> AuthConfig:
        try:
            return self._auth_provider()
        except MemstackError as exc:
            raise ServerMisconfigured(type(exc).__name__) from exc

    def _route_table(self) -> tuple[list[Any], dict[int, RoutePlan]]:
        """The registered routes and each one's plan (``memstack.api.validation.route_plan``: its declared
        query parameters, its models), keyed by ``id(route)``; rebuilt only when a route was registered
        since the last request."""
        static, dynamic = getattr(self, "_static_routes", []), getattr(self, "_dynamic_routes", [])
        counts = (len(static), len(dynamic))
        table = self._table
        if table is None or table[0] != counts:
            routes = self._routes()
            table = self._table = (
                counts,
                routes,
                {id(r): route_plan(r.func, r.openapi_path) for r in routes},
            )
        return table[1], table[2]

    def plan_of(self, route: Any) -> RoutePlan | None:
        """The plan of a registered route; ``None`` for Powertools' own (the not-found route)."""
        return self._route_table()[1].get(id(route))

    def _routes(self) -> list[Any]:
        """The registered Powertools routes (``Route``: ``method``, compiled ``rule``, ``func``), as
        Powertools' own ``_resolve`` walks them."""
        return list(getattr(self, "_static_routes", [])) + list(getattr(self, "_dynamic_routes", []))


def _decoded_path(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """``event`` with its ``path`` percent-decoded, so the routes match ids as they were given.

    A REST proxy event's ``path`` is not documented as decoded or encoded, and integrations differ
    (``memstack serve`` hands it decoded, ``memstack.api.http.to_event``); routable ids hold no ``%``
    (``memstack.model.ROUTABLE_SPECIALS``), so decoding once more is right for both forms and never changes
    a path that was decoded already.
    """
    path = event.get("path")
    if not isinstance(path, str) or "%" not in path:
        return event
    return {**event, "path": unquote(path, errors="surrogateescape")}


def _check_query(event: Mapping[str, Any], declared: Mapping[str, bool]) -> None:
    """Refuse query parameters the route does not declare, and repeated single-valued ones.

    Raises:
        InvalidInput: naming the first such parameter (in the order given).
    """
    multi = event.get("multiValueQueryStringParameters") or {}
    single = event.get("queryStringParameters") or {}
    names: Iterable[str] = list(dict.fromkeys([*multi, *single]))
    for name in names:
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise InvalidInput(f"unknown query parameter {name!r} (this route takes: {known})", field=name)
        values = multi.get(name)
        if not declared[name] and isinstance(values, list) and len(values) > 1:
            raise InvalidInput(f"{name} must be given once", field=name)


_POWERTOOLS_JSON = partial(json.dumps, separators=(",", ":"), cls=Encoder)
"""Powertools' default response serializer (``ApiGatewayResolver``): compact, ASCII-only JSON text."""


def dump_json_text(value: Any) -> str:
    """A response body that is not text yet (an error document, a route without a return type) as JSON
    text: Powertools' serializer. A route's declared answer is written by its model instead, in the same
    spelling (``memstack.api.validation.RoutePlan.serialise``).

    The text of Powertools' default (``_POWERTOOLS_JSON``: compact, non-ASCII escaped), written by
    pydantic-core's encoder, which took half the time on a context response (65 µs instead of 132 µs for
    13 KB, ``benchmarks/serve_profile.py``). JSON-equal, and byte-equal but for the spelling of floats
    with an exponent (``1e-5`` for ``1e-05``). A value it cannot encode (not JSON data, a model or a
    dataclass) goes to Powertools' own serializer, which encodes it or raises ``TypeError`` as before.
    """
    try:
        return pydantic_core.to_json(value, ensure_ascii=True).decode("ascii")
    except pydantic_core.PydanticSerializationError:
        return _POWERTOOLS_JSON(value)


def load_json_body(text: str) -> Any:
    """The request body parsed as JSON: Powertools' body deserializer.

    Syntax errors stay ``json.JSONDecodeError`` (Powertools answers them 400 ``body``); a body the parser
    cannot hold — nested deeper than Python's recursion limit, or an integer of more than 4,300 digits
    (CPython's int-conversion limit, CVE-2020-10735) — is refused the same way instead of failing the
    request with 500.

    Raises:
        json.JSONDecodeError: not JSON. InvalidInput: too deeply nested, or an integer too long (field
            ``body``).
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise InvalidInput("the request body is nested too deeply", field="body") from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise InvalidInput(
            "the request body holds an integer with more digits than the limit of "
            f"{sys.get_int_max_str_digits()}",
            field="body",
        ) from None


def _check_text_of_request(event: Mapping[str, Any]) -> None:
    """Refuse a path or query that is not UTF-8 text: bytes that did not decode arrive as lone surrogates
    (``memstack.api.http`` decodes with ``surrogateescape``), so no two byte strings alias one id.

    Raises:
        InvalidInput: naming the query parameter (or ``path``).
    """
    if not _is_text(event.get("path")):
        raise InvalidInput("the request path is not UTF-8", field="path")
    multi = event.get("multiValueQueryStringParameters") or {}
    single = event.get("queryStringParameters") or {}
    for name, values in [*multi.items(), *((k, [v]) for k, v in single.items())]:
        if not _is_text(name) or not all(_is_text(v) for v in values or ()):
            raise InvalidInput(f"query parameter {_shown(name)} is not UTF-8 text", field=_shown(name))


def _is_text(value: object) -> bool:
    if not isinstance(value, str):
        return value is None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(name: object) -> str:
    return str(name).encode("utf-8", "backslashreplace").decode("utf-8")


def _json_content_type(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """``event`` with a JSON ``Content-Type`` spelt ``application/json``: media types are case-insensitive
    (RFC 9110) and ``+json`` types are JSON, but Powertools compares the header case-sensitively with
    ``application/json`` before parsing the body."""
    renamed: dict[str, Any] = {}
    for key in ("headers", "multiValueHeaders"):
        headers = event.get(key)
        if not isinstance(headers, Mapping):
            continue
        for name, value in headers.items():
            if str(name).lower() != "content-type":
                continue
            raw = value[-1] if isinstance(value, list) and value else value
            if not isinstance(raw, str) or raw.startswith("application/json") or not _is_json(raw):
                continue
            fixed = "application/json"
            renamed[key] = {**headers, name: [fixed] if isinstance(value, list) else fixed}
    return {**event, **renamed} if renamed else event


def _media(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()


def _is_json(content_type: str) -> bool:
    media = _media(content_type)
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _check_body(event: Mapping[str, Any], limit: int) -> None:
    body = event.get("body")
    if not body:
        return
    if event.get("isBase64Encoded"):
        text = body if isinstance(body, str) else str(body)
        size = len(text) * 3 // 4 - text[-2:].count("=")
    else:
        size = len(body.encode("utf-8", "surrogatepass")) if isinstance(body, str) else len(body)
    if size > limit:
        raise PayloadTooLarge(f"the request body is larger than the limit of {limit} bytes", field="body")
    if event.get("isBase64Encoded"):
        try:
            base64.b64decode(body, validate=True).decode("utf-8")
        except (ValueError, TypeError):  # binascii.Error and UnicodeDecodeError are ValueErrors
            raise InvalidInput("the request body is not UTF-8 JSON", field="body") from None
    headers = {str(k).lower(): v for k, v in (event.get("headers") or {}).items()}
    content_type = str(headers.get("content-type") or "")
    if _media(content_type) and not _is_json(content_type):
        raise UnsupportedMediaType(_UNSUPPORTED_MEDIA, field="content-type")


_UNSUPPORTED_MEDIA = "request bodies are application/json"


def _single_query_value(event: Mapping[str, Any], name: str) -> str | None:
    multi = event.get("multiValueQueryStringParameters") or {}
    values = multi.get(name)
    if isinstance(values, list) and len(values) > 1:
        raise InvalidInput(f"{name} must be given once", field=name)
    single = (event.get("queryStringParameters") or {}).get(name)
    if single is None and isinstance(values, list) and values:
        single = values[0]
    return single if isinstance(single, str) and single else None


def create_app(
    memory: Memory | MemoryProvider,
    *,
    auth: AuthConfig | Callable[[], AuthConfig] | None = None,
    routes: RouteSet = "all",
    max_body_bytes: int = MAX_BODY_BYTES,
) -> MemstackResolver:
    """The HTTP API as a Powertools resolver, for a Lambda handler or a local server.

    Args:
        memory: a ``Memory``, or a zero-argument provider called per request (``memory_from_env``: built on
            the first request, so nothing connects at import time).
        auth: the auth mode, or a provider of it; ``None`` is ``auth_from_env`` (``MEMSTACK_AUTH`` and
            ``MEMSTACK_JWT_RESOURCE_CLAIM``, read on the first request, never at import).
        routes: ``all`` routes, or only ``context`` (the routers of ``ROUTE_SETS``) for the hot-path
            function.
        max_body_bytes: the request body limit (default ``MAX_BODY_BYTES``).

    Returns:
        A ``MemstackResolver``: ``resolve(event, context)`` takes an API Gateway REST proxy event;
        ``memstack.api.http`` adapts plain HTTP requests to it.
    """
    provider: MemoryProvider = memory if callable(memory) else (lambda: memory)
    app = MemstackResolver(provider, _auth_provider(auth), max_body_bytes)
    _register_error_handlers(app)
    app.use(middlewares=[_request_scope])
    for router in route_routers(routes):
        app.include_router(router)
    return app


def served_routes(routes: RouteSet) -> list[tuple[str, str]]:
    """The ``(method, path)`` pairs a resolver of ``routes`` serves (``MemstackResolver.routes``): the one
    source infra/api.py reads to send those methods to the function that serves them.

    Example: ``served_routes("context") == [("POST", "/v1/threads/{thread_id}/context")]``.
    """
    return create_app(_no_memory, auth=AuthConfig(), routes=routes).routes()


def _no_memory() -> Memory:
    raise ServerMisconfigured("this resolver only lists its routes")


def _auth_provider(auth: AuthConfig | Callable[[], AuthConfig] | None) -> Callable[[], AuthConfig]:
    if isinstance(auth, AuthConfig):
        fixed = auth
        return lambda: fixed
    return auth if auth is not None else auth_from_env


QUERY_MODEL_PARAMS = frozenset({"query"})
"""Route parameters that are whole query models (their own name is left out of error field paths)."""


def _register_error_handlers(app: MemstackResolver) -> None:
    def memstack_error(exc: MemstackError) -> Response[Any]:
        return errors.from_memstack_error(exc)

    def invalid_request(exc: RequestValidationError) -> Response[Any]:
        return errors.from_validation_errors(list(exc.errors()), QUERY_MODEL_PARAMS)

    def unsupported_media(exc: RequestUnsupportedContentType) -> Response[Any]:
        return errors.from_memstack_error(UnsupportedMediaType(_UNSUPPORTED_MEDIA, field="content-type"))

    def no_route(exc: NotFoundError) -> Response[Any]:
        event = app.current_event
        return errors.from_memstack_error(NotFound(f"no route {event.http_method} {event.path}"))

    def service_error(exc: ServiceError) -> Response[Any]:
        return errors.from_status(exc.status_code)

    def unexpected(exc: Exception) -> Response[Any]:
        return errors.internal_error(exc)

    handlers: list[tuple[type[Exception], Callable[[Any], Response[Any]]]] = [
        (MemstackError, memstack_error),
        (RequestValidationError, invalid_request),
        (RequestUnsupportedContentType, unsupported_media),
        (NotFoundError, no_route),
        (ServiceError, service_error),
        (ResponseValidationError, unexpected),
        (ServerMisconfigured, unexpected),
        (Exception, unexpected),
    ]
    for exc_class, handle in handlers:
        app.exception_handler(exc_class)(handle)


def _request_scope(app: MemstackResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """Around each routed request (one middleware: every Powertools middleware frame costs its own
    inspection and debug formatting per request): the request validated by the route's models
    (``RoutePlan.arguments``: a 400 is raised before the span and the access line, as Powertools' validation
    middleware did); then one span (``api.<route function>``) holding the route and its answer's
    serialisation (``RoutePlan.serialise``); on Lambda, the deadline ``LAMBDA_MARGIN_MS`` before the
    invocation's end, so ``context()``'s budget (``context_timeout_ms``) never outlives the function; then one
    INFO line — method, route, status, duration, resource: ids only."""
    started = time.perf_counter()
    route = app.context.get("_route")
    plan = app.plan_of(route)
    if plan is not None:
        app.context["_route_args"] = plan.arguments(app.current_event, app.context.get("_route_args", {}))
    with use_case(f"api.{getattr(getattr(route, 'func', None), '__name__', 'route')}"):
        remaining_ms = getattr(app.lambda_context, "get_remaining_time_in_millis", None)
        if callable(remaining_ms):
            with deadline.within(max(0, int(remaining_ms()) - deadline.LAMBDA_MARGIN_MS) / 1000):
                response = next_middleware(app)
        else:
            response = next_middleware(app)
        if plan is not None:
            plan.serialise(response)
    event = app.current_event
    logger.info(
        "request",
        extra={
            "method": event.http_method,
            "route": getattr(route, "openapi_path", None) or event.resource,
            "status": response.status_code,
            "resource_id": (event.query_string_parameters or {}).get("resource_id"),
            "ms": round((time.perf_counter() - started) * 1000, 1),
        },
    )
    return response
