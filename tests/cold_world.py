"""The world of a cold function's first context request, on 127.0.0.1: DynamoDB, S3 and Secrets Manager on
a moto server, the OpenSearch test double (Serverless mode), an OpenAI-compatible embeddings endpoint and the
Parameters and Secrets Lambda Extension's double (tests/secrets_extension_double.py), with a short
conversation saved. Every endpoint but the extension's (plain HTTP on localhost, as on Lambda) is reached
over TLS through a keep-alive proxy (tests/tls_proxy.py), so the function loads its CA bundles and runs its
handshakes as it does against AWS and OpenAI. ``benchmarks/cold_start.py`` measures the functions' first request in it, and
tests/integration/test_cold_imports.py checks what that request imports and builds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from tests.json_http import JsonHandler
from tests.tls_proxy import LocalCertificate, tls_in_front

ROOT = Path(__file__).resolve().parents[1]
EMBEDDING_DIMENSIONS = 64
SECRET_NAME = "memstack/cold-start-openai"
CONFIGS = ("openai-secret", "openai-secret-client", "openai-key")
"""The first request's configurations: the deployment's default (the OpenAI key in Secrets Manager, read by
the first request through the Parameters and Secrets extension, as infra wires it on functions without
SnapStart), the same secret read with a Secrets Manager client (no extension: SnapStart functions, and the
fallback), and a key in the environment."""
SESSION_TOKEN = "testing-session"
"""The functions' ``AWS_SESSION_TOKEN`` (Lambda's credentials always have one; the extension checks it)."""


def function_env(tree: Path = ROOT) -> dict[str, str]:
    """This process's environment without Memstack's, OpenAI's, Python's and AWS's variables, with
    ``PYTHONPATH`` on ``tree``'s ``shared/``: what a function's process starts from."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("MEMSTACK_", "OPENAI_", "PYTHON", "AWS_"))
    }
    return env | {"PYTHONPATH": str(tree / "shared")}


class _Embeddings(JsonHandler):
    """An OpenAI-compatible ``POST /embeddings`` on 127.0.0.1: deterministic unit vectors, so the functions run
    their real OpenAI client without the network."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(texts):
            seed = hashlib.sha256(str(text).encode()).digest()
            vector = [(seed[k % 32] - 127.5) / 127.5 for k in range(EMBEDDING_DIMENSIONS)]
            data.append({"object": "embedding", "index": i, "embedding": vector})
        usage = {"prompt_tokens": 1, "total_tokens": 1}
        self.answer(200, {"object": "list", "data": data, "model": body.get("model"), "usage": usage})


@contextlib.contextmanager
def request_environment() -> Iterator[dict[str, dict[str, str]]]:
    """The first request's world, on 127.0.0.1 in this process (their CPU is not the function's):
    DynamoDB, S3 and Secrets Manager on a moto server, the OpenSearch test double (Serverless mode) and an
    OpenAI-compatible embeddings endpoint, each behind an HTTPS proxy whose certificate the function trusts
    through a bundle of certifi's roots plus it (``AWS_CA_BUNDLE``, ``SSL_CERT_FILE``), with the thread
    ``t-cold`` of ``r-cold`` saved (``_seed``).

    Yields:
        The function's environment per configuration of ``CONFIGS``.
    """
    import boto3
    from moto.server import ThreadedMotoServer

    from tests.opensearch_double import OpenSearchDouble
    from tests.secrets_extension_double import SecretsExtensionDouble

    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    embeddings = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    threading.Thread(target=embeddings.serve_forever, daemon=True).start()
    try:
        with contextlib.ExitStack() as stack:
            double = stack.enter_context(OpenSearchDouble("serverless"))
            host, port = moto.get_host_and_port()
            moto_url = f"http://{host}:{port}"
            certificate = LocalCertificate(Path(stack.enter_context(tempfile.TemporaryDirectory())))
            aws_url = stack.enter_context(tls_in_front(port, certificate))
            opensearch_url = stack.enter_context(tls_in_front(urlparse(double.url).port or 0, certificate))
            openai_url = stack.enter_context(tls_in_front(embeddings.server_address[1], certificate))
            env = function_env() | {
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_SESSION_TOKEN": SESSION_TOKEN,
                "AWS_REGION": "us-east-1",
                # every endpoint over TLS, verified against certifi's roots plus the local certificate:
                # botocore and the OpenSearch adapter read AWS_CA_BUNDLE, the OpenAI SDK's httpx SSL_CERT_FILE
                "AWS_CA_BUNDLE": str(certificate.bundle),
                "SSL_CERT_FILE": str(certificate.bundle),
                "AWS_ENDPOINT_URL_SECRETS_MANAGER": aws_url,
                "MEMSTACK_BACKEND": "aws",
                "MEMSTACK_TABLE": "memstack-cold",
                "MEMSTACK_BUCKET": "memstack-cold-bodies",
                "MEMSTACK_DYNAMODB_ENDPOINT_URL": aws_url,
                "MEMSTACK_S3_ENDPOINT_URL": aws_url,
                "MEMSTACK_OPENSEARCH_ENDPOINT": opensearch_url,
                "MEMSTACK_OPENSEARCH_SERVICE": "aoss",
                "MEMSTACK_EMBEDDER": "openai",
                "MEMSTACK_OPENAI_API_KEY": "sk-local",
                "MEMSTACK_OPENAI_BASE_URL": openai_url,
                "MEMSTACK_EMBEDDING_DIMENSIONS": str(EMBEDDING_DIMENSIONS),
            }
            _seed(env)
            secrets = boto3.client(
                "secretsmanager",
                region_name="us-east-1",
                endpoint_url=moto_url,
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )
            arn = secrets.create_secret(Name=SECRET_NAME, SecretString="sk-local")["ARN"]
            env["MEMSTACK_INDEXING"] = "stream"  # as deployed
            with SecretsExtensionDouble(secrets.get_secret_value, token=SESSION_TOKEN) as extension:
                client = _without_key(env, arn)
                yield {
                    "openai-key": env,
                    "openai-secret": client | {"PARAMETERS_SECRETS_EXTENSION_HTTP_PORT": str(extension.port)},
                    "openai-secret-client": client,
                }
    finally:
        embeddings.shutdown()
        moto.stop()


def context_event() -> dict[str, Any]:
    """The API Gateway event of the measured request: ``POST /v1/threads/t-cold/context`` (history and
    hybrid recall over the seeded thread; ``count_tokens`` not set, as an agent's turn loop sends it)."""
    from tests.integration.events import api_event

    return api_event(
        "POST",
        "/v1/threads/t-cold/context",
        query={"resource_id": "r-cold"},
        body={"message": "What did I say about the garden?"},
    )


def _without_key(env: dict[str, str], secret_arn: str) -> dict[str, str]:
    """``env`` as the stack sets it with ``-c models=openai``: no key, the secret's ARN instead."""
    out = {k: v for k, v in env.items() if k != "MEMSTACK_OPENAI_API_KEY"}
    return out | {"MEMSTACK_OPENAI_API_KEY_SECRET_ARN": secret_arn}


def _seed(env: dict[str, str]) -> None:
    """Create the table, bucket and index, and save a short conversation (in a subprocess, as a deploy and
    earlier turns would)."""
    script = (
        "from memstack.bootstrap import build\n"
        "m = build()\n"
        "m.save_messages(thread_id='t-cold', resource_id='r-cold', messages=["
        "{'role': 'user' if i % 2 == 0 else 'assistant', 'content': f'turn {i}: the garden needs water'}"
        " for i in range(40)])\n"
        "m.close()\n"
    )
    subprocess.run(
        [sys.executable, "-c", script], check=True, env=env | {"MEMSTACK_CREATE_RESOURCES": "true"}, cwd=ROOT
    )
