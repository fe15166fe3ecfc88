"""Lambda ``observe``: the Observe and RecordFailure tasks of the observation state machine, and (handler
``app.sweep``, a function of its own) the EventBridge sweep that restarts idle work (spec §2.9; DESIGN.md
"Step Functions"; docs/deploy.md "Observation workflow").

Events (ids only, never message or observation text):

* ``{"resource_id", "thread_id", "key", "reason"}`` (the execution's input) → ``Memory.observe`` → the
  ``ObserveResult`` as a dict (``should_reflect`` drives the state machine's Choice).
* ``{"action": "record_failure", "resource_id", "thread_id", "key", "error": {"Error", "Cause"}}`` (the
  Catch path) → ``Memory.record_observation_failure`` with the error name and the first 300 characters of
  the cause's ``errorMessage`` → ``{"recorded": true}``.

Errors propagate: the exception's class name is the Step Functions error name (``Unavailable`` and
``Throttled`` are retried with backoff, anything else goes to the Catch). Logs carry ids and counts only.
Wiring only; ``Memory`` is built from the environment on the first event (nothing connects at import).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from memstack.bootstrap import memory_from_env
from memstack.errors import InvalidInput, Unavailable
from memstack.observability import OBSERVED, add_metric, lambda_handler, logger
from memstack.observation.events import job_ids

CAUSE_CHARS = 300
"""How much of a failure's message is kept on the record (``last_error``)."""
SWEEP_IDLE_SECONDS = 300
SWEEP_LIMIT = 100


def observe(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """One Observe step, or the Catch path's failure record (module docstring).

    Raises:
        InvalidInput: an event without string ``resource_id``/``thread_id``.
        Unavailable (or Throttled): the model, store or index failed; the state machine retries.
    """
    resource_id, thread_id = job_ids(event)
    key = str(event.get("key") or "")
    memory = memory_from_env()
    if event.get("action") == "record_failure":
        error = failure_text(event.get("error"))
        memory.record_observation_failure(resource_id=resource_id, thread_id=thread_id, error=error)
        logger().warning(
            "observation failed; recorded for the sweep",
            extra={
                "resource_id": resource_id,
                "thread_id": thread_id,
                "key": key,
                "error": error.split(":")[0],
            },
        )
        return {"recorded": True}
    reason = event.get("reason")
    result = memory.observe(
        resource_id=resource_id,
        thread_id=thread_id,
        reason=reason if isinstance(reason, str) else "background",
        time_budget=_time_budget(context),
    )
    add_metric(OBSERVED, result.observed_messages)
    out = result.to_dict()
    # the title is conversation text: the execution's output (kept in its history) says only whether one was set
    out["title"] = out.get("title") is not None
    logger().info(
        "observation step done",
        extra={
            "resource_id": resource_id,
            "thread_id": thread_id,
            "key": key,
            **{k: v for k, v in out.items() if isinstance(v, bool | int)},
            "title_set": out["title"],
        },
    )
    return out


def sweep_due(event: Mapping[str, Any], context: Any) -> dict[str, int]:
    """The schedule's sweep: start a job for every observation record due for at least ``idle_seconds``
    (default 300), at most ``limit`` (default 100) per run, through the memory's scheduler (Step Functions;
    a job already started is not started again). Returns ``{"started": n}`` (jobs submitted).

    Raises:
        InvalidInput: bad ``idle_seconds``/``limit``; no ``MEMSTACK_OBSERVATION_STATE_MACHINE_ARN``.
        Unavailable: the store failed, or some jobs could not be started (after trying every job; the
            next run retries them), so the function's error alarm sees it.
    """
    from memstack.settings import load_settings  # pydantic: imported by the sweep, not at the import

    idle = _number(event, "idle_seconds", SWEEP_IDLE_SECONDS, 0, 86_400)
    limit = _number(event, "limit", SWEEP_LIMIT, 1, 1000)
    if not load_settings().observation_state_machine_arn:  # else the memory would run jobs in this process
        raise InvalidInput(
            "the sweep needs MEMSTACK_OBSERVATION_STATE_MACHINE_ARN",
            field="MEMSTACK_OBSERVATION_STATE_MACHINE_ARN",
        )
    result = memory_from_env().sweep_observations(idle_seconds=idle, limit=limit)
    logger().info(
        "observation sweep done",
        extra={
            "due": result.due,
            "started": result.started,
            "failed": result.failed,
            "idle_seconds": idle,
            "limit": limit,
        },
    )
    if result.failed:
        raise Unavailable(
            f"the sweep could not start {result.failed} of {result.due} observation jobs; the next run retries"
        )
    return {"started": result.started}


handler = lambda_handler(observe)
"""``observe`` with the function's logs, trace and metrics (memstack.observability)."""
sweep = lambda_handler(sweep_due)
"""``sweep_due`` with the function's logs, trace and metrics (the ``sweep`` function's handler)."""


def failure_text(error: object) -> str:
    """``"<Error>: <errorMessage[:300]>"`` from a Catch's ``{"Error", "Cause"}``; the cause is a Lambda
    error's JSON (``errorMessage``, ``errorType``, ``stackTrace``) or plain text (Step Functions' own
    errors such as ``States.Timeout``). The stack trace is never kept."""
    if not isinstance(error, Mapping):
        return "Unknown"
    name = str(error.get("Error") or "Unknown")[:100]
    cause = error.get("Cause")
    message = ""
    if isinstance(cause, str) and cause:
        try:
            parsed = json.loads(cause)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, Mapping):
            message = str(parsed.get("errorMessage") or "")
        elif parsed is None:
            message = cause
    message = message.strip()[:CAUSE_CHARS]
    return f"{name}: {message}" if message else name


MODEL_CALL_MARGIN = 120.0
"""Seconds kept free at the end of an Observe invocation: no Observer call starts later than that, so a
step commits what it did before Lambda's timeout (a call is bounded by the chat client's timeout)."""


def _time_budget(context: Any) -> float | None:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return None
    try:
        return max(0.0, float(remaining()) / 1000 - MODEL_CALL_MARGIN)
    except (TypeError, ValueError):
        return None


def _number(event: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = event.get(name, default) if isinstance(event, Mapping) else default
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidInput(f"{name} must be an integer from {low} to {high}", field=name)
    return value
