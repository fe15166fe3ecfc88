"""The API's Powertools ``Logger``, made on first use (not at import: it reads ``POWERTOOLS_*`` and
``LOG_LEVEL`` from the environment). Lines carry ids, counts, codes and token totals only — never message
text or working-memory content at INFO (STYLE.md)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

SERVICE = "memstack"

_logger: Logger | None = None
_lock = threading.Lock()


def api_logger() -> Logger:
    """The process-wide API logger (service ``memstack`` unless ``POWERTOOLS_SERVICE_NAME`` says otherwise)."""
    global _logger
    with _lock:
        if _logger is None:
            from aws_lambda_powertools import Logger

            _logger = Logger(service=SERVICE)
        return _logger
