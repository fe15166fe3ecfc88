"""Where a cold function's first context request spends its CPU: the breakdown behind
``benchmarks/cold_start.py``'s "first request CPU ms" column.

In the same world as that benchmark (``tests.cold_world.request_environment``: DynamoDB, S3 and Secrets Manager on
a moto server, the OpenSearch test double and an OpenAI-compatible embeddings endpoint, all on 127.0.0.1 and reached over TLS;
the handler in a fresh interpreter behind the Lambda bundle's import guard), each function (``api``,
``context``) is imported and sent the first request in fresh interpreters, for four views:

* named parts: the CPU of the steps a first request takes (building the ``Memory``: the OpenAI key from
  Secrets Manager, the DynamoDB store, the OpenSearch index; the OpenAI client and the query's embedding;
  ``Memory.context`` and recall), each timed on the thread it runs on (``time.thread_time``), medians of
  ``--runs``;

* plain: the CPU of the first request (``time.process_time``, every thread) and the modules it imports
  (``sys.modules`` before and after), counted per top-level package;
* ``-X importtime``: what the imports made during the first request cost, per top-level package (the sum
  of its modules' self times; the tracing inflates them) and per top-level import statement (cumulative);
* ``cProfile``: every thread's calls (each thread's work profiled on its own CPU clock, ``time.thread_time``:
  a plain thread's ``run``, a pool's work items, so an idle pool worker's wait is not counted; the profiles
  added up), listed by cumulative time. cProfile's own overhead inflates call-heavy code (the
  import system, pydantic's schema building) more than the rest: read the shares, not the milliseconds.

Benchmarks print; they never assert.

Usage: ``python benchmarks/cold_start_profile.py [--functions api context] [--config openai-secret]
[--top 40] [--out benchmarks/results/cold_start_profile]`` (writes ``<out>.md`` and ``<out>.json``; the
raw profiles as ``<out>-<function>.prof`` for ``python -m pstats``, not kept in git).
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.cold_start import REQUEST_FUNCTIONS, _prelude  # noqa: E402 - after the path set-up
from tests.cold_world import CONFIGS, context_event, request_environment  # noqa: E402

MARK = "--- memstack: first request ---"
"""Written to stderr right before the first request, so the import trace after it is the request's."""

_PLAIN = """{prelude}
import json, sys, time
sys.path.insert(0, {function_dir!r})
event = json.loads(sys.argv[1])
import app
before = set(sys.modules)
c0 = time.process_time()
sys.stderr.write({mark!r} + "\\n")
first = app.handler(event, None)
c1 = time.process_time()
assert first["statusCode"] == 200, first
print(json.dumps({{"first_cpu_ms": (c1 - c0) * 1000, "new_modules": sorted(set(sys.modules) - before)}}))
"""

_PARTS = """{prelude}
import json, sys, threading, time
sys.path.insert(0, {function_dir!r})
event = json.loads(sys.argv[1])
import app
from memstack import bootstrap
from memstack.adapters.openai import connection
parts = {{}}
def timed(owner, name, label):
    real = getattr(owner, name)
    def wrapper(*args, **kwargs):
        started = time.thread_time()  # each part runs on one thread: its own CPU, not the waits
        try:
            return real(*args, **kwargs)
        finally:
            parts[label] = parts.get(label, 0.0) + (time.thread_time() - started) * 1000
    setattr(owner, name, wrapper)
timed(bootstrap, "build", "build the Memory (all of it)")
timed(bootstrap, "openai_api_key", "the OpenAI key from Secrets Manager")
timed(bootstrap, "_dynamodb_store", "the DynamoDB store")
timed(bootstrap, "_opensearch_index", "the OpenSearch index")
timed(bootstrap, "make_embedder", "the embedder (no connection)")
timed(connection.OpenAIConnection, "client", "the OpenAI client (first embedding)")
timed(connection.OpenAIConnection, "call", "the query's embedding, client included")
_build = bootstrap.build
def build(*args, **kwargs):
    memory = _build(*args, **kwargs)
    timed(type(memory), "context", "Memory.context, this thread")
    timed(type(memory.recall_engine), "recall", "recall, its thread")
    return memory
bootstrap.build = build
c0 = time.process_time()
first = app.handler(event, None)
parts["the first request (process CPU)"] = (time.process_time() - c0) * 1000
assert first["statusCode"] == 200, first
print(json.dumps(parts))
"""

_PROFILED = """{prelude}
import cProfile, json, sys, threading, time
sys.path.insert(0, {function_dir!r})
event = json.loads(sys.argv[1])
import app
from concurrent.futures import thread as _pool
profiles = []
def _profiled(run):  # each thread's work on its own CPU clock, in profiles that end; added up below
    def wrapper(self):
        profile = cProfile.Profile(time.thread_time)
        profiles.append(profile)
        return profile.runcall(run, self)
    return wrapper
_thread_run = threading.Thread.run
_pool._WorkItem.run = _profiled(_pool._WorkItem.run)  # a pool's item, not its worker (idle at the end)
threading.Thread.run = lambda self: (
    _thread_run(self) if getattr(self, "_target", None) is _pool._worker else _profiled(_thread_run)(self)
)
main = cProfile.Profile(time.thread_time)
profiles.append(main)
first = main.runcall(app.handler, event, None)
assert first["statusCode"] == 200, first
for k, profile in enumerate(profiles):
    profile.create_stats()
    profile.dump_stats({stats!r} + f".{{k}}")
print(len(profiles))
"""


@dataclass
class Breakdown:
    """One function's first request, taken apart."""

    function: str
    config: str
    first_cpu_ms: float
    """``time.process_time`` of the first request in the plain run."""
    new_modules: int
    """Modules the first request imports."""
    modules_by_package: list[tuple[str, int]] = field(default_factory=list)
    import_self_ms: list[tuple[str, float]] = field(default_factory=list)
    """Per top-level package, the sum of its modules' self times (``-X importtime``), largest first."""
    import_statements_ms: list[tuple[str, float]] = field(default_factory=list)
    """Per top-level import made during the request (the first to import a module), cumulative ms."""
    import_total_ms: float = 0.0
    """All the request's imports (sum of self times)."""
    profiled_cpu_ms: float = 0.0
    """The request's CPU under cProfile, every thread added up (cProfile inflates it)."""
    cumulative: list[tuple[str, int, float, float]] = field(default_factory=list)
    """(function, calls, cumulative ms, share of ``profiled_cpu_ms``) by cumulative time."""
    parts: dict[str, float] = field(default_factory=dict)
    """Named parts of the request (CPU ms of the thread each runs on, medians of ``--runs``); they nest:
    the build holds the key, the store, the index and the embedder; the embedding holds the client."""


def _run_probe(template: str, function: str, env: dict[str, str], *extra: str, **fields: Any) -> Any:
    code = template.format(
        prelude=_prelude(), function_dir=str(ROOT / "functions" / function), mark=MARK, **fields
    )
    event = json.dumps(context_event())
    return subprocess.run(
        [sys.executable, *extra, "-c", code, event],
        check=True,
        capture_output=True,
        text=True,
        env=env | {"AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand"},
        cwd=ROOT,
    )


def parse_importtime(stderr: str) -> tuple[list[tuple[str, float]], list[tuple[str, float]], float]:
    """From ``-X importtime`` output after ``MARK``: (per top-level package the sum of its modules' self ms,
    per top-level import statement its cumulative ms, the total of self ms)."""
    lines = stderr.split(MARK, 1)[-1].splitlines()
    packages: dict[str, float] = {}
    statements: dict[str, float] = {}
    total = 0.0
    for line in lines:
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line[len("import time:") :].split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        self_ms, cumulative_ms = int(parts[0]) / 1000, int(parts[1]) / 1000
        name = parts[2].rstrip()
        module = name.strip()
        total += self_ms
        top = module.split(".")[0]
        packages[top] = packages.get(top, 0.0) + self_ms
        if len(name) - len(name.lstrip()) < 2:  # not nested in another import of the request
            statements[module] = statements.get(module, 0.0) + cumulative_ms
    by_package = sorted(((k, round(v, 1)) for k, v in packages.items()), key=lambda kv: -kv[1])
    by_statement = sorted(((k, round(v, 1)) for k, v in statements.items()), key=lambda kv: -kv[1])
    return by_package, by_statement, round(total, 1)


def _label(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":
        return name
    path = Path(filename)
    parts = path.parts
    for anchor in ("site-packages", "shared", "functions"):
        if anchor in parts:
            path = Path(*parts[parts.index(anchor) + 1 :])
            break
    else:
        if "python3" in filename:
            path = Path("stdlib", path.name)
    return f"{path}:{line}({name})"


def cumulative(stats: pstats.Stats, top: int) -> tuple[float, list[tuple[str, int, float, float]]]:
    """(the CPU of every profiled thread in ms, the ``top`` functions by cumulative time). The total is
    the sum of each thread's outermost call (the handler on the main thread, each worker's ``run``)."""
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    roots = sum(ct for (_, _, nc, ct, callers) in table.values() if not callers)
    ranked = sorted(table.items(), key=lambda kv: -kv[1][3])[:top]
    return round(roots * 1000, 1), [
        (_label(key), int(value[1]), round(value[3] * 1000, 1), round(value[3] / roots, 3) if roots else 0.0)
        for key, value in ranked
    ]


def breakdown(
    function: str, config: str, env: dict[str, str], top: int, prof_out: Path, runs: int = 5
) -> Breakdown:
    """The views of the module docstring for one function (the named parts' medians of ``runs``)."""
    samples = [
        json.loads(_run_probe(_PARTS, function, env).stdout.strip().splitlines()[-1]) for _ in range(runs)
    ]
    parts = {name: round(statistics.median(s.get(name, 0.0) for s in samples), 1) for name in samples[0]}
    plain = json.loads(_run_probe(_PLAIN, function, env).stdout.strip().splitlines()[-1])
    modules: dict[str, int] = {}
    for name in plain["new_modules"]:
        top_name = name.split(".")[0]
        modules[top_name] = modules.get(top_name, 0) + 1
    traced = _run_probe(_PLAIN, function, env, "-X", "importtime")
    by_package, by_statement, total = parse_importtime(traced.stderr)
    with tempfile.TemporaryDirectory(prefix="cold-profile-") as scratch:
        stem = str(Path(scratch) / "first")
        count = int(_run_probe(_PROFILED, function, env, stats=stem).stdout.strip().splitlines()[-1])
        stats = pstats.Stats(f"{stem}.0")
        for k in range(1, count):
            stats.add(f"{stem}.{k}")
        stats.dump_stats(str(prof_out))
    profiled, ranked = cumulative(stats, top)
    return Breakdown(
        function=function,
        config=config,
        first_cpu_ms=round(plain["first_cpu_ms"], 1),
        new_modules=len(plain["new_modules"]),
        modules_by_package=sorted(modules.items(), key=lambda kv: -kv[1]),
        import_self_ms=by_package,
        import_statements_ms=by_statement,
        import_total_ms=total,
        profiled_cpu_ms=profiled,
        cumulative=ranked,
        parts=parts,
    )


def render(results: list[Breakdown]) -> str:
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        "# A cold function's first context request, taken apart",
        "",
        f"`python benchmarks/cold_start_profile.py`, Python {sys.version.split()[0]}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average (1/5/15 min) {load}. "
        "The request of `benchmarks/cold_start.py` (POST context, 40 saved messages, hybrid recall) in its "
        "world (moto, the OpenSearch double, a local embeddings endpoint); one fresh interpreter per view.",
    ]
    for r in results:
        lines += [
            "",
            f"## {r.function} ({r.config})",
            "",
            f"First request: **{r.first_cpu_ms} ms of CPU**; it imports {r.new_modules} modules "
            f"(" + ", ".join(f"{name} {n}" for name, n in r.modules_by_package[:10]) + ").",
            "",
            "Named parts (CPU ms of the thread each runs on, medians; they nest as listed, and the import of "
            "each SDK is inside the first part that needs it):",
            "",
            "| part | CPU ms |",
            "|---|---|",
            *[f"| {name} | {ms} |" for name, ms in r.parts.items()],
            "",
            f"Imports during the request (`-X importtime`, self ms summed per package, total {r.import_total_ms}"
            " ms; the tracing inflates them): "
            + ", ".join(f"{name} {ms}" for name, ms in r.import_self_ms[:12])
            + ".",
            "",
            "Top-level imports made by the request (cumulative ms): "
            + ", ".join(f"`{name}` {ms}" for name, ms in r.import_statements_ms[:14])
            + ".",
            "",
            f"cProfile, every thread ({r.profiled_cpu_ms} ms of CPU under the profiler), by cumulative time:",
            "",
            "| function | calls | cumulative ms | share |",
            "|---|---|---|---|",
        ]
        lines += [f"| `{name}` | {calls} | {ms} | {share:.0%} |" for name, calls, ms, share in r.cumulative]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--functions", nargs="+", default=list(REQUEST_FUNCTIONS), choices=REQUEST_FUNCTIONS)
    parser.add_argument("--config", default=CONFIGS[0], choices=CONFIGS)
    parser.add_argument("--top", type=int, default=40, help="functions listed by cumulative time")
    parser.add_argument("--runs", type=int, default=5, help="fresh functions for the named parts (median)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cold_start_profile"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with request_environment() as configs:
        results = [
            breakdown(
                f,
                args.config,
                configs[args.config],
                args.top,
                out.with_name(f"{out.name}-{f}.prof"),
                args.runs,
            )
            for f in args.functions
        ]
    report = render(results)
    print(report)
    out.with_suffix(".md").write_text(report)
    out.with_suffix(".json").write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
