"""Amazon Bedrock adapters: an ``Embedder`` (Titan Text Embeddings v2, Cohere Embed) over ``InvokeModel``
and a ``ChatModel`` over ``Converse``, through ``boto3`` ``bedrock-runtime`` with IAM credentials.

Importing this package imports neither ``boto3`` nor ``botocore``: the client is built on the first
request.
"""

from __future__ import annotations

from memstack.adapters.bedrock.chat import BedrockChatModel
from memstack.adapters.bedrock.embedder import BedrockEmbedder

__all__ = ["BedrockChatModel", "BedrockEmbedder"]
