"""``GET /v1/health``: answers without touching the store (no ``Memory`` is built)."""

from functools import cache

from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from memstack.api.deps import HEALTH_PATH
from memstack.api.schemas import Health

router = APIGatewayRouter()
"""``GET /v1/health``."""


@router.get(HEALTH_PATH, tags=["health"], summary="Liveness: the function answers")
def health() -> Health:
    return Health(version=_version())


@cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memstack")
    except PackageNotFoundError:  # running from a source tree without the distribution
        return "unknown"
