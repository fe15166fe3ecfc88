"""Who may act for which resource (docs/api.md "Auth").

* ``iam`` (default): API Gateway authenticated the caller with SigV4 before the function runs; the caller is
  the agent's trusted backend, so the request's ``resource_id`` is taken as given.
* ``jwt``: a JWT (Cognito user pool) authorizer validated the token; the request's ``resource_id`` must equal
  the configured claim (``MEMSTACK_JWT_RESOURCE_CLAIM``, default ``sub``) of the token — 403 ``forbidden``
  otherwise, and when the claim is missing. The claims are read from ``requestContext.authorizer.claims``
  (Cognito/JWT authorizer of a REST API), else from ``requestContext.authorizer`` itself (the context a
  Lambda authorizer returns, flat).

Isolation between resources does not rest on this check alone: every ``Memory`` call is scoped to the
resource, and another resource's thread reads as missing (404), never as forbidden.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from memstack.errors import Forbidden

if TYPE_CHECKING:
    from memstack.settings import Settings

AuthMode = Literal["iam", "jwt"]


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """How requests are authorized.

    Attributes:
        mode: ``iam`` (trust ``resource_id``) or ``jwt`` (``resource_id`` must equal a token claim).
        resource_claim: the claim holding the resource id in ``jwt`` mode.
    """

    mode: AuthMode = "iam"
    resource_claim: str = "sub"

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> AuthConfig:
        """From ``MEMSTACK_AUTH`` and ``MEMSTACK_JWT_RESOURCE_CLAIM`` (read now, never at import).

        Raises:
            InvalidInput: a malformed setting.
        """
        from memstack.settings import load_settings

        settings = settings if settings is not None else load_settings()
        return cls(mode=settings.auth, resource_claim=settings.jwt_resource_claim)

    def authorize(self, event: Mapping[str, Any], resource_id: str) -> None:
        """Check that the caller of ``event`` (an API Gateway REST proxy event) may act for ``resource_id``.

        Raises:
            Forbidden: ``jwt`` mode and the claim is missing or differs from ``resource_id``.
        """
        if self.mode == "iam":
            return
        value = claim(event, self.resource_claim)
        if value is None:
            raise Forbidden(f"the token has no {self.resource_claim!r} claim", field="resource_id")
        if value != resource_id:
            raise Forbidden(
                f"resource_id does not match the token's {self.resource_claim!r} claim", field="resource_id"
            )


def claim(event: Mapping[str, Any], name: str) -> str | None:
    """The authorizer's claim ``name`` as a string, or ``None`` (no authorizer, no such claim, or a value
    that is not a string or number)."""
    context = event.get("requestContext")
    authorizer = context.get("authorizer") if isinstance(context, Mapping) else None
    if not isinstance(authorizer, Mapping):
        return None
    claims = authorizer.get("claims")
    value = claims.get(name) if isinstance(claims, Mapping) else None
    if value is None:
        value = authorizer.get(name)
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return str(value)


_auth: AuthConfig | None = None
_auth_lock = threading.Lock()


def auth_from_env() -> AuthConfig:
    """The process-wide ``AuthConfig`` read from the settings on first use (as ``memory_from_env`` does for
    the ``Memory``): requests after the first pay nothing for it.

    Raises:
        InvalidInput: a malformed ``MEMSTACK_AUTH`` or ``MEMSTACK_JWT_RESOURCE_CLAIM``.
    """
    global _auth
    with _auth_lock:
        if _auth is None:
            _auth = AuthConfig.from_settings()
        return _auth
