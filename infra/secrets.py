"""Secrets: the OpenAI key in Secrets Manager — created by the stack, or an existing one imported by ARN
or name. The functions get its ARN (``MEMSTACK_OPENAI_API_KEY_SECRET_ARN``) and read it on first use."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_secretsmanager as secretsmanager
from cdk_nag import NagSuppressions
from constructs import Construct


class Secrets(Construct):
    """The OpenAI key secret.

    Args:
        secret_arn / secret_name: import this existing secret (its plain string value is the key).
        retain_data: keep a created secret when the stack is deleted.

    Attributes:
        openai_key: the secret; created: whether this stack owns it.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        secret_arn: str | None = None,
        secret_name: str | None = None,
        retain_data: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        self.created = not (secret_arn or secret_name)
        self.openai_key: secretsmanager.ISecret
        if secret_arn:
            self.openai_key = secretsmanager.Secret.from_secret_complete_arn(self, "OpenAIKey", secret_arn)
        elif secret_name:
            self.openai_key = secretsmanager.Secret.from_secret_name_v2(self, "OpenAIKey", secret_name)
        else:
            secret = secretsmanager.Secret(
                self,
                "OpenAIKey",
                description="Memstack: the OpenAI API key (set its value after the first deploy; docs/deploy.md).",
                removal_policy=RemovalPolicy.RETAIN if retain_data else RemovalPolicy.DESTROY,
            )
            NagSuppressions.add_resource_suppressions(
                secret,
                [
                    {
                        "id": "AwsSolutions-SMG4",
                        "reason": "A third-party API key: it is rotated at OpenAI and then put here; no rotation Lambda can create one.",
                    }
                ],
            )
            self.openai_key = secret
