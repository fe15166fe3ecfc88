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
from pathlib import Path

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
