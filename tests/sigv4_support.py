"""Checks a request the clients signed the way API Gateway does: recompute the SigV4 signature over what
was actually sent."""

from __future__ import annotations

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def expected_signature(request: httpx.Request, credentials: Credentials, region: str) -> str:
    """The ``execute-api`` signature of ``request`` (signed headers: host, content-type, x-amz-date,
    x-amz-security-token) at the ``X-Amz-Date`` it carries."""
    check = AWSRequest(
        method=request.method,
        url=str(request.url),
        data=request.content,
        headers={
            k: request.headers[k] for k in ("host", "content-type", "x-amz-date", "x-amz-security-token")
        },
    )
    check.context["timestamp"] = request.headers["X-Amz-Date"]
    signer = SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region)
    return str(signer.signature(signer.string_to_sign(check, signer.canonical_request(check)), check))
