"""Importing opensearch-py without its query DSL and asyncio client.

``opensearchpy/__init__.py`` re-exports the whole library: the synchronous client and transport that the
adapter uses, but also the query DSL (``helpers.document``, ``helpers.search``, ``helpers.field`` ...), the
metrics classes and, through ``opensearchpy.helpers``' own ``__init__``, the asyncio bulk helpers and
signer; and ``opensearchpy/connection/__init__.py`` imports every connection class, ``requests`` (69 modules)
for ``RequestsHttpConnection`` and the asyncio one. The adapter needs ``OpenSearch``, ``Urllib3HttpConnection``
and the exceptions: modules the client imports anyway or small ones. Measured on opensearch-py 3.2 in a cold
``context`` function's first request (``benchmarks/cold_start_profile.py``): the package's import took about
a third less CPU with the two ``__init__`` files deferred (85 ``opensearchpy`` modules imported against
about 40).

``install`` (called by the deployed functions' composition root, ``bootstrap.memory_from_env``, before the
library's first import; never in a library user's process) gives ``opensearchpy``, ``opensearchpy.helpers``
and ``opensearchpy.connection`` a deferred ``__init__`` (``memstack.deferred_init``): ``from opensearchpy import
OpenSearch`` loads ``opensearchpy.client`` alone, and any other name (``opensearchpy.Search``,
``opensearchpy.VERSION``) runs the package's ``__init__`` on first use, so every name stays reachable. Until
then two side effects of that ``__init__`` wait too: the ``NullHandler`` on the ``opensearch`` logger, which
``memstack.adapters.opensearch.client.make_client`` adds itself, and a ``warnings`` filter that shows each
``OpenSearchWarning`` (a plain ``Warning``: the cluster's ``Warning`` header) once per place, which is what
Python's default filters already do for it.
If ``opensearchpy`` was already imported (by the host application) nothing changes.
"""

from __future__ import annotations

import sys

from memstack.deferred_init import defer, deferred_packages

__all__ = ["LAZY_PACKAGES", "install"]

LAZY_PACKAGES = ("opensearchpy", "opensearchpy.helpers", "opensearchpy.connection")
"""The packages (each alone, not its sub-packages) whose ``__init__`` runs on first use of a name it does not
plainly re-export from a sub-module."""


def install() -> bool:
    """Defer ``LAZY_PACKAGES``' ``__init__`` files (once per process) unless ``opensearchpy`` is already
    imported; call it before ``import opensearchpy``.

    Returns:
        ``True`` if the deferral is in place for the library's first import (now or earlier).
    """
    if "opensearchpy" in sys.modules and not set(LAZY_PACKAGES) <= deferred_packages():
        return False
    return all([defer(package) for package in LAZY_PACKAGES])
