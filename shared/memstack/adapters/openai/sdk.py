"""Importing the ``openai`` SDK without building the types it never uses.

``openai/__init__.py`` runs ``from . import types``, and ``openai._client`` reaches
``openai.types.responses`` (through ``openai.lib._tools``): the package ``__init__`` files of
``openai.types`` and its sub-packages re-export every generated request and response model, so one
``import openai`` defines several hundred pydantic models. Memstack calls two endpoints (embeddings and chat
completions), which need a few dozen of them. Measured on openai 3.57 (CPU of a fresh interpreter, a loaded
2-core build machine): ``import openai`` took 530-570 ms eagerly and 250-330 ms with the deferred
``__init__`` files alone. Since a plain re-export (``from .create_embedding_response import
CreateEmbeddingResponse as CreateEmbeddingResponse``) now loads its own module alone, importing the SDK,
building a client and reaching the embeddings types takes 170-180 ms against 240-360 ms (121 ``openai``
modules against 292). ``openai._client`` also imports ``openai.lib._client_auth``, whose package
``openai.lib`` runs ``from ._parsing import ...`` and ``from ._tools import ...``: the structured-output
parsing helpers, which import the chat completion types (and ``openai.lib._parsing``'s own ``__init__``
imports them again for the embeddings resource's ``openai.lib._parsing._embeddings``). Memstack never parses
structured output, so ``openai.lib`` and its sub-packages are deferred too: the first request's
``import openai`` then skips the chat completion types (``benchmarks/cold_start_profile.py``: 20-30 ms of
the ~80 ms the SDK's import costs there). ``benchmarks/cold_start.py`` shows the effect on a function's
first request.

``install`` (called by the deployed functions' composition root, ``bootstrap.memory_from_env``, before the
SDK's first import; never in a library user's process) gives every *package* under ``openai.types`` and
``openai.lib`` a deferred ``__init__`` (``memstack.deferred_init``): its ``__init__.py`` runs on the first access to a name
that is neither one of its sub-modules nor a plain re-export (``openai.types.Batch`` does;
``openai.types.CreateEmbeddingResponse`` loads ``openai.types.create_embedding_response`` alone). Every
name stays reachable and means what it means eagerly; if ``openai`` was already imported (by the host
application) nothing changes.
"""

from __future__ import annotations

import sys

from memstack.deferred_init import defer, deferred_packages

__all__ = ["LAZY_PACKAGES", "TOP_PACKAGE", "install"]

LAZY_PACKAGES = ("openai.types", "openai.lib")
"""The packages (each with its sub-packages) whose ``__init__`` runs on first use of a re-exported name."""

TOP_PACKAGE = "openai"
"""The SDK's own package, deferred alone (not its sub-packages): ``openai/__init__.py`` re-exports the
clients and errors the adapter uses (``openai.OpenAI``, ``openai.APIStatusError``: each loads its own
module) and also builds what the adapter never uses — the Azure, Bedrock and Vertex clients and their auth
(``openai.lib.azure``, ``openai.providers``, ``openai.auth``), the module-level client (``openai.api_key =``
usage), the computer-use and streaming exports. Measured in a cold function's first request (9 fresh
interpreters, load ~6): importing the SDK, building the client and reaching ``client.embeddings`` took 60 ms
of CPU (median) against 103 with that ``__init__`` run. Until a name that is not a plain re-export is used,
two side effects of the ``__init__`` wait too: ``OPENAI_LOG`` (the SDK's debug logging switch) is not read,
and the re-exported classes keep their defining module's ``__module__`` (``openai._exceptions``, not
``openai``), which only their ``repr`` shows."""


def install() -> bool:
    """Defer the SDK's package ``__init__`` and its type packages' (once per process) unless ``openai`` is
    already imported; call it right before ``import openai``.

    Returns:
        ``True`` if the deferral is in place for the SDK's first import (now or earlier).
    """
    packages = {*LAZY_PACKAGES, TOP_PACKAGE}
    if "openai" in sys.modules and not packages <= deferred_packages():
        return False
    return all([defer(TOP_PACKAGE)] + [defer(package, subpackages=True) for package in LAZY_PACKAGES])
