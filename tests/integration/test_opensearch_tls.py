"""An OpenSearch domain or collection is an AWS endpoint: over HTTPS its certificate is verified against the CA
bundle botocore is configured with (``AWS_CA_BUNDLE``), as DynamoDB's and S3's are, so a network that re-signs
TLS needs one setting for every endpoint. The double runs behind a TLS proxy whose certificate only that bundle
holds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from botocore.credentials import Credentials

from memstack.adapters.opensearch.client import call, make_client
from memstack.errors import Unavailable
from tests.opensearch_double import OpenSearchDouble
from tests.tls_proxy import LocalCertificate, TlsProxy

CREDENTIALS = Credentials("AKIDEXAMPLE", "secret")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> LocalCertificate:
    return LocalCertificate(Path(tmp_path_factory.mktemp("tls")))


@pytest.fixture
def endpoint(certificate: LocalCertificate) -> Iterator[str]:
    """The serverless double's URL over TLS."""
    with OpenSearchDouble("serverless") as double:
        proxy = TlsProxy(urlparse(double.url).port or 0, certificate.server_context())
        try:
            yield f"https://127.0.0.1:{proxy.port}"
        finally:
            proxy.close()


@pytest.mark.parametrize("service", ["aoss", "es"])
def test_given_aws_ca_bundle_then_a_sigv4_endpoint_over_tls_is_verified_against_it(
    endpoint: str, certificate: LocalCertificate, service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_CA_BUNDLE", str(certificate.bundle))
    client = make_client(
        endpoint, service=service, region="us-east-1", credentials=CREDENTIALS, max_retries=0
    )

    assert call("index check", lambda: client.indices.exists(index="memstack-tls")) is False


def test_given_no_ca_bundle_then_an_unknown_certificate_is_refused_as_unavailable(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")  # no profile's ca_bundle either
    client = make_client(endpoint, service="aoss", region="us-east-1", credentials=CREDENTIALS, max_retries=0)

    with pytest.raises(Unavailable):
        call("index check", lambda: client.indices.exists(index="memstack-tls"))
