"""``BedrockEmbedder``: the ``Embedder`` port over Amazon Bedrock ``InvokeModel``.

Two model families (Bedrock user guide, "Amazon Titan Text Embeddings" and "Cohere Embed" model
parameters):

* **Amazon Titan Text Embeddings v2** (``amazon.titan-embed-text-v2:0``): one text per request,
  ``{"inputText", "dimensions", "normalize": true, "embeddingTypes": ["float"]}``; ``dimensions`` 256, 512
  or 1024 (default 1024); at most 8,192 tokens or 50,000 characters per text. A batch is sent as
  concurrent requests (``concurrency``), since the model takes no batch. Queries and documents are
  embedded the same way (``symmetric``).
* **Cohere Embed** v3 (``cohere.embed-english-v3``, ``cohere.embed-multilingual-v3``: 1024-d) and v4
  (``cohere.embed-v4:0``: ``output_dimension`` 256, 512, 1024 or 1536, default 1536): up to 96 texts per
  request, ``{"texts", "input_type", "truncate": "END", "embedding_types": ["float"]}``, with
  ``input_type`` ``search_document`` for documents and ``search_query`` for queries (not ``symmetric``).
  A text over the model's input limit (v3: 2,048 characters) is embedded from its start (``truncate:
  END``); lower ``semantic_recall.chunk_chars`` to embed all of it.

Cross-region inference profile ids (``us.``, ``eu.``, ``apac.``, ``global.`` before the model id) are
accepted. Empty or whitespace-only texts are not sent and get a zero vector, as with ``OpenAIEmbedder``;
lone surrogates (not encodable as UTF-8) become U+FFFD, as there; every vector is L2-normalised here
whatever the model returned.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memstack.adapters.bedrock.connection import BedrockConnection
from memstack.adapters.openai.connection import default_sleep
from memstack.adapters.vectors import normalised
from memstack.errors import InvalidInput, Unavailable
from memstack.ports import Vector

__all__ = ["COHERE_BATCH", "DEFAULT_MODEL", "BedrockEmbedder", "model_family"]

DEFAULT_MODEL = "amazon.titan-embed-text-v2:0"
COHERE_BATCH = 96
"""Cohere Embed on Bedrock: at most 96 texts per request."""

_TITAN_DIMENSIONS = (256, 512, 1024)
_COHERE_V4_DIMENSIONS = (256, 512, 1024, 1536)
_SURROGATE = re.compile("[\ud800-\udfff]")
_GEO_PREFIXES = ("us.", "eu.", "apac.", "us-gov.", "jp.", "au.", "global.")


def base_model_id(model: str) -> str:
    """The foundation-model id of ``model``, without a cross-region inference profile's geography prefix."""
    for prefix in _GEO_PREFIXES:
        if model.startswith(prefix):
            return model[len(prefix) :]
    return model


def model_family(model: str) -> tuple[str, tuple[int, ...], int]:
    """``(family, allowed dimensions, default dimension)`` of a Bedrock embedding model id.

    Raises:
        InvalidInput: a model of neither supported family (field ``model``).
    """
    base = base_model_id(model)
    if base.startswith("amazon.titan-embed-text-v2"):
        return "titan", _TITAN_DIMENSIONS, 1024
    if base.startswith("cohere.embed-v4"):
        return "cohere", _COHERE_V4_DIMENSIONS, 1536
    if base.startswith(("cohere.embed-english-v3", "cohere.embed-multilingual-v3")):
        return "cohere", (1024,), 1024
    raise InvalidInput(
        f"Bedrock embedding model {model!r} is not supported: use amazon.titan-embed-text-v2:0, "
        "cohere.embed-english-v3, cohere.embed-multilingual-v3 or cohere.embed-v4:0",
        field="model",
    )


class BedrockEmbedder:
    """Embeddings from Amazon Bedrock (Titan Text Embeddings v2 or Cohere Embed); nothing is imported or
    connected until the first embedding.

    Attributes:
        model: the Bedrock model id (or inference profile id).
        model_id: ``"bedrock/<model>@<dimension>"``, e.g. ``"bedrock/amazon.titan-embed-text-v2:0@1024"``.
        dimension: length of every vector.
        symmetric: ``True`` for Titan; ``False`` for Cohere (queries use ``input_type=search_query``).
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        dimensions: int | None = None,
        region: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 4,
        concurrency: int = 8,
        client: Any | None = None,
        sleep: Callable[[float], None] = default_sleep,
    ) -> None:
        """Check the options; imports and connects nothing.

        Args:
            model: a Bedrock embedding model id (see the module docstring).
            dimensions: the output size: Titan v2 256/512/1024, Cohere v4 256/512/1024/1536, Cohere v3 1024;
                ``None`` is the model's default.
            region: the Bedrock region; ``None`` follows botocore's chain (``AWS_REGION``).
            timeout: seconds per request.
            max_retries: retries after the first attempt on throttling, model-not-ready, 5xx, timeouts.
            concurrency: Titan requests in flight at once for one batch (1-32).
            client: a ready ``bedrock-runtime`` client (tests: one under ``botocore.stub.Stubber``).
            sleep: the wait between attempts (tests inject a recorder).

        Raises:
            InvalidInput: an unsupported model, a dimension the model does not offer, or a bad number.
        """
        if not model:
            raise InvalidInput("model must be a non-empty string", field="model")
        family, allowed, default = model_family(model)
        if dimensions is not None and (isinstance(dimensions, bool) or dimensions not in allowed):
            raise InvalidInput(
                f"model {model!r} gives {', '.join(map(str, allowed))} dimensions, not {dimensions!r}",
                field="dimensions",
            )
        if not 1 <= concurrency <= 32:
            raise InvalidInput("concurrency must be between 1 and 32", field="concurrency")
        self._connection = BedrockConnection(
            region=region, timeout=timeout, max_retries=max_retries, client=client, sleep=sleep
        )
        self.model = model
        self._family = family
        self._dimensions = dimensions
        self.dimension: int = dimensions or default
        self.model_id: str = f"bedrock/{model}@{self.dimension}"
        self.symmetric: bool = family == "titan"
        self._concurrency = concurrency
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"BedrockEmbedder(model={self.model!r}, dimension={self.dimension}, region={self._connection.region!r})"

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """Embed texts as documents, in as few requests as the model allows.

        Returns:
            One L2-normalised vector of ``dimension`` floats per text, in input order (zeros for an empty
            or whitespace-only text, which is not sent).

        Raises:
            InvalidInput: access denied, unknown model (field ``model``) or a refused input (field ``texts``).
            Unavailable: throttling, model-not-ready, 5xx or timeouts outlasted the retries, quota exceeded,
                or the response was malformed.
        """
        return self._embed(texts, "search_document")

    def embed_query(self, text: str) -> Vector:
        """Embed a search query (Cohere: ``input_type=search_query``).

        Raises:
            InvalidInput, Unavailable: as ``embed_documents``.
        """
        return self._embed([text], "search_query")[0]

    def close(self) -> None:
        """Stop the request pool (a later embedding starts a new one)."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def _embed(self, texts: Sequence[str], input_type: str) -> list[Vector]:
        out: list[Vector] = [[0.0] * self.dimension for _ in texts]
        texts = [_SURROGATE.sub("\ufffd", text) for text in texts]
        wanted = [i for i, text in enumerate(texts) if text.strip()]
        if self._family == "cohere":
            for start in range(0, len(wanted), COHERE_BATCH):
                batch = wanted[start : start + COHERE_BATCH]
                vectors = self._cohere([texts[i] for i in batch], input_type)
                for i, vector in zip(batch, vectors, strict=True):
                    out[i] = vector
        elif len(wanted) == 1:
            out[wanted[0]] = self._titan(texts[wanted[0]])
        elif wanted:
            for i, vector in zip(
                wanted, self._executor().map(self._titan, [texts[i] for i in wanted]), strict=True
            ):
                out[i] = vector
        return out

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._concurrency, thread_name_prefix="bedrock-embed")
            return self._pool

    def _invoke(self, body: dict[str, Any]) -> dict[str, Any]:
        payload = json.dumps(body, ensure_ascii=False)
        response = self._connection.call(
            lambda client: client.invoke_model(
                modelId=self.model, body=payload, contentType="application/json", accept="application/json"
            ),
            what="embeddings",
            model=self.model,
            field="texts",
        )
        try:
            data = json.loads(response["body"].read())
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise Unavailable(
                f"Bedrock embeddings ({self.model}) returned an unusable response: {type(exc).__name__}"
            ) from None
        if not isinstance(data, dict):
            raise Unavailable(
                f"Bedrock embeddings ({self.model}) returned an unusable response: not an object"
            )
        return data

    def _titan(self, text: str) -> Vector:
        body: dict[str, Any] = {"inputText": text, "normalize": True, "embeddingTypes": ["float"]}
        body["dimensions"] = self.dimension
        data = self._invoke(body)
        by_type = data.get("embeddingsByType")
        raw = by_type.get("float") if isinstance(by_type, dict) else data.get("embedding")
        return self._checked([raw])[0]

    def _cohere(self, texts: list[str], input_type: str) -> list[Vector]:
        body: dict[str, Any] = {
            "texts": texts,
            "input_type": input_type,
            "truncate": "END",
            "embedding_types": ["float"],
        }
        if self._dimensions is not None and self._family == "cohere" and len(_allowed(self.model)) > 1:
            body["output_dimension"] = self._dimensions
        data = self._invoke(body)
        embeddings = data.get("embeddings")
        raw = embeddings.get("float") if isinstance(embeddings, dict) else embeddings
        if not isinstance(raw, list) or len(raw) != len(texts):
            got = len(raw) if isinstance(raw, list) else 0
            raise Unavailable(
                f"Bedrock embeddings ({self.model}) returned {got} vectors for {len(texts)} texts"
            )
        return self._checked(raw)

    def _checked(self, raw: Sequence[Any]) -> list[Vector]:
        out: list[Vector] = []
        for vector in raw:
            if not isinstance(vector, list) or len(vector) != self.dimension:
                raise Unavailable(
                    f"Bedrock embeddings ({self.model}) returned a vector of another size than {self.dimension}"
                )
            out.append(normalised(vector, f"Bedrock embeddings ({self.model})"))
        return out


def _allowed(model: str) -> tuple[int, ...]:
    return model_family(model)[1]
