"""Observability: alarms (function errors and throttles, API 5xx, indexer dead letters and stream lag, the
observation state machine's failed, throttled and timed-out executions) and one CloudWatch dashboard.
With ``alarm_topic_arn`` every alarm notifies that SNS topic."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

PERIOD = Duration.minutes(5)
INDEXER_MAX_ITERATOR_AGE_MS = 5 * 60 * 1000
"""The indexer is behind when its oldest stream record waits this long (a saved turn not yet searchable)."""


class Observability(Construct):
    """Alarms and the dashboard.

    Attributes:
        alarms: by name (``<function>-errors``, ``<function>-throttles``, ``api-5xx``, ``indexer-dlq``,
            ``indexer-iterator-age``; with a state machine ``observation-failed``, ``observation-throttled``,
            ``observation-timed-out``); dashboard.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: Mapping[str, lambda_.Function],
        rest_api: apigw.RestApi,
        dead_letter_queue: sqs.IQueue,
        indexer: lambda_.Function,
        state_machine: sfn.StateMachine | None = None,
        alarm_topic_arn: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        for name, function in functions.items():
            self._alarm(
                f"{name}-errors",
                function.metric_errors(period=PERIOD, statistic="Sum"),
                f"The {name} function raised errors.",
            )
            self._alarm(
                f"{name}-throttles",
                function.metric_throttles(period=PERIOD, statistic="Sum"),
                f"The {name} function was throttled.",
            )
        self._alarm(
            "api-5xx", rest_api.metric_server_error(period=PERIOD, statistic="Sum"), "The API answered 5xx."
        )
        self._alarm(
            "indexer-dlq",
            dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(1), statistic="Maximum"
            ),
            "Stream records the indexer gave up on are waiting in its dead-letter queue (messages not searchable).",
        )
        iterator_age = cloudwatch.Metric(
            namespace="AWS/Lambda",
            metric_name="IteratorAge",
            dimensions_map={"FunctionName": indexer.function_name},
            period=PERIOD,
            statistic="Maximum",
        )
        self._alarm(
            "indexer-iterator-age",
            iterator_age,
            "The indexer lags the table's stream.",
            threshold=INDEXER_MAX_ITERATOR_AGE_MS,
        )
        if state_machine is not None:
            self._alarm(
                "observation-failed",
                state_machine.metric_failed(period=PERIOD, statistic="Sum"),
                "Observation executions failed after their retries (recorded on the record; the sweep retries).",
            )
            self._alarm(
                "observation-throttled",
                state_machine.metric_throttled(period=PERIOD, statistic="Sum"),
                "Observation executions were throttled by Step Functions.",
            )
            self._alarm(
                "observation-timed-out",
                state_machine.metric_timed_out(period=PERIOD, statistic="Sum"),
                "Observation executions timed out (15 minutes).",
            )

        if alarm_topic_arn:
            topic = sns.Topic.from_topic_arn(self, "AlarmTopic", alarm_topic_arn)
            for alarm in self.alarms.values():
                alarm.add_alarm_action(actions.SnsAction(topic))

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="API requests and errors",
                left=[rest_api.metric_count(period=PERIOD, statistic="Sum")],
                right=[
                    rest_api.metric_client_error(period=PERIOD, statistic="Sum"),
                    rest_api.metric_server_error(period=PERIOD, statistic="Sum"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="API latency (p50, p99)",
                left=[
                    rest_api.metric_latency(period=PERIOD, statistic="p50"),
                    rest_api.metric_latency(period=PERIOD, statistic="p99"),
                ],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Function invocations and errors",
                left=[
                    f.metric_invocations(period=PERIOD, label=f"{n} invocations")
                    for n, f in functions.items()
                ],
                right=[f.metric_errors(period=PERIOD, label=f"{n} errors") for n, f in functions.items()],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Function duration p99 (ms)",
                left=[
                    f.metric_duration(period=PERIOD, statistic="p99", label=n) for n, f in functions.items()
                ],
                width=12,
            ),
        )
        if state_machine is not None:
            self.dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title="Observation executions",
                    left=[
                        state_machine.metric_started(period=PERIOD, statistic="Sum"),
                        state_machine.metric_succeeded(period=PERIOD, statistic="Sum"),
                    ],
                    right=[
                        state_machine.metric_failed(period=PERIOD, statistic="Sum"),
                        state_machine.metric_timed_out(period=PERIOD, statistic="Sum"),
                    ],
                    width=24,
                )
            )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Indexer stream lag (ms)", left=[iterator_age], width=12),
            cloudwatch.GraphWidget(
                title="Indexer dead letters",
                left=[
                    dead_letter_queue.metric_approximate_number_of_messages_visible(
                        period=Duration.minutes(1), statistic="Maximum"
                    )
                ],
                width=12,
            ),
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=24),
        )

    def _alarm(self, name: str, metric: cloudwatch.IMetric, description: str, threshold: float = 0) -> None:
        self.alarms[name] = cloudwatch.Alarm(
            self,
            name.title().replace("-", ""),
            alarm_description=f"Memstack: {description}",
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
