"""Models: what the functions may call on Amazon Bedrock when the stack deploys with ``-c models=bedrock``.

Each function role may ``bedrock:InvokeModel`` (the IAM action behind both ``InvokeModel`` and
``Converse``; Bedrock user guide, "Converse API" prerequisites) on exactly the configured embedding and
chat models, and nothing else. A foundation model in the stack's region is one ARN. A cross-region
inference profile (``us.``, ``eu.``, ``apac.`` ... before the model id) needs the profile's ARN plus the
foundation model's ARN in each region the profile may route to; those regions are not listed in the
template, so that one ARN has a region wildcard (Bedrock user guide, "Prerequisites for inference
profiles").
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

from memstack.adapters.bedrock.embedder import base_model_id

INVOKE = ("bedrock:InvokeModel",)


def model_arns(model_ids: Iterable[str]) -> list[str]:
    """The ARNs ``bedrock:InvokeModel`` must name for these model or inference profile ids, de-duplicated,
    in order."""
    arns: list[str] = []
    for model in model_ids:
        base = base_model_id(model)
        if base == model:
            wanted = [f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}::foundation-model/{model}"]
        else:
            wanted = [
                f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}:{Aws.ACCOUNT_ID}:inference-profile/{model}",
                f"arn:{Aws.PARTITION}:bedrock:*::foundation-model/{base}",
            ]
        arns += [arn for arn in wanted if arn not in arns]
    return arns


def invoke_statement(model_ids: Iterable[str]) -> iam.PolicyStatement:
    """The one statement that lets a role call these models (``InvokeModel`` and ``Converse``)."""
    return iam.PolicyStatement(actions=list(INVOKE), resources=model_arns(model_ids))


INFERENCE_PROFILE_SUPPRESSION = {
    "regex": "/^Resource::arn:<AWS::Partition>:bedrock:\\*::foundation-model\\/.*$/g"
}
"""cdk-nag ``applies_to`` for the foundation-model ARN of a cross-region inference profile."""
