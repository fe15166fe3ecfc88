"""``MemstackStack``: composes the constructs, nothing more (each concern lives in its own module)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack, Tags
from constructs import Construct

from infra.api import Api
from infra.config import MemstackConfig
from infra.environment import memstack_environment
from infra.functions import FUNCTIONS_DIR, Functions
from infra.observability import Observability
from infra.observation import Observation
from infra.search import Search
from infra.secrets import Secrets
from infra.storage import Storage


class MemstackStack(Stack):
    """Memstack on AWS: storage, secrets, functions, search, API, the observation workflow, observability.

    Args:
        config: the deployment's choices; default: read from the CDK context (``MemstackConfig.from_context``).
        functions_dir: the handlers' folders (``functions/`` at the repository root).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: MemstackConfig | None = None,
        functions_dir: Path = FUNCTIONS_DIR,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        config = config if config is not None else MemstackConfig.from_context(self.node)
        self.config = config
        # CDK makes each function DependsOn its role next to the GetAtt of it; cfn-lint (and `sam validate
        # --lint`, which takes no config file) warns W3005 about the redundancy. Told in the template.
        self.template_options.metadata = {"cfn-lint": {"config": {"ignore_checks": ["W3005"]}}}
        for key, value in config.tags.items():
            Tags.of(self).add(key, value)

        self.storage = Storage(
            self, "Storage", retain_data=config.retain_data, message_ttl_seconds=config.message_ttl_seconds
        )
        # On Bedrock the functions' roles are the credentials: no key, no secret.
        self.secrets = (
            Secrets(
                self,
                "Secrets",
                secret_arn=config.openai_secret_arn,
                secret_name=config.openai_secret_name,
                retain_data=config.retain_data,
            )
            if config.models == "openai"
            else None
        )
        self.functions = Functions(
            self,
            "Functions",
            table=self.storage.table,
            bucket=self.storage.bucket,
            secret=self.secrets.openai_key if self.secrets is not None else None,
            config=config,
            functions_dir=functions_dir,
        )
        self.search = Search(
            self,
            "Search",
            service=config.search_service,
            principals=self.functions.roles,
            index_environment=memstack_environment(
                backend="aws",
                embedder=config.models,
                embedding_model=config.embedding_model_name,
                embedding_dimensions=config.embedding_dimensions,
            ),
            collection_name=config.collection_name,
            standby_replicas=config.standby_replicas,
            retain_data=config.retain_data,
            log_level=config.log_level,
        )
        self.functions.use_search(endpoint=self.search.endpoint, service=config.search_service)
        # The functions start after the index exists (their start-up only checks it).
        for function in self.functions.by_name.values():
            function.node.add_dependency(self.search.index)
        self.api = Api(
            self,
            "Api",
            api_function=self.functions.api_target,
            context_function=self.functions.context_target,
            config=config,
        )
        # After the functions and search: the state machine references observe/reflect; api, indexer and
        # sweep get its ARN (infra/observation.py explains why that has no cycle).
        self.observation = Observation(
            self,
            "Observation",
            observe_function=self.functions.observe,
            reflect_function=self.functions.reflect,
            sweep_function=self.functions.sweep,
            starters=[self.functions.api, self.functions.indexer],
            sweep_minutes=config.observation_sweep_minutes,
        )
        self.observability = Observability(
            self,
            "Observability",
            functions=self.functions.by_name,
            rest_api=self.api.rest_api,
            dead_letter_queue=self.functions.dead_letter_queue,
            indexer=self.functions.indexer,
            state_machine=self.observation.state_machine,
            alarm_topic_arn=config.alarm_topic_arn,
        )

        CfnOutput(self, "ApiUrl", value=self.api.rest_api.url)
        CfnOutput(self, "TableName", value=self.storage.table.table_name)
        CfnOutput(self, "BucketName", value=self.storage.bucket.bucket_name)
        CfnOutput(self, "SearchEndpoint", value=self.search.endpoint)
        if self.secrets is not None:
            CfnOutput(self, "OpenAIKeySecretArn", value=self.secrets.openai_key.secret_arn)
        CfnOutput(self, "IndexName", value=self.search.index.get_att_string("IndexName"))
        CfnOutput(self, "ObservationStateMachineArn", value=self.observation.state_machine.state_machine_arn)
        if self.api.user_pool is not None:
            CfnOutput(self, "UserPoolId", value=self.api.user_pool.user_pool_id)
