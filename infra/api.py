"""API: the REST API in front of the functions.

Routes: the methods the ``context`` function serves (``memstack.api.app.served_routes("context")``, the
one source: today ``POST /v1/threads/{thread_id}/context``) on that function; everything else on ``api``
through proxy resources. API Gateway matches static path parts before variables and does not fall back
from a deeper resource to a shallower ``{proxy+}``, so each level that has a static child also has a proxy
of its own: ``/{proxy+}``, ``/v1/{proxy+}``, ``/v1/threads``, ``/v1/threads/{thread_id}``,
``/v1/threads/{thread_id}/{proxy+}``.

Auth: IAM (SigV4) on every method by default. ``auth=jwt``: a Cognito user pool authorizer (an imported
pool, or one this stack creates); the functions bind the caller's resource to a token claim.
Throttling on the stage, JSON access logs to a log group, X-Ray tracing, request-parameter validation.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from cdk_nag import NagSuppressions
from constructs import Construct

from infra.config import MemstackConfig
from memstack.api.app import served_routes

STAGE = "prod"


class Api(Construct):
    """The REST API.

    Args:
        api_function: serves every route but context; context_function: serves the context route.
        config: auth mode, user pool, throttling, execution logs.

    Attributes:
        rest_api, access_logs, authorizer (JWT mode), user_pool (JWT mode, created or imported).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        api_function: lambda_.IFunction,
        context_function: lambda_.IFunction,
        config: MemstackConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=logs.RetentionDays.THREE_MONTHS,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            description="Memstack: agent memory",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            cloud_watch_role=config.api_execution_logs,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE,
                throttling_rate_limit=config.throttle_rate_limit,
                throttling_burst_limit=config.throttle_burst_limit,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True, http_method=True, ip=True, protocol=True, request_time=True,
                    resource_path=True, response_length=True, status=True, user=True,
                ),
                tracing_enabled=True,
                metrics_enabled=True,
                logging_level=apigw.MethodLoggingLevel.ERROR if config.api_execution_logs else apigw.MethodLoggingLevel.OFF,
            ),
        )  # fmt: skip
        # Required path parameters are checked by API Gateway; bodies are validated by the functions
        # (pydantic), since no method has a request model — so body validation here checks nothing more.
        self.validator = self.rest_api.add_request_validator(
            "Validator", validate_request_parameters=True, validate_request_body=True
        )

        self.authorizer: apigw.CognitoUserPoolsAuthorizer | None = None
        self.user_pool: cognito.IUserPool | None = None
        if config.auth == "jwt":
            self.user_pool = self._user_pool(config)
            self.authorizer = apigw.CognitoUserPoolsAuthorizer(
                self, "JwtAuthorizer", cognito_user_pools=[self.user_pool]
            )

        api = apigw.LambdaIntegration(api_function, proxy=True, allow_test_invoke=False)
        context = apigw.LambdaIntegration(context_function, proxy=True, allow_test_invoke=False)
        root = self.rest_api.root
        self._any(root, api)
        self._any(root.add_resource("{proxy+}"), api, params=("proxy",))
        v1 = root.add_resource("v1")
        self._any(v1.add_resource("{proxy+}"), api, params=("proxy",))
        threads = v1.add_resource("threads")
        self._any(threads, api)
        thread = threads.add_resource("{thread_id}")
        self._any(thread, api, params=("thread_id",))
        self._any(thread.add_resource("{proxy+}"), api, params=("thread_id", "proxy"))
        for verb, path in served_routes("context"):
            params = tuple(part[1:-1] for part in path.split("/") if part.startswith("{"))
            self._method(root.resource_for_path(path), verb, context, params=params)

        if config.auth == "iam":
            NagSuppressions.add_resource_suppressions(
                self.rest_api,
                [
                    {
                        "id": "AwsSolutions-COG4",
                        "reason": "IAM (SigV4) authorization on every method: callers are the agents' backends with AWS credentials; the Cognito mode is -c auth=jwt.",
                    }
                ],
                apply_to_children=True,
            )
        NagSuppressions.add_resource_suppressions(
            self.rest_api,
            [
                {
                    "id": "AwsSolutions-APIG3",
                    "reason": "A WAF web ACL is an account-level choice (shared ACLs, cost); SigV4/JWT auth and stage throttling protect the API. Associate one after deploy if required.",
                },
                *(
                    []
                    if config.api_execution_logs
                    else [
                        {
                            "id": "AwsSolutions-APIG6",
                            "reason": "Access logs are on; execution logging needs the region-wide API Gateway CloudWatch role, which a stack should not take over silently (-c apiExecutionLogs=true creates it).",
                        }
                    ]
                ),
            ],
            apply_to_children=True,
        )
        if config.api_execution_logs:
            NagSuppressions.add_resource_suppressions(
                self.rest_api,
                [
                    {
                        "id": "AwsSolutions-IAM4",
                        "reason": "The API Gateway account role uses AmazonAPIGatewayPushToCloudWatchLogs, the AWS-documented policy for execution logs.",
                        "applies_to": [
                            "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs"
                        ],
                    }
                ],
                apply_to_children=True,
            )

    def _user_pool(self, config: MemstackConfig) -> cognito.IUserPool:
        if config.jwt_user_pool_arn:
            return cognito.UserPool.from_user_pool_arn(self, "UserPool", config.jwt_user_pool_arn)
        pool = cognito.UserPool(
            self,
            "UserPool",
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(email=True),
            password_policy=cognito.PasswordPolicy(
                min_length=12,
                require_digits=True,
                require_lowercase=True,
                require_uppercase=True,
                require_symbols=True,
            ),
            mfa=cognito.Mfa.OPTIONAL,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            removal_policy=RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY,
        )
        NagSuppressions.add_resource_suppressions(
            pool,
            [
                {
                    "id": "AwsSolutions-COG2",
                    "reason": "MFA is offered (TOTP) but not forced: the pool's users are often machine clients of agent backends.",
                },
                {
                    "id": "AwsSolutions-COG8",
                    "reason": "The Plus feature plan is a paid Cognito tier; the pool only issues tokens for the API's authorizer. Choose it on the pool when its threat protection is wanted.",
                },
                {
                    "id": "AwsSolutions-COG3",
                    "reason": "Cognito advanced security (threat protection) is a paid feature plan; enable it on the pool when the deployment needs it.",
                },
            ],
        )
        return pool

    def _method(
        self,
        resource: apigw.IResource,
        verb: str,
        integration: apigw.Integration,
        params: tuple[str, ...] = (),
    ) -> None:
        if self.authorizer is not None:
            auth: dict[str, object] = {
                "authorizer": self.authorizer,
                "authorization_type": apigw.AuthorizationType.COGNITO,
            }
        else:
            auth = {"authorization_type": apigw.AuthorizationType.IAM}
        resource.add_method(
            verb,
            integration,
            request_parameters={f"method.request.path.{p}": True for p in params},
            request_validator=self.validator,
            **auth,  # type: ignore[arg-type]
        )

    def _any(
        self, resource: apigw.IResource, integration: apigw.Integration, params: tuple[str, ...] = ()
    ) -> None:
        self._method(resource, "ANY", integration, params)
