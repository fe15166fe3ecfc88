"""Every module logs through ``logging.getLogger(__name__)``, so a log line names the module it came from and
``memstack.observability`` configures them all through the ``memstack`` parent."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LITERAL = re.compile(r"getLogger\(\s*[\"']([^\"']*)[\"']\s*\)")
ALLOWED = {
    "shared/memstack/__init__.py": {"memstack"},  # the library's parent logger gets its NullHandler
    "shared/memstack/adapters/opensearch/client.py": {"opensearch"},  # the client library's own logger
}


def test_given_the_library_and_functions_then_module_loggers_are_named_by_dunder_name() -> None:
    found = {}
    for path in [*ROOT.glob("shared/memstack/**/*.py"), *ROOT.glob("functions/**/*.py")]:
        rel = path.relative_to(ROOT).as_posix()
        names = set(LITERAL.findall(path.read_text())) - ALLOWED.get(rel, set())
        if names:
            found[rel] = sorted(names)
    assert not found, f"use logging.getLogger(__name__): {found}"
