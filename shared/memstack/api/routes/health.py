"""``GET /v1/health``: answers without touching the store (no ``Memory`` is built)."""

from functools import cache

from memstack.api.deps import HEALTH_PATH, new_router
from memstack.api.schemas import Health

router = new_router()
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
