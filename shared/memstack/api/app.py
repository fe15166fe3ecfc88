"""The resolver: Powertools ``APIGatewayRestResolver`` with pydantic validation, every ``/v1`` route, the
error mapping, the body size limit and the auth check — shared by the Lambda functions and ``memstack serve``.

Request pipeline (``MemstackResolver.resolve``), in order:

1. the body size limit (``max_body_bytes``, checked on the raw event, before anything is parsed) → 413;
2. a body that is not JSON by its ``Content-Type`` → 415;
3. the auth check of ``resource_id`` (``AuthConfig``; not on ``/v1/health``) → 403;
4. route matching (→ 404), request validation (→ 400 naming the field), the route: one ``Memory`` call;
5. any error → ``memstack.api.errors`` (the one place that maps errors to HTTP).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
    ResponseValidationError,
)

from memstack.api import errors
from memstack.api.auth import AuthConfig, auth_from_env
from memstack.api.log import api_logger
from memstack.errors import InvalidInput, MemstackError, PayloadTooLarge, Unavailable

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from memstack.memory import Memory

MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body the API reads, in bytes (4 MiB): under Lambda's 6 MB synchronous payload limit even
when API Gateway base64-encodes the body (×4/3). Larger bodies are refused with 413 before parsing."""

API_PREFIX = "/v1"
HEALTH_PATH = f"{API_PREFIX}/health"

RouteSet = Literal["all", "context"]
"""Which routes a resolver serves: ``all``, or ``context`` (the hot path — context assembly, recall and
health — on a function of its own)."""

MemoryProvider = Callable[[], "Memory"]


class ServerMisconfigured(RuntimeError):
    """The ``Memory`` or the auth settings could not be built from the deployment's settings (HTTP 500:
    the caller's request is not at fault)."""


class MemstackResolver(APIGatewayRestResolver):
    """``APIGatewayRestResolver`` with validation on, plus Memstack's pre-checks (size, media type, auth).

    Build it with ``create_app``; call ``resolve(event, context)`` with an API Gateway REST proxy event.
    """

    def __init__(
        self,
        memory: MemoryProvider,
        auth: Callable[[], AuthConfig],
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        super().__init__(enable_validation=True, response_validation_error_http_code=500)
        self._memory_provider = memory
        self._auth_provider = auth
        self.max_body_bytes = max_body_bytes

    def memory(self) -> Memory:
        """The ``Memory`` of this request (built on first use by the provider).

        Raises:
            Unavailable: a backend could not be reached while building it.
            ServerMisconfigured: the settings are invalid.
        """
        try:
            return self._memory_provider()
        except Unavailable:
            raise
        except MemstackError as exc:  # bad settings: the server's fault, never the caller's
            raise ServerMisconfigured(type(exc).__name__) from exc

    def resolve(self, event: Mapping[str, Any], context: LambdaContext | None) -> dict[str, Any]:
        """The API Gateway proxy response for ``event`` (``statusCode``, ``multiValueHeaders``, ``body``,
        ``isBase64Encoded``). Never raises: every error becomes an error response."""
        try:
            request_id = (event.get("requestContext") or {}).get("requestId")
            logger = api_logger()
            if request_id:
                logger.set_correlation_id(str(request_id))
            rejected = self._precheck(event)
        except Exception as exc:
            rejected = errors.internal_error(exc)
        if rejected is not None:
            builder: ResponseBuilder[Any] = ResponseBuilder(rejected, serializer=self._serializer)
            return builder.build(self._to_proxy_event(dict(event)), self._cors)
        return super().resolve(event, context)  # type: ignore[arg-type]

    def _precheck(self, event: Mapping[str, Any]) -> Response[Any] | None:
        try:
            _check_body(event, self.max_body_bytes)
            if event.get("path") == HEALTH_PATH:
                return None
            resource_id = _single_query_value(event, "resource_id")
            if resource_id is None:
                return None  # validation answers 400 resource_id is required
            try:
                auth = self._auth_provider()
            except MemstackError as exc:
                raise ServerMisconfigured(type(exc).__name__) from exc
            auth.authorize(event, resource_id)
        except MemstackError as exc:
            return errors.from_memstack_error(exc)
        return None


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
    media = str(headers.get("content-type") or "").split(";")[0].strip().lower()
    if media and media != "application/json" and not media.endswith("+json"):
        raise _UnsupportedMedia(media)


class _UnsupportedMedia(InvalidInput):
    code = "unsupported_media_type"
    status = 415

    def __init__(self, media: str) -> None:
        super().__init__("request bodies are application/json", field="content-type")


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
        routes: ``all`` routes, or only ``context`` (context, recall and health) for the hot-path function.
        max_body_bytes: the request body limit (default ``MAX_BODY_BYTES``).

    Returns:
        A ``MemstackResolver``: ``resolve(event, context)`` takes an API Gateway REST proxy event;
        ``memstack.api.http`` adapts plain HTTP requests to it.
    """
    from memstack.api.routes import context as context_routes
    from memstack.api.routes import health, messages, threads, working_memory

    provider: MemoryProvider = memory if callable(memory) else (lambda: memory)
    app = MemstackResolver(provider, _auth_provider(auth), max_body_bytes)
    _register_error_handlers(app)
    app.use(middlewares=[_access_log])
    health.register(app)
    context_routes.register(app)
    if routes == "all":
        threads.register(app)
        messages.register(app)
        working_memory.register(app)
    return app


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
        return errors.error_response(415, "unsupported_media_type", "request bodies are application/json")

    def no_route(exc: NotFoundError) -> Response[Any]:
        event = app.current_event
        return errors.error_response(404, "not_found", f"no route {event.http_method} {event.path}")

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


def _access_log(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """One INFO line per request: method, route, status, duration, resource — ids only."""
    started = time.perf_counter()
    response = next_middleware(app)
    event = app.current_event
    route = app.context.get("_route")
    api_logger().info(
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
