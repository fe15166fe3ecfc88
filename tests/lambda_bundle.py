"""The Lambda bundle's import world in a fresh interpreter: Python code that, run first, refuses any module of
a distribution outside infra/lambda-requirements.txt (and their requirements) or the standard library.

The development venv holds more than the bundle: ``httpx`` imports its command line (``click``, ``rich``,
``pygments``) when those are installed, which the bundle never has. Tests that check what the functions
import, and ``benchmarks/cold_start.py`` that times it, run behind this guard so they see the deployed
function's imports.
"""

from __future__ import annotations

import functools
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "infra" / "lambda-requirements.txt"


def distribution_names(requirements: list[str]) -> set[str]:
    """Normalised distribution names (``pydantic-settings``) of requirement lines (``pydantic_settings>=2``)."""
    return {
        re.split(r"[<>=!~\[; ]", r.strip(), maxsplit=1)[0].lower().replace("_", "-").replace(".", "-")
        for r in requirements
    }


def lambda_requirements() -> list[str]:
    """The requirement lines of infra/lambda-requirements.txt."""
    text = REQUIREMENTS.read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def bundle_modules() -> set[str]:
    """Top-level module names a function can import: the standard library, ``memstack``, the handler module
    ``app``, and the modules of the Lambda requirements and everything they require — minus
    ``infra.bundling.EXCLUDED_DISTRIBUTIONS`` (removed from the layer)."""
    import importlib.metadata
    import sys

    from infra.bundling import EXCLUDED_DISTRIBUTIONS

    excluded = distribution_names(list(EXCLUDED_DISTRIBUTIONS))
    allowed = set(sys.stdlib_module_names) | {"memstack", "app", "_distutils_hack", "_pytest"}
    pending, seen = sorted(distribution_names(lambda_requirements())), set()
    while pending:
        name = pending.pop()
        if name in seen or name.lower().replace("_", "-") in excluded:
            continue
        seen.add(name)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in dist.files or ():
            top = file.parts[0]
            if top.endswith(".py"):
                allowed.add(top[:-3])
            elif "." not in top and not top.endswith("dist-info"):
                allowed.add(top)
        pending += [next(iter(distribution_names([r]))) for r in dist.requires or () if "extra ==" not in r]
    return allowed


@functools.cache
def bundle_only_prelude() -> str:
    """Python source that installs a meta-path finder refusing (``ImportError``) every top-level module
    outside ``bundle_modules()``. Run it first in a fresh interpreter; it imports nothing itself (not even
    ``importlib.metadata``, whose ``email`` and ``csv`` a test may look for)."""
    allowed = sorted(bundle_modules())
    return textwrap.dedent(
        f"""
        import importlib.abc as _abc, sys as _sys
        _allowed = frozenset({allowed!r})
        class _RefuseOutsideBundle(_abc.MetaPathFinder):
            def find_spec(self, fullname, path, target=None):
                top = fullname.split(".")[0]
                if top not in _allowed and not top.startswith("_sysconfigdata"):
                    raise ImportError(f"{{fullname}} is not in the Lambda bundle")
                return None
        _sys.meta_path.insert(0, _RefuseOutsideBundle())
        del _abc
        """
    )
