"""Lambda code built locally with pip for the Lambda platform (Python 3.12, arm64) — no Docker.

Two kinds of asset:

* **One dependency layer per stack** (``dependencies_layer``): the Lambda dependencies
  (``infra/lambda-requirements.txt``, wheels for ``manylinux2014_aarch64`` / CPython 3.12) under ``python/``,
  installed once into a cache keyed by the requirements and shared by every function — one upload, not a
  copy of ~40 MB per function. Distributions the AWS path never imports (``EXCLUDED_DISTRIBUTIONS``) are
  removed from it.
* **Each function's code** (``function_code``): the ``memstack`` package from ``shared/memstack`` and the
  function's own folder (``functions/<name>/`` with ``app.py``, handler ``app.handler``) — a few hundred KB.

Asset hashes are computed from those inputs, so an unchanged asset is not uploaded again. With the CDK
context ``aws:cdk:bundling-stacks=[]`` (tests, ``make synth``) bundling is skipped and the source folders are
staged as they are.
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
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling, Stack
from aws_cdk import aws_lambda as lambda_
from cdk_nag import NagSuppressions
from constructs import Construct

REPO = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO / "infra" / "lambda-requirements.txt"
LIBRARY = REPO / "shared" / "memstack"
CACHE = REPO / ".cdk-bundle-cache"
LAYER_DIR = REPO / "infra" / "layer"
"""The dependency layer's source folder (staged as it is when bundling is skipped)."""
LAYER_ID = "MemstackDependencies"

EXCLUDED_DISTRIBUTIONS = ("opensearch-protobufs", "grpcio", "protobuf")
"""Installed as opensearch-py 3.x's requirements for its gRPC transport, which Memstack does not use: its REST
client never imports them (tests/infra/test_lambda_requirements.py imports the AWS path without them). ~20 MB
unzipped."""

PLATFORM = "manylinux2014_aarch64"
PYTHON_VERSION = "3.12"
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64

_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache")

_LIBRARY_IGNORED = shutil.ignore_patterns(
    "__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache", "integrations"
)
"""The agent-framework integrations (optional extras: Strands, the Agents SDK, MCP) never run in a function."""


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


def _normalized(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def drop_distributions(root: Path, names: tuple[str, ...] = EXCLUDED_DISTRIBUTIONS) -> list[str]:
    """Remove the installed distributions ``names`` from the pip ``--target`` folder ``root``: every file
    their ``RECORD`` lists, their ``.dist-info``, and the folders left empty.

    Returns:
        The distributions removed (normalised names), in the order found.
    """
    wanted = {_normalized(n) for n in names}
    base = root.resolve()
    removed = []
    for info in sorted(root.glob("*.dist-info")):
        name = _normalized(info.name[: -len(".dist-info")].rsplit("-", 1)[0])
        if name not in wanted:
            continue
        record = info / "RECORD"
        folders: set[Path] = set()
        for line in record.read_text().splitlines() if record.is_file() else ():
            path = (root / line.split(",")[0]).resolve()
            if path.is_relative_to(base) and path.is_file():
                path.unlink()
                folders.update(p for p in path.parents if p.is_relative_to(base) and p != base)
        shutil.rmtree(info, ignore_errors=True)
        for folder in sorted(folders, key=lambda p: -len(p.parts)):  # deepest first
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        removed.append(name)
    return removed


def dependencies_key(requirements: Path = REQUIREMENTS) -> str:
    """SHA-256 over what decides the dependency folder: the requirements, the platform, the exclusions."""
    platform = f"{PLATFORM}/{PYTHON_VERSION}/{','.join(EXCLUDED_DISTRIBUTIONS)}"
    return hashlib.sha256(requirements.read_bytes() + platform.encode()).hexdigest()


def dependencies(requirements: Path = REQUIREMENTS) -> Path:
    """The folder holding the Lambda dependencies, installed on first use (cached by requirements hash),
    without ``EXCLUDED_DISTRIBUTIONS``.

    Raises:
        subprocess.CalledProcessError: pip failed (e.g. a dependency without an aarch64 wheel).
    """
    key = dependencies_key(requirements)[:16]
    done = CACHE / f"deps-{key}"
    if done.is_dir():
        return done
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="deps-", dir=CACHE))
    try:
        subprocess.run(pip_command(work, requirements), check=True)
        drop_distributions(work)
        for junk in work.rglob("__pycache__"):
            shutil.rmtree(junk, ignore_errors=True)
        os.replace(work, done)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return done


@jsii.implements(ILocalBundling)
class PipBundling:
    """Bundles one function: ``memstack`` + the function's folder, into ``output_dir`` (its dependencies
    come from the stack's layer, ``dependencies_layer``)."""

    def __init__(self, function_dir: Path) -> None:
        self.function_dir = function_dir

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        out = Path(output_dir)
        shutil.copytree(LIBRARY, out / "memstack", dirs_exist_ok=True, ignore=_LIBRARY_IGNORED)
        shutil.copytree(self.function_dir, out, dirs_exist_ok=True, ignore=_IGNORED)
        return True


@jsii.implements(ILocalBundling)
class LayerBundling:
    """Bundles the dependency layer: the cached dependencies under ``python/`` (where the Python runtime
    looks for a layer's packages: ``/opt/python``)."""

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        shutil.copytree(dependencies(), Path(output_dir) / "python", dirs_exist_ok=True)
        return True


def _never_pulled() -> DockerImage:
    # The local bundlers always succeed or raise; CDK requires an image all the same.
    return DockerImage.from_registry("public.ecr.aws/sam/build-python3.12")


def function_code(function_dir: Path) -> lambda_.Code:
    """The Lambda code of the function in ``function_dir`` (``app.py`` there, handler ``app.handler``):
    ``memstack`` and the folder; give the function ``layers=[dependencies_layer(scope)]`` too."""
    return lambda_.Code.from_asset(
        str(function_dir),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=source_hash(LIBRARY, function_dir),
        bundling=BundlingOptions(image=_never_pulled(), local=PipBundling(function_dir)),
    )


def dependencies_layer(scope: Construct) -> lambda_.ILayerVersion:
    """The stack's one dependency layer (created on the first call, then the same object for every
    function of the stack): Python 3.12, arm64."""
    stack = Stack.of(scope)
    existing = stack.node.try_find_child(LAYER_ID)
    if isinstance(existing, lambda_.LayerVersion):
        return existing
    return lambda_.LayerVersion(
        stack,
        LAYER_ID,
        description="Memstack: the Lambda dependencies (infra/lambda-requirements.txt) for Python 3.12 arm64.",
        compatible_runtimes=[RUNTIME],
        compatible_architectures=[ARCHITECTURE],
        code=lambda_.Code.from_asset(
            str(LAYER_DIR),
            asset_hash_type=AssetHashType.CUSTOM,
            asset_hash=dependencies_key(),
            bundling=BundlingOptions(image=_never_pulled(), local=LayerBundling()),
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
