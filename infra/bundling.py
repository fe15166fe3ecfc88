"""Lambda code built locally with pip for the Lambda platform (Python 3.12, arm64) — no Docker.

Each function's asset is: the Lambda dependencies (``infra/lambda-requirements.txt``, wheels for
``manylinux2014_aarch64`` / CPython 3.12, installed once into a cache keyed by the requirements and reused
by every function), the ``memstack`` package from ``shared/memstack``, and the function's own folder
(``functions/<name>/`` with ``app.py``, handler ``app.handler``).

The asset hash is computed from those inputs, so an unchanged function is not uploaded again. With the CDK
context ``aws:cdk:bundling-stacks=[]`` (tests, ``make synth``) bundling is skipped and the function's
folder is staged as it is.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from cdk_nag import NagSuppressions

REPO = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO / "infra" / "lambda-requirements.txt"
LIBRARY = REPO / "shared" / "memstack"
CACHE = REPO / ".cdk-bundle-cache"

PLATFORM = "manylinux2014_aarch64"
PYTHON_VERSION = "3.12"
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64

_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache")


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(
        p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )


def source_hash(*roots: Path) -> str:
    """SHA-256 over the relative paths and contents of every file under ``roots`` (``__pycache__`` left out)."""
    digest = hashlib.sha256()
    for root in roots:
        for path in _files(root):
            digest.update(str(path.relative_to(root.parent)).encode())
            digest.update(b"\0")
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


def pip_command(target: Path, requirements: Path = REQUIREMENTS) -> list[str]:
    """The pip command that installs the Lambda dependencies for the Lambda platform into ``target``."""
    return [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--platform", PLATFORM, "--implementation", "cp", "--python-version", PYTHON_VERSION,
        "--only-binary=:all:", "--target", str(target), "-r", str(requirements),
    ]  # fmt: skip


def dependencies(requirements: Path = REQUIREMENTS) -> Path:
    """The folder holding the Lambda dependencies, installed on first use (cached by requirements hash).

    Raises:
        subprocess.CalledProcessError: pip failed (e.g. a dependency without an aarch64 wheel).
    """
    key = hashlib.sha256(requirements.read_bytes() + f"{PLATFORM}/{PYTHON_VERSION}".encode()).hexdigest()[:16]
    done = CACHE / f"deps-{key}"
    if done.is_dir():
        return done
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="deps-", dir=CACHE))
    try:
        subprocess.run(pip_command(work, requirements), check=True)
        for junk in work.rglob("__pycache__"):
            shutil.rmtree(junk, ignore_errors=True)
        os.replace(work, done)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return done


@jsii.implements(ILocalBundling)
class PipBundling:
    """Bundles one function: dependencies + ``memstack`` + the function's folder, into ``output_dir``."""

    def __init__(self, function_dir: Path) -> None:
        self.function_dir = function_dir

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        out = Path(output_dir)
        shutil.copytree(dependencies(), out, dirs_exist_ok=True)
        shutil.copytree(LIBRARY, out / "memstack", dirs_exist_ok=True, ignore=_IGNORED)
        shutil.copytree(self.function_dir, out, dirs_exist_ok=True, ignore=_IGNORED)
        return True


def function_code(function_dir: Path) -> lambda_.Code:
    """The Lambda code of the function in ``function_dir`` (``app.py`` there, handler ``app.handler``)."""
    return lambda_.Code.from_asset(
        str(function_dir),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=source_hash(REQUIREMENTS, LIBRARY, function_dir),
        bundling=BundlingOptions(
            # Never pulled: the local bundler always succeeds or raises. CDK requires an image.
            image=DockerImage.from_registry("public.ecr.aws/sam/build-python3.12"),
            local=PipBundling(function_dir),
        ),
    )


def lambda_runtime_suppression(function: lambda_.Function) -> None:
    """cdk-nag's L1 wants the newest Python runtime; Memstack targets 3.12 on purpose (DESIGN.md)."""
    NagSuppressions.add_resource_suppressions(
        function,
        [
            {
                "id": "AwsSolutions-L1",
                "reason": "Python 3.12 is the runtime Memstack is built and tested for (DESIGN.md, Serverless "
                "shape); the bundle's wheels are resolved for cp312. Move all functions together.",
            }
        ],
    )
