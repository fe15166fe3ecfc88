"""cdk-nag (AWS Solutions) and cfn-lint on the synthesized templates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.infra.conftest import Synth


def describe(findings: list[object]) -> str:
    return "\n".join(f"{f.id}: {str(f.entry.data)[:200]}" for f in findings)  # type: ignore[attr-defined]


def test_given_the_default_stack_then_cdk_nag_reports_no_unsuppressed_finding(synth: Synth) -> None:
    assert not synth.nag_errors, describe(synth.nag_errors)
    assert not synth.nag_warnings, describe(synth.nag_warnings)


def test_given_the_jwt_and_domain_options_then_cdk_nag_reports_no_unsuppressed_finding(
    synth_jwt_es: Synth,
) -> None:
    assert not synth_jwt_es.nag_errors, describe(synth_jwt_es.nag_errors)
    assert not synth_jwt_es.nag_warnings, describe(synth_jwt_es.nag_warnings)


def test_given_every_suppression_then_it_carries_a_specific_reason(synth: Synth, synth_jwt_es: Synth) -> None:
    for s in (synth, synth_jwt_es):
        for key, resource in s.json["Resources"].items():
            for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
                assert len(rule["reason"]) >= 40, f"{key} {rule['id']}: reason too thin"


def cfn_lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # fmt: skip
        [
            sys.executable,
            "-c",
            "import sys; from cfnlint.runner import main; sys.exit(main())",
            "--format",
            "parseable",
            "--",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("variant", ["default", "jwt_es"])
def test_given_the_synthesized_template_then_cfn_lint_passes(
    variant: str, synth: Synth, synth_jwt_es: Synth, tmp_path: Path
) -> None:
    path = tmp_path / "Memstack.template.json"
    path.write_text(json.dumps((synth if variant == "default" else synth_jwt_es).json, indent=1))
    result = cfn_lint(path)
    assert result.returncode == 0, result.stdout + result.stderr
