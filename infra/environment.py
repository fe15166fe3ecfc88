"""Function environments, built from the settings model's names (``memstack.settings.env_names``), so a
renamed setting breaks the synth instead of silently deploying a variable nothing reads."""

from __future__ import annotations

from memstack.observability import (
    DEFAULT_NAMESPACE,
    ENV_NAMES,
    LOG_LEVEL_ENV,
    NAMESPACE_ENV,
    SERVICE_ENV,
)
from memstack.settings import env_names

POWERTOOLS_NAMES = ENV_NAMES
"""The Powertools variables the functions get besides Memstack's settings (``memstack.observability``
reads them)."""


def memstack_environment(**settings: str | int | None) -> dict[str, str]:
    """``MEMSTACK_*`` (and ``OPENAI_*``) variables for the given settings fields; ``None`` values are left out.

    Raises:
        KeyError: a name that is not a field of ``memstack.settings.Settings``.
    """
    names = env_names()
    out: dict[str, str] = {}
    for name, value in settings.items():
        if name not in names:
            raise KeyError(f"{name!r} is not a field of memstack.settings.Settings")
        if value is not None:
            out[names[name]] = str(value)
    return out


def powertools_environment(
    *, service: str, log_level: str, namespace: str = DEFAULT_NAMESPACE
) -> dict[str, str]:
    """The Powertools logger/metrics configuration of one function (``memstack.observability``)."""
    return {SERVICE_ENV: service, LOG_LEVEL_ENV: log_level, NAMESPACE_ENV: namespace}
