"""``docs/openapi.json`` describes what ``memstack serve`` does: schemathesis generates requests from the
committed document (a bounded number per operation, derandomized so a run is repeatable) and checks every
answer — no server error (5xx), a status the document declares, the declared content type and a body that
matches the declared schema (issue 13, item 15)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.e2e.serve_support import Served, running_serve

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = json.loads((ROOT / "docs" / "openapi.json").read_text())
EXAMPLES_PER_OPERATION = 20
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
"""The document's promises. Auth is not among them: ``memstack serve`` trusts ``resource_id`` (IAM is API
Gateway's job), so schemathesis's missing-header and ignored-auth checks do not apply."""

schema = schemathesis.openapi.from_dict(DOCUMENT)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("serve")
    with running_serve("--embedder", "hash", "--db", str(folder / "m.db"), cwd=folder) as server:
        yield server


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_given_generated_requests_when_served_then_every_answer_conforms_to_the_document(
    case: Any, served: Served
) -> None:
    case.call_and_validate(base_url=served.url, checks=CHECKS)
