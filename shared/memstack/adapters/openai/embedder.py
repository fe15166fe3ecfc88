"""``OpenAIEmbedder``: the ``Embedder`` port over OpenAI's embeddings API (or any compatible endpoint).

Limits of the API (OpenAI API reference, "Create embeddings"): at most 2048 inputs per request, at most
8192 tokens per input, at most 300,000 tokens summed over one request, and no empty strings.

* Batching: a request carries at most ``batch_size`` (≤ 2048) texts and at most ``MAX_REQUEST_CHARS``
  characters. 150,000 characters keep a request under 300,000 tokens unless the text averages more than two
  tokens per character, which only runs of rare symbols do (English averages about four characters per
  token). A single text longer than that goes alone; one over 8192 tokens is refused by the API
  (``InvalidInput``) — callers chunk messages before embedding.
* Lone surrogates (not encodable as UTF-8, so not sendable) become U+FFFD, as in ``LocalEmbedder``.
* Empty texts: a text that is empty or only whitespace is not sent; its vector is all zeros. The search
  index accepts zero vectors and never returns them as vector hits, which is the honest answer for a text
  without content (``HashEmbedder`` gives zeros for such texts too).
* Vectors come back in input order: the response is sorted by each item's ``index``, since nothing in the
  API promises the ``data`` array's order. They are L2-normalised here (OpenAI's already are; compatible
  servers' may not be), as the port promises.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from memstack.adapters.openai.connection import OpenAIConnection, default_sleep
from memstack.adapters.vectors import normalised
from memstack.errors import InvalidInput, Unavailable
from memstack.ports import Vector

if TYPE_CHECKING:
    import openai

__all__ = ["KNOWN_DIMENSIONS", "MAX_BATCH", "MAX_REQUEST_CHARS", "OpenAIEmbedder"]

KNOWN_DIMENSIONS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
"""Native output size of OpenAI's embedding models (OpenAI embeddings guide)."""

_SHORTENABLE = ("text-embedding-3-small", "text-embedding-3-large")
"""Models that take the ``dimensions`` parameter (text-embedding-3 and later; ada-002 rejects it)."""

MAX_BATCH = 2048
"""OpenAI embeddings API: max 2048 inputs per request."""
MAX_REQUEST_CHARS = 150_000
"""Characters per request, to stay under the API's 300,000 tokens per request (see the module docstring)."""

_PROBE_TEXT = "dimension probe"
_SURROGATE = re.compile("[\ud800-\udfff]")


class OpenAIEmbedder:
    """Embeddings from an OpenAI (or OpenAI-compatible) endpoint.

    Nothing is imported or connected until the first embedding. The dimension of the known models
    (``KNOWN_DIMENSIONS``) or of an explicit ``dimensions`` is known without a request; for any other model
    it is learnt from the first response, and reading ``dimension`` or ``model_id`` before any embedding
    embeds one short probe text once (memoised). On Python 3.11, ``hasattr``/``isinstance(..., Embedder)``
    read the attributes too, so for such a model they can make that one request.

    Attributes:
        model_id: ``"openai/<model>@<dimension>"``, e.g. ``"openai/text-embedding-3-small@1536"``.
        dimension: length of every vector.
        symmetric: ``True``; queries and documents are embedded the same way.
    """

    symmetric: bool = True

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        dimensions: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 4,
        batch_size: int = MAX_BATCH,
        client: openai.OpenAI | None = None,
        sleep: Callable[[float], None] = default_sleep,
    ) -> None:
        """Check the options; imports and connects nothing.

        Args:
            model: the embedding model's name at the endpoint.
            dimensions: shorter output vectors (text-embedding-3 models; sent as the API's ``dimensions``).
                For an unknown model it is sent as well and also tells the size without a probe.
            api_key: the API key; required unless ``client`` is given. Not read from the environment here.
            base_url: API root of an OpenAI-compatible endpoint; ``None`` means ``https://api.openai.com/v1``.
            timeout: seconds per HTTP request.
            max_retries: retries after the first attempt on 429, 5xx, connection errors and timeouts.
            batch_size: texts per request, 1 to 2048.
            client: a ready ``openai.OpenAI`` client (built with ``max_retries=0``) to use instead.
            sleep: the wait between attempts (tests inject a recorder).

        Raises:
            InvalidInput: no key and no client, a bad number, ``dimensions`` on ada-002, or ``dimensions``
                above a known model's native size.
        """
        if not model:
            raise InvalidInput("model must be a non-empty string", field="model")
        if dimensions is not None:
            if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
                raise InvalidInput("dimensions must be a positive integer", field="dimensions")
            native = KNOWN_DIMENSIONS.get(model)
            if native is not None and model not in _SHORTENABLE:
                raise InvalidInput(f"model {model!r} does not take a dimensions option", field="dimensions")
            if native is not None and dimensions > native:
                raise InvalidInput(f"model {model!r} gives at most {native} dimensions", field="dimensions")
        if not 1 <= batch_size <= MAX_BATCH:
            raise InvalidInput(f"batch_size must be between 1 and {MAX_BATCH}", field="batch_size")
        self._connection = OpenAIConnection(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            client=client,
            sleep=sleep,
        )
        self.model = model
        self._dimensions = dimensions
        self._batch_size = batch_size
        self._dimension: int | None = dimensions or KNOWN_DIMENSIONS.get(model)
        self._probe_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, dimensions={self._dimensions}, base_url={self._connection.base_url!r})"

    @property
    def dimension(self) -> int:
        """Length of every vector; may embed one probe text (see the class docstring).

        Raises:
            Unavailable, InvalidInput: the probe failed (as ``embed_documents``).
        """
        if self._dimension is None:
            with self._probe_lock:
                if self._dimension is None:
                    self._learn(len(self._request([_PROBE_TEXT])[0]))
        assert self._dimension is not None
        return self._dimension

    @dimension.setter
    def dimension(self, value: int) -> None:
        raise AttributeError("dimension is fixed by the model")

    @property
    def model_id(self) -> str:
        """``"openai/<model>@<dimension>"``: names the model and dimension (part of the embedding-cache key)."""
        return f"openai/{self.model}@{self.dimension}"

    @model_id.setter
    def model_id(self, value: str) -> None:
        raise AttributeError("model_id is fixed by the model")

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """Embed texts, in as few requests as the API's limits allow (see the module docstring).

        Args:
            texts: the texts; an empty sequence returns ``[]`` without a request.

        Returns:
            One L2-normalised vector of ``dimension`` floats per text, in input order (all zeros for an empty
            or whitespace-only text).

        Raises:
            InvalidInput: the key was rejected (field ``api_key``), the model is unknown (field ``model``) or
                the API refused the input, e.g. a text over 8192 tokens (field ``texts``).
            Unavailable: throttling, 5xx or connection failures outlasted the retries, or the response
                was malformed.
        """
        out: list[Vector | None] = [None] * len(texts)
        wanted = [i for i, text in enumerate(texts) if text.strip()]
        for batch in _batches(wanted, texts, self._batch_size):
            vectors = self._request([_SURROGATE.sub("\ufffd", texts[i]) for i in batch])
            for i, vector in zip(batch, vectors, strict=True):
                out[i] = vector
        if len(wanted) < len(texts):
            zero = [0.0] * self.dimension
            out = [list(zero) if v is None else v for v in out]
        return [v for v in out if v is not None]

    def embed_query(self, text: str) -> Vector:
        """Embed a search query, the same way as a document (``symmetric``).

        Raises:
            InvalidInput, Unavailable: as ``embed_documents``.
        """
        return self.embed_documents([text])[0]

    def close(self) -> None:
        """Close the HTTP connection pool (a later embedding opens a new one)."""
        self._connection.close()

    def _request(self, inputs: list[str]) -> list[Vector]:
        """One embeddings request (with retries): vectors in ``inputs`` order, checked and normalised."""
        kwargs: dict[str, Any] = {"model": self.model, "input": inputs, "encoding_format": "float"}
        if self._dimensions is not None:
            kwargs["dimensions"] = self._dimensions
        response = self._connection.call(
            lambda client: client.embeddings.create(**kwargs),
            what="embeddings",
            model=self.model,
            field="texts",
        )
        try:  # the SDK does not validate responses: a compatible server may send anything
            items = sorted(response.data, key=lambda item: int(item.index))
            indexes = [int(item.index) for item in items]
            vectors = [normalised(item.embedding, f"OpenAI embeddings ({self.model})") for item in items]
        except (TypeError, ValueError, AttributeError) as exc:
            raise Unavailable(
                f"OpenAI embeddings ({self.model}) returned an unusable response: {type(exc).__name__}"
            ) from None
        if indexes != list(range(len(inputs))):
            raise Unavailable(
                f"OpenAI embeddings ({self.model}) returned {len(items)} vectors for {len(inputs)} texts"
            )
        if self._dimension is None:
            self._learn(len(vectors[0]))
        if any(len(v) != self._dimension for v in vectors):
            raise Unavailable(
                f"OpenAI embeddings ({self.model}) returned vectors of another size than {self._dimension}"
            )
        return vectors

    def _learn(self, size: int) -> None:
        if size < 1:
            raise Unavailable(f"OpenAI embeddings ({self.model}) returned an empty vector")
        self._dimension = size


def _batches(indexes: list[int], texts: Sequence[str], size: int) -> Iterator[list[int]]:
    """Consecutive groups of ``indexes``: at most ``size`` texts and ``MAX_REQUEST_CHARS`` characters each
    (a longer single text forms its own group)."""
    batch: list[int] = []
    chars = 0
    for i in indexes:
        n = len(texts[i])
        if batch and (len(batch) == size or chars + n > MAX_REQUEST_CHARS):
            yield batch
            batch, chars = [], 0
        batch.append(i)
        chars += n
    if batch:
        yield batch
