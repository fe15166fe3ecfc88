"""Scheduled runs of a function: an EventBridge rule that invokes it at a fixed rate with a fixed input
(the observation sweep, the index reconciler)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct


def schedule(
    scope: Construct,
    construct_id: str,
    *,
    description: str,
    function: lambda_.Function,
    minutes: int,
    event: Mapping[str, Any],
) -> events.Rule:
    """A rule that invokes ``function`` every ``minutes`` with ``event`` as its input.

    EventBridge retries a delivery twice and drops it once it is a period old; the function's own
    asynchronous retries are off, since a failed run is not worth retrying: the next scheduled run does the
    same work.
    """
    rule = events.Rule(
        scope,
        construct_id,
        description=description,
        schedule=events.Schedule.rate(Duration.minutes(minutes)),
        targets=[
            targets.LambdaFunction(
                function,
                event=events.RuleTargetInput.from_object(dict(event)),
                retry_attempts=2,
                max_event_age=Duration.minutes(minutes),
            )
        ],
    )
    function.configure_async_invoke(retry_attempts=0, max_event_age=Duration.minutes(minutes))
    return rule
