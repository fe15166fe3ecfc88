"""memstack.deferred_init: a deferred package's sub-modules and plain re-exports load alone, every other name
runs the package's ``__init__`` once, and each name is the object the eager import binds (each case in a
fresh interpreter, where the package is not imported yet)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(code: str, *, files: dict[str, str] | None = None, tmp_path: Path | None = None) -> str:
    path = [str(ROOT / "shared")]
    if files:
        assert tmp_path is not None
        for name, text in files.items():
            target = tmp_path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(text))
        path.append(str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": ":".join(path), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


PACKAGE = {
    "pkg/__init__.py": """
        import sys
        from pkg.light import Light
        from .heavy import Heavy as Renamed
        from pkg.light import twice
        from pkg.heavy import twice
        sys.modules["pkg"].INIT_RAN = True
        ASSIGNED = "assigned"
    """,
    "pkg/light.py": "class Light: ...\ntwice = 'light'\n",
    "pkg/heavy.py": "class Heavy: ...\ntwice = 'heavy'\n",
}


def test_given_a_deferred_package_when_a_plain_re_export_is_used_then_only_its_module_loads(
    tmp_path: Path,
) -> None:
    out = run(
        """
        import sys
        from memstack.deferred_init import defer
        assert defer("pkg")
        from pkg import Light
        import pkg.light
        print(Light is pkg.light.Light, "pkg.heavy" in sys.modules, "INIT_RAN" in vars(sys.modules["pkg"]))
        """,
        files=PACKAGE,
        tmp_path=tmp_path,
    )
    assert out == "True False False"


def test_given_a_deferred_package_when_another_name_is_used_then_its_init_runs_once(tmp_path: Path) -> None:
    out = run(
        """
        import sys
        from memstack.deferred_init import defer
        defer("pkg")
        import pkg.light  # a sub-module first: the package's __init__ waits
        print("INIT_RAN" in vars(sys.modules["pkg"]))
        import pkg
        print(pkg.ASSIGNED, pkg.INIT_RAN, pkg.twice, pkg.Renamed.__name__, pkg.Light is pkg.light.Light)
        """,
        files=PACKAGE,
        tmp_path=tmp_path,
    )
    assert out.splitlines() == ["False", "assigned True heavy Heavy True"]


def test_given_a_name_bound_twice_by_the_init_when_used_then_the_init_decides(tmp_path: Path) -> None:
    out = run(
        """
        from memstack.deferred_init import defer
        defer("pkg")
        import pkg
        print(pkg.twice, getattr(pkg, "INIT_RAN", False))
        """,
        files=PACKAGE,
        tmp_path=tmp_path,
    )
    assert out == "heavy True", "a re-export the __init__ binds twice must take the eager import's value"


def test_given_an_imported_package_when_deferred_then_nothing_changes(tmp_path: Path) -> None:
    out = run(
        """
        import pkg
        from memstack.deferred_init import defer, deferred_packages
        print(defer("pkg"), sorted(deferred_packages()), pkg.INIT_RAN)
        """,
        files=PACKAGE,
        tmp_path=tmp_path,
    )
    assert out == "False [] True"


def test_given_the_functions_deferral_when_the_resolver_is_imported_then_no_other_resolver_is() -> None:
    out = run(
        """
        import sys
        from memstack.deferred_init import defer_for_functions
        defer_for_functions()
        from memstack.api import create_app
        import aws_lambda_powertools.event_handler as handler
        from aws_lambda_powertools.event_handler.api_gateway import APIGatewayRestResolver
        unused = sorted(m for m in ("asyncio", "aws_lambda_powertools.event_handler.appsync") if m in sys.modules)
        print(unused, handler.APIGatewayRestResolver is APIGatewayRestResolver)
        print(handler.AppSyncResolver.__module__)  # a resolver the functions never use: on first use
        """
    )
    assert out.splitlines() == ["[] True", "aws_lambda_powertools.event_handler.appsync"]
