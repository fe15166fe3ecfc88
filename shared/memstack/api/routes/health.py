"""``GET /v1/health``: answers without touching the store (no ``Memory`` is built)."""

from functools import cache

from memstack.api.app import HEALTH_PATH, MemstackResolver
from memstack.api.schemas import Health


def register(app: MemstackResolver) -> None:
    """Add ``GET /v1/health``."""

    @app.get(HEALTH_PATH, tags=["health"], summary="Liveness: the function answers")
    def health() -> Health:
        return Health(version=_version())


@cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memstack")
    except PackageNotFoundError:  # running from a source tree without the distribution
        return "unknown"
