"""What the route modules share with the resolver, kept apart so that neither imports the other: the path
prefix, the ``Memory`` of the request being served and its auth check.

Each route module owns a Powertools ``APIGatewayRouter``; ``memstack.api.app`` includes the routers into a
resolver (Powertools docs, "Split routes with Router"). A router is a module-level object that several
resolvers may include (``memstack serve`` lends one resolver per request from a pool), so a route never
reaches its resolver through the router: ``current_memory()`` and ``authorize()`` read what the serving
resolver set for this request (a context variable, so concurrent requests on other threads each see their
own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from memstack.errors import MemstackError, Unavailable

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.router import APIGatewayRouter

    from memstack.memory import Memory

API_PREFIX = "/v1"
HEALTH_PATH = f"{API_PREFIX}/health"

MemoryProvider = Callable[[], "Memory"]

_serving: ContextVar[tuple[MemoryProvider, Callable[[str], None]] | None] = ContextVar(
    "memstack_api_serving", default=None
)


def new_router() -> APIGatewayRouter:
    """A Powertools ``APIGatewayRouter`` for one route module (typed: Powertools' constructor is not)."""
    from aws_lambda_powertools.event_handler.router import APIGatewayRouter

    return APIGatewayRouter()  # type: ignore[no-untyped-call]


class ServerMisconfigured(RuntimeError):
    """The ``Memory`` or the auth settings could not be built from the deployment's settings (HTTP 500:
    the caller's request is not at fault)."""


@contextmanager
def serving(provider: MemoryProvider, authorizer: Callable[[str], None]) -> Iterator[None]:
    """Make ``provider`` the source of ``current_memory()`` and ``authorizer`` the check of
    ``authorize()`` while a request is resolved (restored after)."""
    token = _serving.set((provider, authorizer))
    try:
        yield
    finally:
        _serving.reset(token)


def _current() -> tuple[MemoryProvider, Callable[[str], None]]:
    current = _serving.get()
    if current is None:
        raise ServerMisconfigured("no request is being served: routes run inside MemstackResolver.resolve")
    return current


def authorize(resource_id: str) -> None:
    """Check that the caller of the request being served may act for ``resource_id`` (for a route that
    takes the resource from its path; a ``resource_id`` query is checked before routing).

    Raises:
        Forbidden: ``jwt`` mode and the token's claim is missing or names another resource.
        ServerMisconfigured: the auth settings are invalid, or no request is being served.
    """
    _current()[1](resource_id)


def current_memory() -> Memory:
    """The ``Memory`` of the request being served (built on first use by the resolver's provider).

    Raises:
        Unavailable: a backend could not be reached while building it.
        ServerMisconfigured: the settings are invalid, or no request is being served.
    """
    provider = _current()[0]
    try:
        return provider()
    except Unavailable:
        raise
    except MemstackError as exc:  # bad settings: the server's fault, never the caller's
        raise ServerMisconfigured(type(exc).__name__) from exc
