#!/usr/bin/env python3
"""The CDK app: one ``MemstackStack`` (name from ``-c stackName=...``, default ``Memstack``), checked by
cdk-nag's AWS Solutions rules (findings printed; a report CSV in cdk.out). Context flags: docs/deploy.md."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]  # infra/ and memstack, also without `pip install -e .`

try:
    import aws_cdk  # noqa: F401
except ImportError:  # `python3 app.py` (cdk.json) outside the venv: run again with the repository's venv
    venv_python = ROOT / ".venv" / "bin" / "python"
    if venv_python.exists() and Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        os.execv(str(venv_python), [str(venv_python), *sys.argv])
    raise

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402
from infra.stack import MemstackStack  # noqa: E402


def _bundling_off() -> bool:
    """``-c bundle=false``: synthesize without bundling the functions (the CLI does not let users set the
    ``aws:cdk:bundling-stacks`` context themselves, so the app sets it after the CLI's)."""
    import json

    context = json.loads(os.environ.get("CDK_CONTEXT_JSON") or "{}")
    return str(context.get("bundle", "true")).strip().lower() in ("false", "0", "no", "off")


def main() -> None:
    app = cdk.App(post_cli_context={"aws:cdk:bundling-stacks": []} if _bundling_off() else None)
    name = app.node.try_get_context("stackName") or "Memstack"
    account, region = os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")
    env = cdk.Environment(account=account, region=region) if account and region else None
    MemstackStack(app, name, env=env, description="Memstack: agent memory as a serverless service")
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True, reports=True))
    app.synth()


if __name__ == "__main__":
    main()
