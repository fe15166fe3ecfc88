"""Cold-start proxies of the Lambda functions (DESIGN.md "Performance"): import time of each handler module and
the unzipped size of each function's bundle.

* Import time: ``import app`` of ``functions/<name>/app.py`` in a fresh interpreter per run (what a cold
  start's init phase runs beyond the runtime itself), median of ``--runs`` with min–max; the interpreter's
  own start-up is not counted. One extra run with ``python -X importtime`` names the heaviest top-level
  imports. No ``MEMSTACK_*`` variables are set: the handlers build nothing at import (bootstrap is lazy).
* Bundle size: the asset folders ``make bundle`` (``cdk synth`` with local pip bundling, infra/bundling.py)
  leaves in ``cdk.out/asset.<hash>/``; a function's folder is the one holding its ``app.py`` and the
  ``memstack`` package (the newest, if several). Sizes are the sum of file sizes (unzipped), in total and
  without boto3/botocore/s3transfer (the Lambda Python runtime provides them). ``stale`` says the bundle's
  ``memstack`` differs from ``shared/memstack`` now. Without a bundle: "not built: run make bundle".

Targets: import <= 500 ms on this machine; bundle <= 80 MB without boto3. Benchmarks print; they never assert.

Usage: ``python benchmarks/cold_start.py [--runs 7] [--out benchmarks/results/cold_start]``
(writes ``<out>.md`` and ``<out>.json``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ("api", "context", "indexer")
CDK_OUT = ROOT / "cdk.out"
LIBRARY = ROOT / "shared" / "memstack"
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer")
"""Top-level packages the Lambda Python runtime already has (their ``*.dist-info`` too)."""

IMPORT_TARGET_MS = 500.0
BUNDLE_TARGET_MB = 80.0

_PROBE = """
import sys, time
sys.path.insert(0, {function_dir!r})
started = time.perf_counter()
import app
print((time.perf_counter() - started) * 1000)
"""


@dataclass
class ImportTime:
    function: str
    median_ms: float
    min_ms: float
    max_ms: float
    runs: int
    top_imports: list[tuple[str, float]] = field(default_factory=list)
    """The heaviest top-level imports (package, cumulative ms) of one ``-X importtime`` run."""


@dataclass
class BundleSize:
    function: str
    path: str | None
    total_mb: float | None = None
    without_runtime_mb: float | None = None
    files: int | None = None
    stale: bool | None = None
    largest: list[tuple[str, float]] = field(default_factory=list)
    """The largest top-level entries (name, MB)."""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTACK_", "OPENAI_", "PYTHON"))}
    return env


def import_time(function: str, runs: int) -> ImportTime:
    """Median/min/max ms of ``import app`` for ``functions/<function>`` over ``runs`` fresh interpreters
    (after one warm-up run that fills the bytecode cache, as a deployed bundle ships it)."""
    function_dir = str(ROOT / "functions" / function)
    code = _PROBE.format(function_dir=function_dir)
    command = [sys.executable, "-c", code]
    subprocess.run(command, check=True, capture_output=True, env=_env(), cwd=ROOT)  # warm the .pyc cache
    samples = []
    for _ in range(runs):
        out = subprocess.run(command, check=True, capture_output=True, text=True, env=_env(), cwd=ROOT)
        samples.append(float(out.stdout.strip().splitlines()[-1]))
    traced = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, env=_env(), cwd=ROOT
    )
    return ImportTime(
        function=function,
        median_ms=round(statistics.median(samples), 1),
        min_ms=round(min(samples), 1),
        max_ms=round(max(samples), 1),
        runs=runs,
        top_imports=_top_imports(traced.stderr),
    )


def _top_imports(stderr: str, count: int = 6) -> list[tuple[str, float]]:
    """What importing the handler costs per top-level package (``memstack``, ``pydantic``, ...): the sum of
    the self times of its modules, from ``-X importtime`` output (children print before their parent: the
    block that ends with the top-level ``app`` line)."""
    block: list[tuple[str, float]] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line[len("import time:") :].split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        name = parts[2].rstrip()
        if len(name) - len(name.lstrip()) < 2:  # a top-level import
            if name.strip() == "app":
                break
            block = []  # it ended another top-level block (site, encodings, ...): not the handler's
            continue
        block.append((name.strip(), int(parts[0]) / 1000))
    totals: dict[str, float] = {}
    for name, ms in block:
        package = name.split(".")[0]
        totals[package] = totals.get(package, 0.0) + ms
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])
    return [(name, round(ms, 1)) for name, ms in ranked][:count]


def _tree_bytes(root: Path) -> tuple[int, int]:
    total = files = 0
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if not path.is_symlink():
                total += path.stat().st_size
                files += 1
    return total, files


def _source_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        if path.suffix == ".pyc":
            continue
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def find_bundle(function: str) -> Path | None:
    """The newest ``cdk.out/asset.*`` folder holding this function's ``app.py`` and ``memstack``."""
    handler = (ROOT / "functions" / function / "app.py").read_bytes()
    found = [
        folder
        for folder in CDK_OUT.glob("asset.*")
        if folder.is_dir()
        and (folder / "memstack").is_dir()
        and (folder / "app.py").is_file()
        and (folder / "app.py").read_bytes() == handler
    ]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def bundle_size(function: str) -> BundleSize:
    """The unzipped size of the function's bundle, or a ``BundleSize`` with ``path=None`` if not built."""
    folder = find_bundle(function)
    if folder is None:
        return BundleSize(function=function, path=None)
    total, files = _tree_bytes(folder)
    entries: dict[str, int] = {}
    for entry in folder.iterdir():
        size = _tree_bytes(entry)[0] if entry.is_dir() else entry.stat().st_size
        entries[entry.name] = size
    provided = sum(
        size
        for name, size in entries.items()
        if name in RUNTIME_PROVIDED or name.split("-")[0] in RUNTIME_PROVIDED and name.endswith(".dist-info")
    )
    largest = sorted(entries.items(), key=lambda kv: -kv[1])[:6]
    return BundleSize(
        function=function,
        path=str(folder.relative_to(ROOT)),
        total_mb=round(total / 1e6, 1),
        without_runtime_mb=round((total - provided) / 1e6, 1),
        files=files,
        stale=_source_digest(folder / "memstack") != _source_digest(LIBRARY),
        largest=[(name, round(size / 1e6, 1)) for name, size in largest],
    )


def render(imports: list[ImportTime], bundles: list[BundleSize]) -> str:
    """The Markdown report: one row per function, then the heaviest imports and bundle entries."""
    lines = [
        "# Cold start: handler import time and bundle size",
        "",
        f"Measured with `python benchmarks/cold_start.py` on {platform.machine()} "
        f"({os.cpu_count()} CPUs), Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}. "
        f"Targets: import <= {IMPORT_TARGET_MS:.0f} ms; bundle <= {BUNDLE_TARGET_MB:.0f} MB without boto3.",
        "",
        "| function | import ms (median) | min–max | runs | bundle MB (unzipped) | without boto3/botocore/s3transfer | files |",
        "|---|---|---|---|---|---|---|",
    ]
    for imp, bundle in zip(imports, bundles, strict=True):
        if bundle.path is None:
            size = "not built: run make bundle"
            rest = "–", "–"
        else:
            size = f"{bundle.total_mb}" + (
                " (stale: its memstack differs from shared/memstack now)" if bundle.stale else ""
            )
            rest = f"{bundle.without_runtime_mb}", f"{bundle.files}"
        lines.append(
            f"| {imp.function} | {imp.median_ms} | {imp.min_ms}–{imp.max_ms} | {imp.runs} | {size} | {rest[0]} | {rest[1]} |"
        )
    lines += [
        "",
        "Import time by package (sum of self ms of its modules, one `-X importtime` run, which inflates times):",
        "",
    ]
    for imp in imports:
        shown = ", ".join(f"{name} {ms}" for name, ms in imp.top_imports)
        lines.append(f"* {imp.function}: {shown}")
    built = [b for b in bundles if b.path is not None]
    if built:
        lines += ["", "Largest bundle entries (MB):", ""]
        for b in built:
            lines.append(f"* {b.function} (`{b.path}`): " + ", ".join(f"{n} {mb}" for n, mb in b.largest))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=7, help="fresh interpreters per function (default 7)")
    parser.add_argument(
        "--out",
        default=str(ROOT / "benchmarks" / "results" / "cold_start"),
        help="write <out>.md and <out>.json (default benchmarks/results/cold_start)",
    )
    args = parser.parse_args(argv)
    imports = [import_time(f, args.runs) for f in FUNCTIONS]
    bundles = [bundle_size(f) for f in FUNCTIONS]
    report = render(imports, bundles)
    print(report)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(report)
    payload = {
        "machine": {"arch": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "targets": {"import_ms": IMPORT_TARGET_MS, "bundle_mb_without_boto3": BUNDLE_TARGET_MB},
        "imports": [asdict(i) for i in imports],
        "bundles": [asdict(b) for b in bundles],
    }
    out.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
