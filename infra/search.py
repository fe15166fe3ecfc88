"""Search: the OpenSearch index Memstack searches — a Serverless vector collection (``aoss``, the default)
or a managed OpenSearch Service domain (``es``) — and the custom resource that creates the index.

Serverless: a ``VECTORSEARCH`` collection with its encryption policy (AWS-owned key), network policy
(public endpoint: the functions are not in a VPC; every request is SigV4-signed) and data-access policy
(only the given roles: the functions read and write documents, the index set-up function creates and
describes indexes). A role also needs ``aoss:APIAccessAll`` on the collection in IAM; ``grant`` adds it.

The index is created at deploy time by a small function (``infra/index_setup``) that runs Memstack's own
``OpenSearchIndex`` start-up (create if missing, with the mapping of docs/opensearch.md; check the dimension
if present), so the mapping is defined once, in the library.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchserverless as aoss
from aws_cdk import aws_opensearchservice as opensearch
from cdk_nag import NagSuppressions
from constructs import Construct

from infra.bundling import (
    ARCHITECTURE,
    RUNTIME,
    dependencies_layer,
    function_code,
    lambda_runtime_suppression,
)
from infra.config import SearchService
from infra.environment import memstack_environment, powertools_environment

INDEX_SETUP_DIR = Path(__file__).resolve().parent / "index_setup"

DOCUMENT_PERMISSIONS = ("aoss:DescribeIndex", "aoss:ReadDocument", "aoss:WriteDocument")
"""What the functions may do on the collection's indexes (search, bulk index/delete)."""

INDEX_SETUP_PERMISSIONS = ("aoss:CreateIndex", "aoss:DescribeIndex")
"""What the index set-up function may do (``HEAD``/``PUT <index>``, ``GET <index>/_mapping``)."""


class Search(Construct):
    """The search backend and its index.

    Args:
        service: ``aoss`` (Serverless collection) or ``es`` (managed domain).
        principals: the roles that read and write documents (the functions); only they, and the index
            set-up function, are in the data-access policy.
        index_environment: ``MEMSTACK_*`` settings that name the index (embedder, model, dimensions,
            prefix) — the same the functions get, so set-up creates the index they use.
        collection_name: the Serverless collection's name (policies are named after it).
        standby_replicas: the collection's ``StandbyReplicas`` (``ENABLED`` when true, ``DISABLED`` when
            false); fixed by AWS at creation. Ignored for a managed domain.
        retain_data: RETAIN the collection or domain when the stack is deleted.

    Attributes:
        service, endpoint (URL with scheme), index (the custom resource; ``IndexName`` attribute).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        service: SearchService,
        principals: Sequence[iam.IRole],
        index_environment: dict[str, str],
        collection_name: str = "memstack",
        standby_replicas: bool = True,
        retain_data: bool = True,
        log_level: str = "INFO",
    ) -> None:
        super().__init__(scope, construct_id)
        self.service: SearchService = service
        removal = RemovalPolicy.RETAIN if retain_data else RemovalPolicy.DESTROY

        setup_logs = logs.LogGroup(
            self,
            "IndexSetupLogs",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )
        setup_role = iam.Role(
            self,
            "IndexSetupRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Memstack index set-up function",
        )
        setup_role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[setup_logs.log_group_arn]
            )
        )
        self.setup_function = lambda_.Function(
            self,
            "IndexSetup",
            description="Memstack: creates the OpenSearch index at deploy time (CloudFormation custom resource).",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler="app.handler",
            code=function_code(INDEX_SETUP_DIR),
            layers=[dependencies_layer(self)],
            memory_size=512,
            timeout=Duration.minutes(10),
            log_group=setup_logs,
            role=setup_role,
            environment={
                **index_environment,
                **powertools_environment(service="memstack-index-setup", log_level=log_level),
            },
        )
        lambda_runtime_suppression(self.setup_function)

        if service == "aoss":
            self._collection(collection_name, standby_replicas, principals, setup_role, removal)
        else:
            self._domain(principals, setup_role, removal)
        for name, value in memstack_environment(
            opensearch_endpoint=self.endpoint, opensearch_service=service
        ).items():
            self.setup_function.add_environment(name, value)

        self.index = CustomResource(
            self,
            "Index",
            service_token=self.setup_function.function_arn,
            resource_type="Custom::MemstackIndex",
            properties={"Endpoint": self.endpoint, "Service": service, **index_environment},
        )
        for dependency in self._policies:
            self.index.node.add_dependency(dependency)

    # -------------------------------------------------------------------------------------- Serverless

    def _collection(
        self,
        name: str,
        standby_replicas: bool,
        principals: Sequence[iam.IRole],
        setup_role: iam.IRole,
        removal: RemovalPolicy,
    ) -> None:
        stack = Stack.of(self)
        collection_resource = [f"collection/{name}"]
        encryption = aoss.CfnSecurityPolicy(
            self,
            "EncryptionPolicy",
            name=f"{name}-enc",
            type="encryption",
            description="Memstack: encrypt the collection at rest (AWS-owned key).",
            policy=json.dumps(
                {
                    "Rules": [{"ResourceType": "collection", "Resource": collection_resource}],
                    "AWSOwnedKey": True,
                }
            ),
        )
        network = aoss.CfnSecurityPolicy(
            self,
            "NetworkPolicy",
            name=f"{name}-net",
            type="network",
            description="Memstack: the collection endpoint is reachable over HTTPS; every request is SigV4-signed and checked against the data-access policy.",
            policy=json.dumps(
                [
                    {
                        "Rules": [{"ResourceType": "collection", "Resource": collection_resource}],
                        "AllowFromPublic": True,
                    }
                ]
            ),
        )
        self.collection = aoss.CfnCollection(
            self,
            "Collection",
            name=name,
            type="VECTORSEARCH",
            description="Memstack: message chunks (k-NN + BM25).",
            # always written, so the template says which one a deployment has (AWS's default is ENABLED)
            standby_replicas="ENABLED" if standby_replicas else "DISABLED",
        )
        self.collection.node.add_dependency(encryption)
        self.collection.node.add_dependency(network)
        self.collection.apply_removal_policy(removal)
        index_resource = [f"index/{name}/*"]
        access = aoss.CfnAccessPolicy(
            self,
            "DataAccessPolicy",
            name=f"{name}-data",
            type="data",
            description="Memstack: the functions read and write documents; the index set-up function creates indexes.",
            policy=stack.to_json_string(
                [
                    {
                        "Description": "functions",
                        "Rules": [
                            {
                                "ResourceType": "index",
                                "Resource": index_resource,
                                "Permission": list(DOCUMENT_PERMISSIONS),
                            }
                        ],
                        "Principal": [role.role_arn for role in principals],
                    },
                    {
                        "Description": "index set-up",
                        "Rules": [
                            {
                                "ResourceType": "index",
                                "Resource": index_resource,
                                "Permission": list(INDEX_SETUP_PERMISSIONS),
                            }
                        ],
                        "Principal": [setup_role.role_arn],
                    },
                ]
            ),
        )
        self._policies: list[Construct] = [self.collection, access]
        self.endpoint: str = self.collection.attr_collection_endpoint
        for role in (*principals, setup_role):
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=["aoss:APIAccessAll"], resources=[self.collection.attr_arn])
            )

    # ---------------------------------------------------------------------------------- managed domain

    def _domain(self, principals: Sequence[iam.IRole], setup_role: iam.IRole, removal: RemovalPolicy) -> None:
        slow_logs = logs.LogGroup(
            self,
            "DomainSlowLogs",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )
        app_logs = logs.LogGroup(
            self,
            "DomainAppLogs",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.domain = opensearch.Domain(
            self,
            "Domain",
            version=opensearch.EngineVersion.OPENSEARCH_2_19,
            capacity=opensearch.CapacityConfig(
                data_nodes=2, data_node_instance_type="r7g.large.search", multi_az_with_standby_enabled=False
            ),
            zone_awareness=opensearch.ZoneAwarenessConfig(enabled=True, availability_zone_count=2),
            ebs=opensearch.EbsOptions(volume_size=20),
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True),
            node_to_node_encryption=True,
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2,
            logging=opensearch.LoggingOptions(
                slow_search_log_enabled=True,
                slow_search_log_group=slow_logs,
                slow_index_log_enabled=True,
                slow_index_log_group=slow_logs,
                app_log_enabled=True,
                app_log_group=app_logs,
            ),
            removal_policy=removal,
        )
        domain_arn = self.domain.domain_arn
        self.domain.add_access_policies(
            iam.PolicyStatement(
                principals=[iam.ArnPrincipal(r.role_arn) for r in (*principals, setup_role)],
                actions=["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost", "es:ESHttpPut", "es:ESHttpDelete"],
                resources=[f"{domain_arn}/*"],
            )
        )
        for role in principals:
            self.domain.grant_read_write(role)
        for action in ("es:ESHttpHead", "es:ESHttpGet", "es:ESHttpPut"):
            setup_role.add_to_principal_policy(
                iam.PolicyStatement(actions=[action], resources=[domain_arn, f"{domain_arn}/*"])
            )
        NagSuppressions.add_resource_suppressions(
            setup_role,
            [
                {
                    "id": "AwsSolutions-IAM5",
                    "reason": "HTTP actions on the domain's paths (<domain>/*): the index name is derived at deploy time from the embedding model.",
                    "applies_to": [{"regex": "/^Resource::<.*Domain.*\\.Arn>\\/\\*$/g"}],
                }
            ],
            apply_to_children=True,
        )
        # The domain's log publishing uses CDK's AwsCustomResource (a singleton function at the stack root).
        stack = Stack.of(self)
        NagSuppressions.add_resource_suppressions(
            self.domain,
            [
                {
                    "id": "AwsSolutions-IAM5",
                    "reason": "CloudWatch Logs resource policies (logs:PutResourcePolicy) have no resource-level permissions; CDK's log-publishing custom resource needs Resource '*'.",
                    "applies_to": ["Resource::*"],
                }
            ],
            apply_to_children=True,
        )
        for child in stack.node.children:
            if child.node.id.startswith("AWS679f53fac002430cb0da5b7982bd2287"):
                NagSuppressions.add_resource_suppressions(
                    child,
                    [
                        {
                            "id": "AwsSolutions-IAM4",
                            "reason": "CDK's AwsCustomResource singleton (the domain's log resource policy) runs with AWSLambdaBasicExecutionRole; it only writes its own logs.",
                            "applies_to": [
                                "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
                            ],
                        }
                    ],
                    apply_to_children=True,
                )
        self._policies = [self.domain]
        self.endpoint = "https://" + self.domain.domain_endpoint
        NagSuppressions.add_resource_suppressions(
            self.domain,
            [
                {
                    "id": "AwsSolutions-OS1",
                    "reason": "The functions run outside a VPC (no NAT cost, no ENI cold starts); access is SigV4 with the domain's IAM access policy naming only the functions' roles.",
                },
                {
                    "id": "AwsSolutions-OS3",
                    "reason": "Access is restricted by IAM principal (the functions' roles) instead of source IPs: Lambda has no fixed addresses outside a VPC.",
                },
                {
                    "id": "AwsSolutions-OS4",
                    "reason": "Two data nodes suit Memstack's index size; dedicated masters (3 more nodes) are a sizing choice for large domains, not a security control.",
                },
            ],
            apply_to_children=True,
        )
