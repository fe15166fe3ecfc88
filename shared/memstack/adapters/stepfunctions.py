"""``StepFunctionsScheduler``: background observation jobs as AWS Step Functions executions (spec §2.9;
DESIGN.md "Step Functions"; docs/deploy.md "Observation workflow").

``submit(job)`` starts one execution of the observation state machine named ``job.key`` with the input
``{"resource_id", "thread_id", "key", "reason"}`` — ids only, never message or observation text. Execution
names are unique per state machine (for 90 days on standard workflows), so a key submitted again is not
started again: Step Functions answers ``ExecutionAlreadyExists`` (or, for a running execution with the same
input, the same execution), and both mean "already started".

Errors (``memstack.errors``): throttling → ``Throttled`` (a kind of ``Unavailable``); 5xx, timeouts and
connection errors → ``Unavailable``; any other refusal (access denied, a missing state machine, an invalid
name) → ``Unavailable`` naming the AWS error code only; no region → ``InvalidInput`` naming
``MEMSTACK_REGION``. The botocore client is made on first use (nothing connects at import or construction),
with a 2 s connect timeout, a 5 s read timeout and standard-mode retries (3 attempts in all).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from memstack.errors import InvalidInput, Throttled, Unavailable
from memstack.ports import ObservationJob

logger = logging.getLogger(__name__)

THROTTLING_CODES = frozenset(
    {"ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded"}
)
ALREADY_STARTED = "ExecutionAlreadyExists"


class StepFunctionsScheduler:
    """Starts a Step Functions execution per ``ObservationJob`` (``memstack.ports.ObservationScheduler``).

    Args:
        state_machine_arn: the observation state machine (``MEMSTACK_OBSERVATION_STATE_MACHINE_ARN``).
        region: the AWS region; ``None``: the ARN's region.
        endpoint_url: a local endpoint (moto server, Step Functions Local).

    Raises:
        InvalidInput: an empty ARN.
    """

    def __init__(self, state_machine_arn: str, *, region: str | None = None, endpoint_url: str | None = None):
        if not isinstance(state_machine_arn, str) or not state_machine_arn.strip():
            raise InvalidInput(
                "the observation state machine ARN is empty", field="MEMSTACK_OBSERVATION_STATE_MACHINE_ARN"
            )
        self.state_machine_arn = state_machine_arn.strip()
        parts = self.state_machine_arn.split(":")
        self.region = region or (parts[3] if len(parts) > 3 and parts[3] else None)
        self.endpoint_url = endpoint_url
        self._client: Any = None
        self._lock = threading.Lock()

    def _stepfunctions(self) -> Any:
        with self._lock:
            if self._client is None:
                from botocore.config import Config
                from botocore.exceptions import NoRegionError

                from memstack.adapters.aws_session import create_client

                config = Config(
                    connect_timeout=2, read_timeout=5, retries={"mode": "standard", "max_attempts": 3}
                )
                try:
                    self._client = create_client(
                        "stepfunctions",
                        region_name=self.region,
                        endpoint_url=self.endpoint_url,
                        config=config,
                    )
                except NoRegionError:
                    raise InvalidInput(
                        "no AWS region for Step Functions; set MEMSTACK_REGION (or AWS_REGION)",
                        field="MEMSTACK_REGION",
                    ) from None
            return self._client

    def submit(self, job: ObservationJob) -> None:
        """Start the execution ``job.key``; a key already started is ignored (logged at debug).

        Raises:
            Throttled: Step Functions throttled the request (after the client's retries).
            Unavailable: a 5xx, a timeout, a connection error or any other refusal (the AWS code is named).
            InvalidInput: no region.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        payload = {
            "resource_id": job.resource_id,
            "thread_id": job.thread_id,
            "key": job.key,
            "reason": job.reason,
        }
        client = self._stepfunctions()
        try:
            client.start_execution(
                stateMachineArn=self.state_machine_arn, name=job.key, input=json.dumps(payload)
            )
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", "")) or "unknown"
            if code == ALREADY_STARTED:
                logger.debug("observation job already started", extra={"key": job.key, "reason": job.reason})
                return
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            logger.warning(
                "starting an observation execution failed (%s)",
                code,
                extra={"key": job.key, "error": code, "status": status},
            )
            if code in THROTTLING_CODES:
                raise Throttled(f"Step Functions throttled StartExecution ({code}); retry later") from None
            if isinstance(status, int) and status >= 500:
                raise Unavailable(f"Step Functions error {code} (HTTP {status}); retry later") from None
            raise Unavailable(f"Step Functions refused StartExecution ({code})") from None
        except BotoCoreError as exc:
            name = type(exc).__name__
            logger.warning(
                "starting an observation execution failed (%s)", name, extra={"key": job.key, "error": name}
            )
            raise Unavailable(f"cannot reach Step Functions ({name}); retry later") from None
        logger.debug("observation job started", extra={"key": job.key, "reason": job.reason})

    def close(self) -> None:
        """Close the client's connections (a later ``submit`` makes a new client)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
