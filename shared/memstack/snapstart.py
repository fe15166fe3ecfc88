"""Lambda SnapStart: prime a function before its snapshot, refresh what must differ after a restore.

With SnapStart (``-c snapStart=true``, docs/deploy.md "Cold start"), Lambda runs a function's init phase
once per published version, snapshots the memory of the initialised environment, and starts new
environments by restoring that snapshot instead of running init again. What init has done is therefore
free on every cold start. ``prime`` makes init do what a first request would: build the process-wide
``Memory`` (settings, the DynamoDB and OpenSearch clients, the OpenAI client and the ``openai`` SDK import,
the OpenSearch index check) and assemble one context for a thread that does not exist, so every module
the context route imports and every lazily built client is in the snapshot; given the handler's resolver,
it then sends the same context request through it, so the route's request and response models (built on
first use: pydantic ``defer_build``) and the resolver's tables are in the snapshot too. It reads and embeds
but writes nothing (``context`` saves nothing; the priming resource has no data).

Only under SnapStart: Lambda sets ``AWS_LAMBDA_INITIALIZATION_TYPE=snap-start`` for the init that is
snapshotted; on-demand and provisioned inits return at once, so a function without SnapStart pays nothing.

After a restore (``snapshot_restore_py``, part of Lambda's Python runtime, AWS docs "Lambda SnapStart
runtime hooks for Python"): ``random`` is seeded again, else every environment restored from one
snapshot would draw the same retry jitter. Connections opened during init are stale after a restore;
the clients retry a failed connection (botocore, the OpenSearch transport, ``OpenAIConnection``), which
costs the first request one reconnect. The OpenAI key read from Secrets Manager during init is in the
snapshot: a rotated key reaches the functions with the next published version (the next deploy).
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstack.memory import Memory

INIT_TYPE_ENV = "AWS_LAMBDA_INITIALIZATION_TYPE"
"""Set by Lambda for the init phase: ``on-demand``, ``provisioned-concurrency`` or ``snap-start``."""
SNAP_START = "snap-start"

PRIME_RESOURCE = "memstack-snapstart-prime"
"""The resource of the priming context; it holds no data (nothing is saved under it)."""
PRIME_THREAD = "snapstart-prime"
PRIME_MESSAGE = "snapshot priming"

logger = logging.getLogger(__name__)


def snapshotting() -> bool:
    """Whether this init phase is the one Lambda snapshots (``AWS_LAMBDA_INITIALIZATION_TYPE``)."""
    return os.environ.get(INIT_TYPE_ENV) == SNAP_START


def prime(
    memory: Callable[[], Memory],
    resolve: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None,
) -> bool:
    """Under SnapStart's init, build the ``Memory`` and assemble one context, so the snapshot holds them.

    Call it at module level in a handler module (Lambda runs ``snapshot_restore_py`` hooks registered
    there). Never raises: a failed priming (an unreachable backend) is logged at WARNING with the error
    class only, and the first request builds what is missing, as without SnapStart.

    Args:
        memory: the process-wide ``Memory`` provider the handler uses (``memstack.bootstrap.memory_from_env``).
        resolve: the handler's resolver (``app.resolve``: API Gateway event, context → response), sent the
            priming context request after the ``Memory``'s own (with ``jwt`` auth it answers 403 and only
            the ``Memory`` is primed).

    Returns:
        ``True`` when this was a SnapStart init (primed or tried), ``False`` otherwise (nothing done).
    """
    if not snapshotting():
        return False
    try:
        memory().context(thread_id=PRIME_THREAD, resource_id=PRIME_RESOURCE, message=PRIME_MESSAGE)
        if resolve is not None:
            response = resolve(priming_event(), None)
            if response.get("statusCode") != 200:
                logger.warning("SnapStart priming request answered %s", response.get("statusCode"))
    except Exception as exc:  # the function must still start: the first request will build it
        logger.warning(
            "SnapStart priming failed (%s); the first request builds the memory", type(exc).__name__
        )
    _register_after_restore(after_restore)
    return True


def priming_event() -> dict[str, Any]:
    """The API Gateway REST proxy event of the priming context request (``POST`` the context of
    ``PRIME_THREAD`` for ``PRIME_RESOURCE``)."""
    from memstack.api.http import to_event

    return to_event(
        "POST",
        f"/v1/threads/{PRIME_THREAD}/context",
        {"resource_id": PRIME_RESOURCE},
        {"content-type": "application/json"},
        json.dumps({"message": PRIME_MESSAGE}).encode(),
    )


def after_restore() -> None:
    """What each restored environment runs once: a fresh ``random`` seed (retry jitter must differ)."""
    random.seed()


def _register_after_restore(hook: Callable[[], None]) -> None:
    try:
        from snapshot_restore_py import register_after_restore  # Lambda's Python runtime has it
    except ImportError:  # not on Lambda (tests, benchmarks): the caller runs the hook itself if it wants
        return
    register_after_restore(hook)
