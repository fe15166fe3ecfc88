"""Lambda ``reflect``: the Reflect task of the observation state machine (spec §2.9.4 step 8; DESIGN.md
"Step Functions"), run when the Observe step answered ``should_reflect``.

Event: ``{"resource_id", "thread_id", "key", ...}`` (the execution's input; ids only) →
``Memory.reflect`` → the ``ReflectResult`` as a dict. A bad Reflector answer is never committed (the
engine keeps the observations). Errors propagate by class name (``Unavailable``/``Throttled`` are retried
by the state machine). Logs carry ids and counts only. ``Memory`` is built on the first event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstack.bootstrap import memory_from_env
from memstack.observability import REFLECTIONS, add_metric, lambda_handler, logger
from memstack.observation.events import job_ids


def reflect(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Reflect the thread's observations if they are over the reflection threshold.

    Raises:
        InvalidInput: an event without string ``resource_id``/``thread_id``.
        Unavailable (or Throttled): the model or store failed; the state machine retries.
    """
    resource_id, thread_id = job_ids(event)
    result = memory_from_env().reflect(resource_id=resource_id, thread_id=thread_id)
    add_metric(REFLECTIONS, int(result.reflected))
    out = result.to_dict()
    logger().info(
        "reflection step done",
        extra={"resource_id": resource_id, "thread_id": thread_id, "key": str(event.get("key") or ""), **out},
    )
    return out


handler = lambda_handler(reflect)
"""``reflect`` with the function's logs, trace and metrics (memstack.observability)."""
