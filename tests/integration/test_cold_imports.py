"""What a Lambda function imports in its init phase (``import app``): only what its handler module needs at
import time. The SDKs, the tokenizer and the settings are imported when the first event uses them, so a
regression that pulls one back into the import (a cold start's init) fails here by name.

Each function is imported in a fresh interpreter behind tests/lambda_bundle.py's guard, so the development
venv's extra packages (``rich``, ``click``) cannot change what is seen. Figures: ``benchmarks/cold_start.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.lambda_bundle import bundle_only_prelude

ROOT = Path(__file__).resolve().parents[2]

NEVER_AT_IMPORT = (
    "openai",
    "httpx",
    "httpx2",
    "tiktoken",
    "opensearchpy",
    "requests",
    "boto3",
    "s3transfer",
    "pynamodb",
    "pydantic_settings",
    "aws_xray_sdk",
    "numpy",
    "memstack.memory",
    "memstack.config",
    "asyncio",
    "aws_lambda_powertools.event_handler.appsync",
    "aws_lambda_powertools.event_handler.bedrock_agent",
    "aws_lambda_powertools.event_handler.middlewares.openapi_validation",
    "aws_lambda_powertools.event_handler.openapi.dependant",
    "aws_lambda_powertools.event_handler.openapi.params",
    "aws_lambda_powertools.event_handler.openapi.compat",
)
"""Modules no handler imports at init: the clients' SDKs, the tokenizer, the settings' old loader, the core
and its option models (built with the ``Memory`` on the first event), the Powertools resolvers the functions
never use (``memstack.deferred_init.defer_for_functions``; AppSync's imports ``asyncio``), and Powertools'
OpenAPI validation (the routes' own models validate: ``memstack.api.validation``)."""

HTTP_ONLY = ("pydantic", "aws_lambda_powertools.event_handler", "memstack.api", "email", "csv")
"""What only the HTTP functions (``api``, ``context``) import at init: the resolver validates with pydantic,
whose plugin loader imports ``importlib.metadata`` (and with it ``email`` and ``csv``)."""


def after_import(function: str, code: str) -> str:
    """The last line ``code`` prints, run in a fresh interpreter right after ``import app`` of the function
    (behind the Lambda bundle's import guard)."""
    program = bundle_only_prelude() + (
        f"import sys\nsys.path.insert(0, {str(ROOT / 'functions' / function)!r})\nimport app\n{code}"
    )
    env = {"PYTHONPATH": str(ROOT / "shared"), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def imported(function: str) -> set[str]:
    return set(json.loads(after_import(function, "import json\nprint(json.dumps(sorted(sys.modules)))\n")))


@pytest.mark.parametrize("function", ["api", "context", "indexer", "observe", "reflect"])
def test_given_a_function_when_its_handler_is_imported_then_no_sdk_tokenizer_or_core_is(
    function: str,
) -> None:
    modules = imported(function)

    found = sorted(name for name in NEVER_AT_IMPORT if name in modules)
    assert not found, f"importing functions/{function}/app.py imports {found}"


@pytest.mark.parametrize("function", ["indexer", "observe", "reflect"])
def test_given_a_background_function_when_imported_then_neither_pydantic_nor_the_resolver_is(
    function: str,
) -> None:
    modules = imported(function)

    found = sorted(name for name in HTTP_ONLY if name in modules)
    assert not found, f"importing functions/{function}/app.py imports {found}"


def test_given_the_context_function_when_imported_then_only_the_context_route_module_is() -> None:
    modules = imported("context")

    others = sorted(
        m for m in modules if m.startswith("memstack.api.routes.") and m != "memstack.api.routes.context"
    )
    assert "memstack.api.routes.context" in modules
    assert not others, f"the context function imports the other routes' modules {others}"


def test_given_the_context_function_when_imported_then_the_other_routes_bodies_are_not_defined() -> None:
    modules = imported("context")

    assert "memstack.api.context_schemas" in modules
    assert "memstack.api.schemas" not in modules, "the context function defines every route's body models"


@pytest.mark.parametrize("function", ["api", "context"])
def test_given_an_http_function_when_imported_then_its_body_models_wait_for_their_first_use(
    function: str,
) -> None:
    built = after_import(
        function,
        "from memstack.api import schemas\n"
        "print([m.__name__ for m in (schemas.ContextBody, schemas.ContextOut, schemas.ThreadList)"
        " if m.__pydantic_complete__])\n",
    )

    assert built == "[]", "models built at import (pydantic defer_build)"


NEVER_ON_THE_FIRST_CONTEXT_REQUEST = (
    "boto3",
    "s3transfer",
    "tiktoken",
    "openai.types.responses.response",
    "openai.lib._parsing._completions",
    "openai.lib.azure",
    "openai.providers.bedrock",
    "openai._module_client",
    "openai.types.chat.chat_completion",
    "opensearchpy.helpers.document",
    "opensearchpy.helpers.search",
    "opensearchpy.helpers.actions",
    "opensearchpy._async.client",
    "opensearchpy.connection.http_requests",
    "opensearchpy.helpers.signer",
    "requests",
)
"""Modules a cold function's first context request does without: boto3 (clients come from one botocore
session), the tokenizer (no budget, no ``count_tokens``), the OpenAI SDK's response and chat completion types
with its structured-output parsing (``openai.lib``, deferred by ``adapters.openai.sdk``), the SDK's Azure,
Bedrock and module-level clients (``openai/__init__.py``, deferred there too), and opensearch-py's
query DSL and asyncio helpers (deferred by ``adapters.opensearch.sdk``), and ``requests`` with opensearch-py's
connection and signer built on it (the adapter signs for ``Urllib3HttpConnection`` itself,
``adapters.opensearch.client.SigV4Headers``)."""

_FIRST_REQUESTS = """
import json, sys
sys.path.insert(0, {function_dir!r})
event = json.loads(sys.argv[1])
import app
import botocore.loaders, botocore.session
clients, listings = [], []
_create, _list = botocore.session.Session.create_client, botocore.loaders.Loader.list_available_services
def create_client(self, service_name, *args, **kwargs):
    clients.append(service_name)
    return _create(self, service_name, *args, **kwargs)
def list_available_services(self, type_name):
    listings.append(type_name)
    return _list(self, type_name)
botocore.session.Session.create_client = create_client
botocore.loaders.Loader.list_available_services = list_available_services
first = app.handler(event, None)
assert first["statusCode"] == 200, first
files = sorted({{str(getattr(m, "__file__", None) or "") for m in list(sys.modules.values())}} - {{""}})
after_first = {{"modules": sorted(sys.modules), "files": files, "clients": list(clients), "listings": list(listings)}}
second = app.handler(event, None)
assert second["statusCode"] == 200, second
print(json.dumps(after_first | {{"second_clients": clients[len(after_first["clients"]):]}}))
"""


@pytest.fixture(scope="module")
def cold_world() -> Iterator[dict[str, str]]:
    """The deployment's default configuration (the OpenAI key read from Secrets Manager through the
    Parameters and Secrets extension) in the cold-start world of tests/cold_world.py (moto server, the
    OpenSearch double, a local embeddings endpoint, the extension's double)."""
    from tests.cold_world import request_environment

    with request_environment() as configs:
        yield configs["openai-secret"]


def first_context_request(function: str, env: dict[str, str]) -> dict[str, Any]:
    """What a fresh function's first context request left behind (behind the Lambda bundle's import guard):
    the modules imported, the botocore clients made and service listings loaded, and the clients the second
    request made."""
    from tests.cold_world import context_event

    program = bundle_only_prelude() + _FIRST_REQUESTS.format(function_dir=str(ROOT / "functions" / function))
    result = subprocess.run(
        [sys.executable, "-c", program, json.dumps(context_event())],
        capture_output=True,
        text=True,
        env=env | {"AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand"},
        cwd=ROOT,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


@pytest.fixture(scope="module")
def first_requests(cold_world: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {function: first_context_request(function, cold_world) for function in ("api", "context")}


@pytest.mark.parametrize("function", ["api", "context"])
def test_given_a_cold_function_when_its_first_context_request_runs_then_it_imports_only_what_it_uses(
    function: str, first_requests: dict[str, dict[str, Any]]
) -> None:
    modules = set(first_requests[function]["modules"])

    found = sorted(name for name in NEVER_ON_THE_FIRST_CONTEXT_REQUEST if name in modules)
    assert not found, f"the first context request of functions/{function} imports {found}"


def test_given_the_context_function_when_its_first_context_request_runs_then_the_other_routes_bodies_wait(
    first_requests: dict[str, dict[str, Any]],
) -> None:
    assert "memstack.api.schemas" not in first_requests["context"]["modules"], (
        "the context function's first request defines every route's body models"
    )


@pytest.mark.parametrize("function", ["api", "context"])
def test_given_a_cold_function_when_it_serves_two_context_requests_then_it_makes_each_client_it_needs_once(
    function: str, first_requests: dict[str, dict[str, Any]]
) -> None:
    run = first_requests[function]

    assert run["clients"] == ["dynamodb"], (
        "a context request needs DynamoDB only (no S3, no Step Functions; the key's secret comes from the "
        "Parameters and Secrets extension, not a secretsmanager client)"
    )
    assert run["second_clients"] == [], "the second request made clients again"


@pytest.mark.parametrize("function", ["api", "context"])
def test_given_a_cold_function_when_its_clients_are_made_then_botocore_lists_no_services(
    function: str, first_requests: dict[str, dict[str, Any]]
) -> None:
    assert first_requests[function]["listings"] == [], (
        "a client's model was loaded through botocore's listing of every service "
        "(memstack.adapters.aws_loader.ServiceLoader)"
    )


@pytest.mark.parametrize("function", ["api", "context"])
def test_given_the_bundle_bytecode_when_a_first_context_request_runs_then_every_module_it_imports_has_bytecode(
    function: str, first_requests: dict[str, dict[str, Any]]
) -> None:
    from infra.bundling import SOURCE_ONLY

    left_out = [path for path in first_requests[function]["files"] if SOURCE_ONLY.search(path)]

    assert not left_out, f"modules the first request imports are bundled without bytecode: {left_out[:5]}"
