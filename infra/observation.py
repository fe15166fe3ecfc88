"""Observation: the background observational-memory workflow (spec §2.9; DESIGN.md "Step Functions";
docs/deploy.md "Observation workflow").

A standard Step Functions state machine, one execution per ``ObservationJob`` (the execution name is the
job's idempotent key; the input is ids only)::

    Observe (functions/observe)  ──$.observe.should_reflect──▶ Reflect (functions/reflect) ──▶ Done
       │ else ──────────────────────────────────────────────────────────────────────────────▶ Done
       └─ Catch States.ALL (Observe, Reflect) ─▶ RecordFailure (functions/observe) ─▶ Failed

Retry on ``Unavailable``/``Throttled``/``Conflict`` (the handlers' exception class names) and Lambda's
service errors: 2 s, ×2, at most 6 attempts, at most 60 s apart, full jitter. The execution times out
after 15 minutes; its events (without execution data) go to a log group; X-Ray traces it.

An EventBridge schedule (every ``observation_sweep_minutes``, default 5) runs the ``sweep`` function,
which starts executions for work that went idle (a failed execution leaves the record pending).

Reference wiring (no cycles): the state machine references the observe and reflect functions; the
functions that start executions (api, indexer, sweep) reference the state machine (its ARN in
``MEMSTACK_OBSERVATION_STATE_MACHINE_ARN`` and ``states:StartExecution`` on it). The observe and reflect
functions never reference the state machine, so the sweep is a function of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from cdk_nag import NagSuppressions
from constructs import Construct

from infra.environment import memstack_environment
from infra.schedules import schedule

RETRY_ERRORS = (
    "Unavailable",
    "ReflectorUnavailable",
    "Throttled",
    "Conflict",
    "Lambda.TooManyRequestsException",
    "Lambda.ServiceException",
    "Lambda.SdkClientException",
    "Lambda.AWSLambdaException",
    "Lambda.ClientExecutionTimeoutException",
)
"""Errors worth retrying: the memory's own (a dependency failed or throttled, a lost write race — the class
name of the handler's exception is the error name; ``ReflectorUnavailable`` is the Reflector's model
failing, named apart so the Catch records it as the reflection's failure) and Lambda's transient service
errors."""
EXECUTION_TIMEOUT = Duration.minutes(15)
SWEEP_IDLE_SECONDS = 300
SWEEP_LIMIT = 100
IDS = {
    "resource_id.$": "$.resource_id",
    "thread_id.$": "$.thread_id",
    "key.$": "$.key",
    "reason.$": "$.reason",
}
"""The task payloads: the execution's input, ids only."""


class Observation(Construct):
    """The observation state machine, its log group, the sweep schedule, and the grants to start it.

    Args:
        observe_function: the Observe and RecordFailure tasks (``functions/observe``, ``app.handler``).
        reflect_function: the Reflect task (``functions/reflect``).
        sweep_function: run by the schedule (``functions/observe``, ``app.sweep``).
        starters: the functions that schedule observation (api, indexer); the sweep is added.
        sweep_minutes: the schedule's rate.

    Attributes:
        state_machine, log_group, sweep_rule.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        observe_function: lambda_.IFunction,
        reflect_function: lambda_.IFunction,
        sweep_function: lambda_.Function,
        starters: Sequence[lambda_.Function],
        sweep_minutes: int = 5,
    ) -> None:
        super().__init__(scope, construct_id)

        def step(name: str, function: lambda_.IFunction, comment: str) -> tasks.LambdaInvoke:
            return tasks.LambdaInvoke(
                self,
                name,
                lambda_function=function,
                payload=sfn.TaskInput.from_object(IDS),
                payload_response_only=True,
                retry_on_service_exceptions=False,
                result_path=f"$.{name.lower()}",
                comment=comment,
            )

        observe = step(
            "Observe",
            observe_function,
            "One background step: title, buffer, activate or observe as the thresholds say.",
        )
        reflect = step(
            "Reflect",
            reflect_function,
            "Rewrite the observations when they are over the reflection threshold.",
        )
        record_failure = tasks.LambdaInvoke(
            self,
            "RecordFailure",
            lambda_function=observe_function,
            payload=sfn.TaskInput.from_object({"action": "record_failure", **IDS, "error.$": "$.error"}),
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path="$.recorded",
            comment="Note the failure on the observation record; the sweep retries it later.",
        )
        for task in (observe, reflect, record_failure):
            task.add_retry(
                errors=list(RETRY_ERRORS),
                interval=Duration.seconds(2),
                backoff_rate=2,
                max_attempts=6,
                max_delay=Duration.seconds(60),
                jitter_strategy=sfn.JitterType.FULL,
            )
        failed = sfn.Fail(
            self,
            "Failed",
            error="ObservationFailed",
            cause="Observation failed after its retries; the failure is on the record and the sweep retries it.",
        )
        record_failure.next(failed)
        for task in (observe, reflect):
            task.add_catch(record_failure, errors=["States.ALL"], result_path="$.error")
        done = sfn.Succeed(self, "Done")
        definition = observe.next(
            sfn.Choice(self, "ShouldReflect")
            .when(sfn.Condition.boolean_equals("$.observe.should_reflect", True), reflect.next(done))
            .otherwise(done)
        )

        self.log_group = logs.LogGroup(
            self,
            "ExecutionLogs",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment="Memstack: background observational memory (Observe -> Reflect), one execution per job.",
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_type=sfn.StateMachineType.STANDARD,
            timeout=EXECUTION_TIMEOUT,
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group,
                level=sfn.LogLevel.ALL,
                include_execution_data=False,  # ids and counts only, but titles are thread content
            ),
        )

        for function in (*starters, sweep_function):
            self.state_machine.grant_start_execution(function)
            for name, value in memstack_environment(
                observation_state_machine_arn=self.state_machine.state_machine_arn
            ).items():
                function.add_environment(name, value)

        self.sweep_rule = schedule(
            self,
            "SweepSchedule",
            description="Memstack: restart observation work that went idle.",
            function=sweep_function,
            minutes=sweep_minutes,
            event={"idle_seconds": SWEEP_IDLE_SECONDS, "limit": SWEEP_LIMIT},
        )

        NagSuppressions.add_resource_suppressions(
            self.state_machine,
            [
                {
                    "id": "AwsSolutions-IAM5",
                    "reason": "The state machine's role invokes the observe and reflect functions and their "
                    "versions (<function>.Arn:*, CDK's LambdaInvoke grant); CloudWatch Logs delivery and X-Ray "
                    "have no resource-level permissions (Resource '*').",
                    "applies_to": [
                        {"regex": "/^Resource::<.*(Observe|Reflect).*\\.Arn>:\\*$/g"},
                        "Resource::*",
                    ],
                }
            ],
            apply_to_children=True,
        )
