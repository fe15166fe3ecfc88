"""Lambda code built locally with pip for the Lambda platform (Python 3.12, arm64) — no Docker.

Two kinds of asset:

* **One dependency layer per stack** (``dependencies_layer``): the Lambda dependencies
  (``infra/lambda-requirements.txt``, wheels for ``manylinux2014_aarch64`` / CPython 3.12) under ``python/``,
  installed once into a cache keyed by the requirements and shared by every function — one upload, not a
  copy of ~40 MB per function. Distributions the AWS path never imports (``EXCLUDED_DISTRIBUTIONS``) are
  removed from it.
* **Each function's code** (``function_code``): the ``memstack`` package from ``shared/memstack`` and the
  function's own folder (``functions/<name>/`` with ``app.py``, handler ``app.handler``) — a few hundred KB.

Both carry their modules' bytecode (``__pycache__/*.cpython-312.pyc``), compiled by a CPython 3.12 interpreter
(``bytecode_python``) in PEP 552's ``unchecked-hash`` mode. Lambda's ``/var/task`` and ``/opt`` are
read-only, so without it Python compiles every module it imports on every cold start and can cache none of
it: measured on a ``context`` function (``benchmarks/cold_start.py``, regime ``no-bytecode``), its import
took ~3.5x and its first request ~3.4x the CPU they take with the bytecode there (~560 and ~1,500 ms against
~160 and ~445 ms). ``unchecked-hash`` pycs are used without comparing the source's timestamp, which the zip's
two-second timestamps would not always match; importlib still names the source file in tracebacks.

Asset hashes are computed from those inputs, so an unchanged asset is not uploaded again. With the CDK
context ``aws:cdk:bundling-stacks=[]`` (tests, ``make synth``) bundling is skipped and the source folders are
staged as they are.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
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

BYTECODE_PYTHON_ENV = "MEMSTACK_BYTECODE_PYTHON"
"""The path of a CPython ``PYTHON_VERSION`` interpreter to compile the bundle's bytecode with; unset, one is
looked for on ``PATH`` (``python3.12``) and among pyenv's versions."""

SOURCE_ONLY = re.compile(
    r"/(opensearchpy/_async|pydantic/v1)/"
    r"|/openai/resources/(?!__init__\.py$|embeddings\.py$|chat/)"
    r"|/openai/types/(?!chat/|shared/|shared_params/|[^/]+\.py$|responses/(__init__|function_tool_param)\.py$)"
)
"""Modules left without bytecode (``re.search`` on a file's path): trees no function imports — opensearch-py's
asyncio client, pydantic's v1 API, the OpenAI SDK's resources and types of the endpoints Memstack never calls
(all but embeddings and chat completions) — whose ``.pyc`` would add ~5 MB to every function for nothing; if
one is ever imported, Python compiles it then (tests/integration/test_cold_imports.py checks that nothing a
first context request imports is among them)."""

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


def dependencies_key(requirements: Path = REQUIREMENTS, *, bytecode: bool = True) -> str:
    """SHA-256 over what decides the dependency folder: the requirements, the platform, the exclusions and
    whether it holds bytecode."""
    platform = f"{PLATFORM}/{PYTHON_VERSION}/{','.join(EXCLUDED_DISTRIBUTIONS)}"
    platform += f"/unchecked-hash-pyc/{SOURCE_ONLY.pattern}" if bytecode else "/source-only"
    return hashlib.sha256(requirements.read_bytes() + platform.encode()).hexdigest()


def _python_version(python: str) -> str | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2], sys.implementation.name)"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    version, _, implementation = out.stdout.strip().partition(" ")
    return version if out.returncode == 0 and implementation == "cpython" else None


def bytecode_python() -> str | None:
    """A CPython ``PYTHON_VERSION`` interpreter (the Lambda runtime's minor version: bytecode is specific to
    it) to compile the bundle's modules with: ``MEMSTACK_BYTECODE_PYTHON``, else ``python3.12`` on ``PATH``,
    else the newest pyenv ``3.12.*``; ``None`` when none of them runs as CPython 3.12. Looked for once per
    process and ``MEMSTACK_BYTECODE_PYTHON`` value."""
    return _find_bytecode_python(os.environ.get(BYTECODE_PYTHON_ENV))


@functools.cache
def _find_bytecode_python(named: str | None) -> str | None:
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = sorted(
        pyenv.glob(f"{PYTHON_VERSION}.*/bin/python{PYTHON_VERSION}"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in p.parent.parent.name.split(".")],
        reverse=True,
    )
    for candidate in [named, shutil.which(f"python{PYTHON_VERSION}"), *map(str, found)]:
        if candidate and _python_version(candidate) == PYTHON_VERSION:
            return candidate
    return None


def compile_bytecode(folder: Path, python: str | None = None) -> bool:
    """Write ``__pycache__/<module>.cpython-312.pyc`` beside every module under ``folder`` but
    ``SOURCE_ONLY``'s, with ``python`` (default ``bytecode_python()``) in ``unchecked-hash`` mode (module
    docstring).

    Returns:
        ``False``, after a warning on stderr, when no CPython ``PYTHON_VERSION`` is found: the bundle then
        ships sources only and every cold start compiles what it imports.

    Raises:
        subprocess.CalledProcessError: a module of ``folder`` does not compile.
    """
    python = python or bytecode_python()
    if python is None:
        print(
            f"warning: no CPython {PYTHON_VERSION} found (set {BYTECODE_PYTHON_ENV}): {folder.name} is bundled "
            "without bytecode, so each cold start compiles every module it imports (~1 s of CPU more; "
            'docs/deploy.md "Cold start")',
            file=sys.stderr,
        )
        return False
    flags = ["-q", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", "-x", SOURCE_ONLY.pattern]
    subprocess.run([python, "-m", "compileall", *flags, str(folder)], check=True)
    return True


def dependencies(requirements: Path = REQUIREMENTS) -> Path:
    """The folder holding the Lambda dependencies, installed on first use (cached by requirements hash),
    without ``EXCLUDED_DISTRIBUTIONS``.

    Raises:
        subprocess.CalledProcessError: pip failed (e.g. a dependency without an aarch64 wheel).
    """
    python = bytecode_python()
    key = dependencies_key(requirements, bytecode=python is not None)[:16]
    done = CACHE / f"deps-{key}"
    if done.is_dir():
        return done
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="deps-", dir=CACHE))
    try:
        subprocess.run(pip_command(work, requirements), check=True)
        drop_distributions(work)
        for junk in work.rglob("__pycache__"):  # pip's, of this interpreter's version
            shutil.rmtree(junk, ignore_errors=True)
        compile_bytecode(work, python)
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
        compile_bytecode(out)
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


def code_hash(function_dir: Path) -> str:
    """The asset hash of a function's code: its sources (``source_hash``) and whether the bundle holds their
    bytecode, so a bundle that gains it is uploaded again."""
    bytecode = f"unchecked-hash-pyc/{SOURCE_ONLY.pattern}" if bytecode_python() is not None else "source-only"
    sources = source_hash(LIBRARY, function_dir)
    return hashlib.sha256(f"{sources}/{PYTHON_VERSION}/{bytecode}".encode()).hexdigest()


def function_code(function_dir: Path) -> lambda_.Code:
    """The Lambda code of the function in ``function_dir`` (``app.py`` there, handler ``app.handler``):
    ``memstack`` and the folder; give the function ``layers=[dependencies_layer(scope)]`` too."""
    return lambda_.Code.from_asset(
        str(function_dir),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=code_hash(function_dir),
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
            asset_hash=dependencies_key(bytecode=bytecode_python() is not None),
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
