"""OpenAI adapters: an ``Embedder`` and a ``ChatModel`` over the ``openai`` SDK, for api.openai.com or any
OpenAI-compatible endpoint (``base_url``).

Importing this package imports neither ``openai`` nor ``httpx``: the SDK is loaded when the first request
is made, so ``import memstack`` stays light.
"""

from __future__ import annotations

from memstack.adapters.openai.chat import OpenAIChatModel
from memstack.adapters.openai.embedder import KNOWN_DIMENSIONS, OpenAIEmbedder

__all__ = ["KNOWN_DIMENSIONS", "OpenAIChatModel", "OpenAIEmbedder"]
