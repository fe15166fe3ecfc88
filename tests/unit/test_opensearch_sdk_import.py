"""opensearch-py imported through memstack.adapters.opensearch.sdk: the package's and its helpers' ``__init__``
files (the query DSL, the asyncio helpers) run on first use only, and every name stays reachable (each case
in a fresh interpreter, where ``opensearchpy`` is not imported yet)."""

from __future__ import annotations

from tests.fresh_interpreter import run_fresh as run


def test_given_the_finder_when_a_sigv4_client_is_built_then_the_dsl_and_async_helpers_are_not() -> None:
    out = run(
        """
        import sys
        from memstack.adapters.opensearch.sdk import install
        install()  # as a deployed function's memory_from_env does
        from memstack.adapters.opensearch import make_client
        from memstack.adapters.opensearch.client import call
        make_client("https://search.example:443", service="aoss", region="us-east-1", credentials=object())
        import opensearchpy.exceptions
        loaded = [m for m in ("opensearchpy.helpers.document", "opensearchpy.helpers.search",
                              "opensearchpy.helpers.actions", "opensearchpy._async.client") if m in sys.modules]
        print(loaded)
        """
    )
    assert out == "[]", "building the client ran opensearchpy's __init__ (query DSL, asyncio helpers)"


def test_given_the_finder_then_every_name_resolves_as_without_it() -> None:
    out = run(
        """
        import logging
        from memstack.adapters.opensearch.sdk import install
        assert install()
        import opensearchpy
        from opensearchpy import OpenSearch, RequestsAWSV4SignerAuth, RequestsHttpConnection
        from opensearchpy.client import OpenSearch as ClientOpenSearch
        from opensearchpy.helpers.signer import RequestsAWSV4SignerAuth as Signer
        assert OpenSearch is ClientOpenSearch and RequestsAWSV4SignerAuth is Signer
        assert RequestsHttpConnection.__module__ == "opensearchpy.connection.http_requests"
        assert opensearchpy.Search.__module__ == "opensearchpy.helpers.search"  # the package's own, on use
        assert opensearchpy.VERSION[0] >= 2
        handlers = logging.getLogger("opensearch").handlers
        assert any(isinstance(h, logging.NullHandler) for h in handlers)  # the __init__ ran in the end
        print("ok")
        """
    )
    assert out == "ok"


def test_given_opensearchpy_already_imported_then_install_changes_nothing() -> None:
    out = run(
        """
        import sys
        import opensearchpy
        from memstack.adapters.opensearch.sdk import install
        print(install(), any(type(f).__name__ == "DeferredInitFinder" for f in sys.meta_path))
        """
    )
    assert out == "False False"
