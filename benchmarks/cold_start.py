"""Cold start of the Lambda functions: handler import time, the CPU of a cold function's first request, and
the unzipped size of what each function runs.

* Import time: ``import app`` of ``functions/<name>/app.py`` in a fresh interpreter per run (what a cold
  start's init phase runs beyond the runtime itself), median of ``--runs`` with min–max; the interpreter's
  own start-up is not counted. One extra run with ``python -X importtime`` names the heaviest top-level
  imports. No ``MEMSTACK_*`` variables are set: the handlers build nothing at import (bootstrap is lazy).
  Every probe runs behind tests/lambda_bundle.py's guard (only the Lambda requirements importable), so the
  development venv's extras (``httpx`` imports ``rich`` and ``click`` when they are installed) do not count.
* First request (``api`` and ``context``): a fresh interpreter imports the handler and sends it the same
  API Gateway event twice — ``POST /v1/threads/t-cold/context`` for a thread of 40 saved messages (history +
  hybrid recall; ``count_tokens`` not set, as an agent's turn loop sends it). CPU is the process's
  (``time.process_time``, every thread), so the servers the function talks to do not count: DynamoDB and S3
  on a moto server, the OpenSearch test double (Serverless mode) and an OpenAI-compatible embeddings endpoint,
  all on 127.0.0.1 in the benchmark's process, each reached over TLS (a keep-alive HTTPS proxy,
  tests/tls_proxy.py; the function verifies it against certifi's roots plus the proxy's certificate), so
  the request loads its clients' CA bundles and runs their handshakes as against AWS and OpenAI. The first request builds the ``Memory`` (settings, clients:
  ``MEMSTACK_EMBEDDER=openai`` with the real SDK). Three configurations: ``openai-secret``, the deployment's
  default (``-c models=openai``: the key read from Secrets Manager, here moto's, on the first request,
  through the Parameters and Secrets Lambda Extension's double), ``openai-secret-client`` (the same with a
  Secrets Manager client: no extension) and ``openai-key`` (``OPENAI_API_KEY`` in the environment).
  Medians of ``--request-runs``. Every probe but one reads the bytecode an earlier run left, as a bundle
  with its ``.pyc`` (infra/bundling.py) is read on
  Lambda; the ``no-bytecode`` regime (the deployment default) reads none and writes none, as a bundle
  without bytecode runs on Lambda's read-only ``/var/task`` and ``/opt``: every module compiled on import.
* Before/after in one run: ``--baseline REF`` (e.g. ``main``) measures the same probes on ``git archive REF``
  (its ``functions/`` and ``shared/``) beside the working tree, the two taking turns run by run (load from
  other work on a shared machine falls on both alike), and prints this tree's CPU over the baseline's.
* Bundle size: the asset folders ``make bundle`` (``cdk synth`` with local pip bundling, infra/bundling.py)
  leaves in ``cdk.out/``: a function's code asset (the one holding its ``app.py`` and ``memstack``, the
  newest if several) plus the stack's one dependency layer (``python/``). Sizes are the sum of file sizes
  (unzipped), in total and without boto3/botocore/s3transfer (the Lambda Python runtime provides them).
  ``stale`` says the bundle's ``memstack`` differs from ``shared/memstack`` now. Without a bundle: "not built:
  run make bundle".

Targets: import <= 120 ms; a cold context request <= 250 ms of CPU; <= 60 MB per function without
boto3. Benchmarks print; they never assert.

Usage: ``python benchmarks/cold_start.py [--runs 7] [--request-runs 3] [--baseline main]
[--out benchmarks/results/cold_start]`` (writes ``<out>.md`` and ``<out>.json``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the request's world (moto, the OpenSearch double, events) lives in tests/

from tests.cold_world import CONFIGS, context_event, function_env, request_environment  # noqa: E402

FUNCTIONS = ("api", "context", "indexer", "observe", "reflect")
CDK_OUT = ROOT / "cdk.out"
LIBRARY = ROOT / "shared" / "memstack"
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer")
"""Top-level packages the Lambda Python runtime already has (their ``*.dist-info`` too)."""

IMPORT_TARGET_MS = 120.0
FIRST_REQUEST_TARGET_CPU_MS = 250.0
BUNDLE_TARGET_MB = 60.0
SNAP_START_CONFIG = "openai-secret-client"
"""The configuration of the ``snap-start`` regime: as infra deploys a SnapStart function, without the
Parameters and Secrets extension (its key is read by the prime, before the snapshot)."""
REQUEST_FUNCTIONS = ("api", "context")
"""The functions whose first request is measured (a context request through API Gateway's event)."""

_PROBE = """{prelude}
import sys, time
sys.path.insert(0, {function_dir!r})
started, cpu = time.perf_counter(), time.process_time()
import app
print((time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000)
"""


@dataclass
class ImportTime:
    function: str
    median_ms: float
    min_ms: float
    max_ms: float
    runs: int
    cpu_median_ms: float = 0.0
    """CPU (``time.process_time``) of the import, median: steadier than wall time on a shared machine."""
    top_imports: list[tuple[str, float]] = field(default_factory=list)
    """The heaviest top-level imports (package, cumulative ms) of one ``-X importtime`` run."""
    code: str = "this tree"
    """Whose code: ``this tree`` or the ``--baseline`` ref."""


_REQUEST_PROBE = """{prelude}
import json, sys, time
sys.path.insert(0, {function_dir!r})
event = json.loads(sys.argv[1])
c0, w0 = time.process_time(), time.perf_counter()
import app
if {snap_start!r}:  # a restore runs the after-restore hook once, then the request (memstack.snapstart)
    from memstack.snapstart import after_restore
    after_restore()
c1, w1 = time.process_time(), time.perf_counter()
first = app.handler(event, None)
c2, w2 = time.process_time(), time.perf_counter()
second = app.handler(event, None)
c3, w3 = time.process_time(), time.perf_counter()
assert first["statusCode"] == 200 and second["statusCode"] == 200, (first, second)
print(json.dumps({{"import_cpu_ms": (c1 - c0) * 1000, "first_cpu_ms": (c2 - c1) * 1000,
                  "first_wall_ms": (w2 - w1) * 1000, "second_cpu_ms": (c3 - c2) * 1000,
                  "second_wall_ms": (w3 - w2) * 1000}}))
"""


@dataclass
class FirstRequest:
    """CPU (``time.process_time``) of one fresh interpreter: importing the handler, its first context
    request (builds the ``Memory``: settings, clients, the tokenizer) and a second one, medians of runs."""

    function: str
    import_cpu_ms: float
    first_cpu_ms: float
    first_wall_ms: float
    second_cpu_ms: float
    runs: int
    regime: str = "on-demand"
    config: str = "openai-key"
    """One of ``CONFIGS``: ``openai-secret``, ``openai-secret-client`` or ``openai-key``."""
    code: str = "this tree"
    """Whose code: ``this tree`` or the ``--baseline`` ref."""
    """``regime``: ``on-demand`` (init then the first request, in one cold start), ``no-bytecode`` (the same
    with no ``.pyc`` to read and none written, as a bundle without bytecode runs on Lambda's read-only file
    system: every module compiled on import) or ``snap-start``: init with
    ``AWS_LAMBDA_INITIALIZATION_TYPE=snap-start`` (``memstack.snapstart.prime`` runs), which Lambda runs
    once per published version before its snapshot, then the first request as a restored environment runs
    it (the process's memory is the snapshot's; the restore itself happens in Lambda and is not here)."""


@dataclass
class BundleSize:
    function: str
    path: str | None
    total_mb: float | None = None
    without_runtime_mb: float | None = None
    files: int | None = None
    stale: bool | None = None
    largest: list[tuple[str, float]] = field(default_factory=list)
    """The largest top-level entries (name, MB; ``layer:`` for the dependency layer's)."""
    code_mb: float | None = None
    """The function's own code asset (``memstack`` + its folder), MB."""
    layer: str | None = None
    """The shared dependency layer's asset folder, if built."""


def _env(tree: Path = ROOT) -> dict[str, str]:
    return function_env(tree)


def _prelude() -> str:
    from tests.lambda_bundle import bundle_only_prelude

    return bundle_only_prelude()


def baseline_tree(ref: str, into: Path) -> Path:
    """``functions/`` and ``shared/`` of the git ``ref`` (``git archive``) under ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, "functions", "shared"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def import_times(function: str, runs: int, trees: list[tuple[str, Path]]) -> list[ImportTime]:
    """Median/min/max ms of ``import app`` for ``functions/<function>`` of each ``(label, tree)`` over
    ``runs`` fresh interpreters each (after one warm-up run per tree that fills the bytecode cache, as a
    deployed bundle ships it). The trees take turns run by run, so load from other work on the machine
    falls on each alike."""
    commands = []
    for _, tree in trees:
        code = _PROBE.format(function_dir=str(tree / "functions" / function), prelude=_prelude())
        command = [sys.executable, "-c", code]
        subprocess.run(command, check=True, capture_output=True, env=_env(tree), cwd=ROOT)  # warm .pyc
        commands.append(command)
    samples: list[list[float]] = [[] for _ in trees]
    cpu: list[list[float]] = [[] for _ in trees]
    for _ in range(runs):
        for k, (command, (_, tree)) in enumerate(zip(commands, trees, strict=True)):
            out = subprocess.run(
                command, check=True, capture_output=True, text=True, env=_env(tree), cwd=ROOT
            )
            wall_ms, cpu_ms = out.stdout.strip().splitlines()[-1].split()
            samples[k].append(float(wall_ms))
            cpu[k].append(float(cpu_ms))
    out = []
    for k, (command, (label, tree)) in enumerate(zip(commands, trees, strict=True)):
        traced = subprocess.run(
            [sys.executable, "-X", "importtime", *command[1:]],
            capture_output=True,
            text=True,
            env=_env(tree),
            cwd=ROOT,
        )
        out.append(
            ImportTime(
                function=function,
                median_ms=round(statistics.median(samples[k]), 1),
                min_ms=round(min(samples[k]), 1),
                max_ms=round(max(samples[k]), 1),
                runs=runs,
                cpu_median_ms=round(statistics.median(cpu[k]), 1),
                top_imports=_top_imports(traced.stderr),
                code=label,
            )
        )
    return out


def first_requests(runs: int, baseline: tuple[str, Path] | None = None) -> list[FirstRequest]:
    """Each of ``REQUEST_FUNCTIONS`` in ``runs`` fresh interpreters in ``request_environment()``: every
    configuration of ``CONFIGS`` on demand, the deployment's default without bytecode and under SnapStart,
    and with ``baseline`` (label, tree) the same on-demand and no-bytecode runs on that tree's code."""
    with request_environment() as configs:
        trees = [("this tree", ROOT)] + ([baseline] if baseline else [])
        out = [
            r
            for config in CONFIGS
            for name in REQUEST_FUNCTIONS
            for r in _first_requests(name, configs[config], runs, "on-demand", config=config, trees=trees)
        ]
        out += [
            r
            for name in REQUEST_FUNCTIONS
            for r in _first_requests(
                name, configs[CONFIGS[0]], runs, "no-bytecode", config=CONFIGS[0], trees=trees
            )
        ]
        out += [
            r
            for name in REQUEST_FUNCTIONS
            # infra gives a SnapStart function no extension: the key is read before the snapshot
            for r in _first_requests(
                name,
                configs[SNAP_START_CONFIG],
                runs,
                "snap-start",
                config=SNAP_START_CONFIG,
                trees=trees[:1],
            )
        ]
        return out


def _first_requests(
    function: str,
    env: dict[str, str],
    runs: int,
    regime: str,
    *,
    config: str,
    trees: list[tuple[str, Path]],
) -> list[FirstRequest]:
    """``runs`` fresh functions of each ``(label, tree)``, the trees taking turns run by run (load from
    other work on the machine falls on each alike); one ``FirstRequest`` (medians) per tree."""
    snap_start = regime == "snap-start"
    event = context_event()
    commands = []
    for _, tree in trees:
        code = _REQUEST_PROBE.format(
            function_dir=str(tree / "functions" / function), snap_start=snap_start, prelude=_prelude()
        )
        initialization = "snap-start" if snap_start else "on-demand"
        tree_env = env | {
            "AWS_LAMBDA_INITIALIZATION_TYPE": initialization,
            "PYTHONPATH": str(tree / "shared"),
        }
        commands.append(([sys.executable, "-c", code, json.dumps(event)], tree_env))
    samples: list[list[dict[str, float]]] = [[] for _ in trees]
    for _ in range(runs):
        for k, (command, tree_env) in enumerate(commands):
            with tempfile.TemporaryDirectory(prefix="cold-start-pyc-") as empty:
                if regime == "no-bytecode":  # an empty bytecode cache that nothing may write to
                    tree_env = tree_env | {"PYTHONPYCACHEPREFIX": empty, "PYTHONDONTWRITEBYTECODE": "1"}
                out = subprocess.run(
                    command, check=True, capture_output=True, text=True, env=tree_env, cwd=ROOT
                )
            samples[k].append(json.loads(out.stdout.strip().splitlines()[-1]))

    def median(k: int, key: str) -> float:
        return round(statistics.median(s[key] for s in samples[k]), 1)

    return [
        FirstRequest(
            function=function,
            import_cpu_ms=median(k, "import_cpu_ms"),
            first_cpu_ms=median(k, "first_cpu_ms"),
            first_wall_ms=median(k, "first_wall_ms"),
            second_cpu_ms=median(k, "second_cpu_ms"),
            runs=runs,
            regime=regime,
            config=config,
            code=label,
        )
        for k, (label, _) in enumerate(trees)
    ]


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
    """SHA-256 of the sources under ``root`` as a function bundles them: no bytecode, and no ``integrations``
    (infra/bundling.py leaves the agent-framework integrations out of the functions)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        if path.suffix == ".pyc" or path.relative_to(root).parts[0] == "integrations":
            continue
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def find_layer() -> Path | None:
    """The newest ``cdk.out/asset.*`` folder holding the dependency layer (``python/`` with pydantic)."""
    found = [f for f in CDK_OUT.glob("asset.*") if (f / "python" / "pydantic").is_dir()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


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


def _entries(root: Path) -> dict[str, int]:
    return {e.name: (_tree_bytes(e)[0] if e.is_dir() else e.stat().st_size) for e in root.iterdir()}


def _provided(entries: dict[str, int]) -> int:
    """Bytes of the entries the Lambda runtime already has (boto3, botocore, s3transfer and their
    ``.dist-info``)."""
    return sum(
        size
        for name, size in entries.items()
        if name in RUNTIME_PROVIDED or name.split("-")[0] in RUNTIME_PROVIDED and name.endswith(".dist-info")
    )


def bundle_size(function: str) -> BundleSize:
    """The unzipped size of what the function runs: its code asset plus the stack's dependency layer (one
    asset shared by every function), or a ``BundleSize`` with ``path=None`` if not built."""
    folder = find_bundle(function)
    if folder is None:
        return BundleSize(function=function, path=None)
    total, files = _tree_bytes(folder)
    entries = _entries(folder)
    provided = _provided(entries)
    layer = find_layer()
    if layer is not None:
        layer_total, layer_files = _tree_bytes(layer)
        layer_entries = _entries(layer / "python")
        total, files = total + layer_total, files + layer_files
        provided += _provided(layer_entries)
        entries.update({f"layer:{k}": v for k, v in layer_entries.items()})
    largest = sorted(entries.items(), key=lambda kv: -kv[1])[:6]
    return BundleSize(
        function=function,
        path=str(folder.relative_to(ROOT)),
        total_mb=round(total / 1e6, 1),
        without_runtime_mb=round((total - provided) / 1e6, 1),
        files=files,
        stale=_source_digest(folder / "memstack") != _source_digest(LIBRARY),
        largest=[(name, round(size / 1e6, 1)) for name, size in largest],
        code_mb=round(_tree_bytes(folder)[0] / 1e6, 2),
        layer=None if layer is None else str(layer.relative_to(ROOT)),
    )


def _ratio(after: float, before: float) -> str:
    return f"x{after / before:.2f}" if before else "–"


def _side_by_side(imports: list[ImportTime], requests: list[FirstRequest]) -> list[str]:
    """With a baseline: this tree's CPU medians over the baseline's, per function (and configuration), as
    ratios (below 1 is less CPU)."""
    base_imports = {i.function: i for i in imports if i.code != "this tree"}
    base_requests = {(r.function, r.config, r.regime): r for r in requests if r.code != "this tree"}
    if not base_imports and not base_requests:
        return []
    baseline = (
        next(iter(base_imports.values())).code if base_imports else next(iter(base_requests.values())).code
    )
    lines = [
        "",
        f"Side by side, this tree / `{baseline}` (CPU medians, measured in turns run by run):",
        "",
        "| function | config | import | first request | init + first |",
        "|---|---|---|---|---|",
    ]
    for imp in imports:
        before = base_imports.get(imp.function)
        if imp.code == "this tree" and before is not None:
            lines.append(
                f"| {imp.function} | – | {imp.cpu_median_ms} / {before.cpu_median_ms} "
                f"({_ratio(imp.cpu_median_ms, before.cpu_median_ms)}) | – | – |"
            )
    deployed = [  # this tree's bundle carries bytecode; a baseline's bundle without it runs no-bytecode
        (r, base_requests[(r.function, r.config, "no-bytecode")], f"{r.config}, as deployed: bytecode / none")
        for r in requests
        if r.code == "this tree"
        and r.regime == "on-demand"
        and (r.function, r.config, "no-bytecode") in base_requests
    ]
    pairs = [
        (
            r,
            base_requests[(r.function, r.config, r.regime)],
            r.config + ("" if r.regime == "on-demand" else f", {r.regime}"),
        )
        for r in requests
        if r.code == "this tree" and (r.function, r.config, r.regime) in base_requests
    ]
    for r, b, config in pairs + deployed:
        total, total_before = r.import_cpu_ms + r.first_cpu_ms, b.import_cpu_ms + b.first_cpu_ms
        lines.append(
            f"| {r.function} | {config} | {r.import_cpu_ms} / {b.import_cpu_ms} "
            f"({_ratio(r.import_cpu_ms, b.import_cpu_ms)}) | {r.first_cpu_ms} / {b.first_cpu_ms} "
            f"({_ratio(r.first_cpu_ms, b.first_cpu_ms)}) | {round(total, 1)} / {round(total_before, 1)} "
            f"({_ratio(total, total_before)}) |"
        )
    return lines


def render(imports: list[ImportTime], bundles: list[BundleSize], requests: list[FirstRequest]) -> str:
    """The Markdown report: one row per function, then the heaviest imports and bundle entries."""
    lines = [
        "# Cold start: handler import time and bundle size",
        "",
        f"Measured with `python benchmarks/cold_start.py` on {platform.machine()} "
        f"({os.cpu_count()} CPUs), Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}. "
        f"Targets: import <= {IMPORT_TARGET_MS:.0f} ms; a cold context request <= "
        f"{FIRST_REQUEST_TARGET_CPU_MS:.0f} ms of CPU; bundle <= {BUNDLE_TARGET_MB:.0f} MB per function "
        "without boto3 (function code + the shared dependency layer). Load average at the end (1/5/15 min): "
        + "/".join(f"{x:.1f}" for x in os.getloadavg())
        + " (other work on this shared machine inflates wall times; CPU times much less).",
        "",
        "| function | code | import CPU ms (median) | import wall ms (median) | wall min–max | runs | bundle MB (unzipped) | without boto3/botocore/s3transfer | files |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    by_function = {b.function: b for b in bundles}
    for imp in sorted(imports, key=lambda i: (FUNCTIONS.index(i.function), i.code != "this tree")):
        bundle = by_function[imp.function]
        if imp.code != "this tree":
            size, rest = "", ("", "")
        elif bundle.path is None:
            size = "not built: run make bundle"
            rest = "–", "–"
        else:
            size = f"{bundle.total_mb}" + (
                " (stale: its memstack differs from shared/memstack now)" if bundle.stale else ""
            )
            rest = f"{bundle.without_runtime_mb}", f"{bundle.files}"
        lines.append(
            f"| {imp.function} | {imp.code} | {imp.cpu_median_ms} | {imp.median_ms} | {imp.min_ms}–{imp.max_ms} "
            f"| {imp.runs} | {size} | {rest[0]} | {rest[1]} |"
        )
    if requests:
        lines += [
            "",
            "A cold function's first context request (CPU of the function's process: init, then the first "
            "and a second request; DynamoDB/S3 on moto, the OpenSearch double and an embeddings endpoint on "
            "127.0.0.1, each over TLS as on AWS; median of runs). `on-demand`: init is the handler's import, and a cold start runs it "
            "and the first request. `snap-start` (`-c snapStart=true`): init also primes "
            "(`memstack.snapstart`: builds the Memory, assembles one context); Lambda runs it once per "
            "published version before the snapshot, so a cold start is a restore plus the first request "
            "column (the restore itself is Lambda's, not measured here):",
            "",
            "`openai-secret` is the deployment's default (`-c models=openai`: the key read from Secrets Manager "
            "by the first request, through the Parameters and Secrets Lambda Extension's double on 127.0.0.1, "
            "as infra wires the extension on functions without SnapStart; the extension's own process is not "
            "counted); `openai-secret-client` reads it with a Secrets Manager client (no extension: SnapStart "
            "functions, and the fallback); `openai-key` has the key in the environment.",
            "",
            "| function | config | code | regime | init CPU ms | first request CPU ms | init + first CPU ms "
            "| first request wall ms | second request CPU ms | runs |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in requests:
            lines.append(
                f"| {r.function} | {r.config} | {r.code} | {r.regime} | {r.import_cpu_ms} | {r.first_cpu_ms} "
                f"| {round(r.import_cpu_ms + r.first_cpu_ms, 1)} | {r.first_wall_ms} | {r.second_cpu_ms} | {r.runs} |"
            )
    lines += _side_by_side(imports, requests)
    lines += [
        "",
        "Import time by package (sum of self ms of its modules, one `-X importtime` run, which inflates times):",
        "",
    ]
    for imp in imports:
        shown = ", ".join(f"{name} {ms}" for name, ms in imp.top_imports)
        lines.append(f"* {imp.function} ({imp.code}): {shown}")
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
        "--request-runs",
        type=int,
        default=3,
        help="fresh functions per first-request measurement (default 3)",
    )
    parser.add_argument("--no-requests", action="store_true", help="skip the first-request measurement")
    parser.add_argument(
        "--baseline", metavar="REF", help="also measure the code of this git ref (e.g. main): before/after"
    )
    parser.add_argument(
        "--out",
        default=str(ROOT / "benchmarks" / "results" / "cold_start"),
        help="write <out>.md and <out>.json (default benchmarks/results/cold_start)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cold-start-baseline-") as scratch:
        baseline = (args.baseline, baseline_tree(args.baseline, Path(scratch))) if args.baseline else None
        trees = [("this tree", ROOT)] + ([baseline] if baseline else [])
        imports = [imp for f in FUNCTIONS for imp in import_times(f, args.runs, trees)]
        bundles = [bundle_size(f) for f in FUNCTIONS]
        requests = [] if args.no_requests else first_requests(args.request_runs, baseline)
    report = render(imports, bundles, requests)
    print(report)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(report)
    payload = {
        "machine": {"arch": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "targets": {
            "import_ms": IMPORT_TARGET_MS,
            "first_request_cpu_ms": FIRST_REQUEST_TARGET_CPU_MS,
            "bundle_mb_without_boto3": BUNDLE_TARGET_MB,
        },
        "imports": [asdict(i) for i in imports],
        "first_requests": [asdict(r) for r in requests],
        "bundles": [asdict(b) for b in bundles],
    }
    out.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
