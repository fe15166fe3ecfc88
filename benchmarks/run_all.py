"""``make bench``: every benchmark in one run, written to ``benchmarks/results/`` (``--quick``: to
``benchmarks/results/quick/``, never over the committed full run).

Runs, in order: recall quality (recall_quality.py), speed side by side with Mastra (speed.py, its own
process), speed per resource (speed.py's long-lived user and 1M-message corpus, its own process; ``--skip
resource`` to leave it out), requests per turn on the AWS path under moto (aws_requests.py, its own
process), the AWS cost per turn from those requests (aws_cost.py), ``memstack serve`` under load
(serve_load.py), cold start (cold_start.py, its own process), observational memory's cost per turn
(observation_cost.py, its own process), answer quality (answer_quality.py; skipped without an OpenAI key or
endpoint). Every timed benchmark runs in a fresh interpreter: run in this process after the recall step
(three embedders, the local model loaded, two datasets held), a fresh store's ``context()`` took 4.40 ms p50
(4.28 ms of CPU) against 2.35–2.54 ms p50 in a fresh interpreter on the same machine minutes later.
Each writes its Markdown and JSON (and PNG plots); this script then writes ``benchmarks/results/README.md``:
the headline table (Memstack vs Mastra, measured side by side in this run), the machine, and links to every
result.

``--quick``: one conversation for recall and answers, sizes 0 and 1k for speed with one run each (a few
minutes). The full run takes about 85 minutes on the 2-core build machine: most of it Mastra (its growth to
10k messages, its one-resource growth within a 30-minute budget and its corpus within 10 minutes, its
per-conversation processes) and the local embedder's ~35 ms per text.

Usage: ``python benchmarks/run_all.py [--quick] [--no-mastra] [--skip recall,speed,resource,aws,cost,serve,cold,observation,answers]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import answer_quality, recall_quality, speed  # noqa: E402
from benchmarks.common import (  # noqa: E402
    RESULTS,
    MastraPeer,
    bench_data_path,
    machine,
    machine_line,
    markdown_table,
    write_json,
)

STEPS = ("recall", "speed", "resource", "aws", "cost", "serve", "cold", "observation", "answers")


def _section(title: str) -> None:
    sys.stderr.write(f"\n=== {title} ({time.strftime('%H:%M:%S')}) ===\n")
    sys.stderr.flush()


def _run_script(args: list[str]) -> tuple[int, str]:
    """Run a benchmark script in a fresh interpreter; returns its exit code and what it printed. Its progress
    (stderr) passes straight through: the per-resource step runs for over half an hour."""
    done = subprocess.run([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return done.returncode, done.stdout


def _options(quick: bool, options: dict[str, tuple[str, str]]) -> list[str]:
    """Command-line options given as ``{flag: (value with --quick, value of the full run)}``."""
    return [part for flag, (fast, full) in options.items() for part in (flag, fast if quick else full)]


def _script_step(script: list[str], heading: str) -> tuple[str, str]:
    """Run a benchmark script; returns its README section (``heading``, then the Markdown table lines it
    printed) and its status (``ok`` or ``exit N``)."""
    code, out = _run_script(script)
    table = "\n".join(line for line in out.splitlines() if line.startswith("|"))
    return f"{heading}:\n\n{table}\n", "ok" if code == 0 else f"exit {code}"


def aws_summary_table(stdout: str) -> str:
    """The ``summary`` block aws_requests.py prints (its last lines), as a fenced block."""
    lines = stdout.splitlines()
    start = max((i for i, line in enumerate(lines) if line.strip() == "summary"), default=None)
    if start is None:
        return "(no summary printed)"
    return "```\n" + "\n".join(lines[start:]).rstrip() + "\n```"


def aws_markdown(body: str, out: str) -> str:
    """aws_requests.md: the summary block, then the script's whole output."""
    return (
        "# Requests per turn on the AWS path (moto + the OpenSearch double)\n\n"
        + machine_line(machine())
        + " 1 run (counts are deterministic).\n\n`python benchmarks/aws_requests.py` summary "
        "(ctx = one `context()`; overlap = pairs of requests in flight at once; RRU/WRU = DynamoDB "
        "on-demand read/write request units, benchmarks/dynamodb_units.py):\n\n"
        + body
        + "\n\nFull output:\n\n```\n"
        + out.strip()
        + "\n```\n"
    )


def results_dir(quick: bool) -> Path:
    """Where a run writes: ``benchmarks/results/`` for the full run (committed), ``benchmarks/results/quick/``
    for ``--quick`` (ignored by git), so a quick check never overwrites the committed full-run figures."""
    return RESULTS / "quick" if quick else RESULTS


def _inputs(out: Path) -> list[str]:
    """aws_cost.py's inputs from this run's folder when it holds them (else its defaults, the full run's)."""
    found = []
    for flag, name in (("--requests", "aws_requests.json"), ("--observations", "observation_cost.json")):
        if (out / name).exists():
            found += [flag, str(out / name)]
    return found


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-mastra", action="store_true")
    parser.add_argument("--skip", default="", help=f"comma-separated steps to skip: {','.join(STEPS)}")
    parser.add_argument("--data", type=Path, default=None)
    args = parser.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    data = args.data or bench_data_path()
    out = results_dir(args.quick)
    out.mkdir(parents=True, exist_ok=True)
    peer = MastraPeer()
    started = time.perf_counter()
    headline: list[list[str]] = []
    sections: list[str] = []
    status: dict[str, Any] = {}

    if "recall" not in skip:
        _section("recall quality")
        rq = recall_quality.run(
            datasets=[recall_quality.dataset(n) for n in recall_quality.DATASETS],
            embedders=["hash", "wordllama", "local", "openai"],
            top_ks=[4, 8, 16],
            local_top_ks=[4],
            local_datasets=["locomo"],
            mastra=not args.no_mastra,
            quick=args.quick,
            peer=peer,
        )
        png = recall_quality.plot(rq, out / "recall_quality.png")
        rq["plot"] = png.name if png else None
        (out / "recall_quality.md").write_text(recall_quality.render(rq))
        write_json(out / "recall_quality.json", rq)
        headline += recall_quality.headline(rq)
        summary = "; ".join(
            f"{ds['title']}: "
            + ", ".join(
                f"{c['embedder']} {c['groups']['all']['evidence_recall']:.3f}"
                for c in ds["configs"]
                if c["system"] == "memstack" and c["mode"] == "hybrid" and c["top_k"] == 4
            )
            for ds in rq["datasets"]
        )
        sections.append(
            f"* [Recall quality](recall_quality.md) ([JSON](recall_quality.json), [plot](recall_quality.png)): "
            f"LoCoMo dev and LongMemEval dev; hybrid top_k 4: {summary}."
        )
        status["recall"] = "ok"

    data_args = ["--data", str(args.data)] if args.data else []
    mastra_args = ["--no-mastra"] if args.no_mastra else []
    if "speed" not in skip:
        _section("speed side by side")
        code, _ = _run_script(
            [
                "benchmarks/speed.py",
                *_options(
                    args.quick,
                    {
                        "--sizes": ("0,1000", "0,1000,10000,100000"),
                        "--runs": ("1", "3"),
                        "--mastra-max": ("10000", "10000"),
                    },
                ),
                *mastra_args,
                *data_args,
                "--out",
                str(out / "speed"),
            ]
        )
        if code == 0:
            sp = json.loads((out / "speed.json").read_text())
            headline += speed.headline(sp)
            sections.append(
                f"* [Speed side by side](speed.md) ([JSON](speed.json), [plot](speed.png)): {sp['runs']} run(s) per size."
            )
        status["speed"] = "ok" if code == 0 else f"exit {code}"

    if "resource" not in skip:
        _section("speed per resource")
        code, _ = _run_script(
            [
                "benchmarks/speed.py",
                "--scenario",
                "resource",
                *_options(
                    args.quick,
                    {
                        "--one-sizes": ("1000", "1000,10000,100000"),
                        "--corpus-sizes": ("1000,2000", "10000,100000,1000000"),
                        "--runs": ("1", "3"),
                        "--mastra-max": ("1000", "100000"),
                        "--mastra-budget": ("60", "1800"),
                        "--mastra-corpus-budget": ("60", "600"),
                    },
                ),
                *mastra_args,
                *data_args,
                "--out",
                str(out / "speed-resource"),
            ]
        )
        if code == 0:
            sr = json.loads((out / "speed-resource.json").read_text())
            held = sum(c["holds"] for c in sr["checks"])
            sections.append(
                f"* [Speed per resource](speed-resource.md) ([JSON](speed-resource.json), [plot](speed-resource.png)): "
                f"a long-lived user and a 1M-message corpus, sizes measured side by side; {held} of "
                f"{len(sr['checks'])} targets hold."
            )
        status["resource"] = "ok" if code == 0 else f"exit {code}"

    if "aws" not in skip:
        _section("AWS path under moto")
        code, printed = _run_script(["benchmarks/aws_requests.py", "--json", str(out / "aws_requests.json")])
        body = aws_summary_table(printed) if code == 0 else f"failed (exit {code})"
        (out / "aws_requests.md").write_text(aws_markdown(body, printed))
        sections.append(
            f"* [AWS requests per turn](aws_requests.md) ([JSON](aws_requests.json)):\n\n{body}\n"
        )
        status["aws"] = "ok" if code == 0 else f"exit {code}"

    if "cost" not in skip:
        _section("AWS cost per turn")
        section, status["cost"] = _script_step(
            ["benchmarks/aws_cost.py", "--out", str(out / "aws_cost"), *_inputs(out)],
            "* [AWS cost per 1,000 turns](aws_cost.md) ([JSON](aws_cost.json))",
        )
        sections.append(section)

    if "serve" not in skip:
        _section("memstack serve under load")
        quick = ["--quick"] if args.quick else []
        section, status["serve"] = _script_step(
            ["benchmarks/serve_load.py", *quick, "--out", str(out / "serve_load")],
            "* [`memstack serve` under load](serve_load.md) ([JSON](serve_load.json))",
        )
        sections.append(section)

    if "cold" not in skip:
        _section("cold start")
        runs = "3" if args.quick else "7"
        section, status["cold"] = _script_step(
            ["benchmarks/cold_start.py", "--runs", runs, "--out", str(out / "cold_start")],
            "* [Cold start](cold_start.md) ([JSON](cold_start.json))",
        )
        sections.append(section)

    if "observation" not in skip:
        _section("observational memory cost")
        section, status["observation"] = _script_step(
            [
                "benchmarks/observation_cost.py",
                "--turns",
                "500" if args.quick else "2000",
                "--out",
                str(out / "observation_cost"),
            ],
            "* [Observational memory: cost per turn](observation_cost.md) ([JSON](observation_cost.json))",
        )
        sections.append(section)

    if "answers" not in skip:
        _section("answer quality")
        aq = answer_quality.run(
            data=data,
            longmemeval=None,
            indexes=[0] if args.quick else None,
            limit=None,
            embedder="hash",
            top_k=4,
        )
        (out / "answer_quality.md").write_text(answer_quality.render(aq))
        write_json(out / "answer_quality.json", aq)
        if aq.get("skipped"):
            sections.append(f"* Answer quality: skipped — {aq['skipped']}.")
        else:
            g = aq["groups"]["all"]
            sections.append(
                f"* [Answer quality](answer_quality.md): accuracy {g['accuracy']:.3f} over {g['questions']} questions ({aq['chat_model']})."
            )
        status["answers"] = "skipped" if aq.get("skipped") else "ok"

    info = machine(peer.node_version)
    minutes = (time.perf_counter() - started) / 60
    readme = [
        "# Benchmark results",
        "",
        f"Written by `make bench` (`python benchmarks/run_all.py{' --quick' if args.quick else ''}`) in {minutes:.1f} minutes. "
        + machine_line(info),
        "",
        "## Headline: Memstack vs Mastra 1.x, same hash embedder, measured side by side in this run",
        "",
        markdown_table(["figure", "Memstack", "Mastra 1.x", "ratio", "target"], headline)
        if headline
        else "(no side-by-side figures: Mastra not run)",
        "",
        "Timings are medians over runs of each run's p50, with min–max and the run count; see each file for p95.",
        "",
    ]
    if (out / "speed.png").exists() and "speed" not in skip:
        readme += ["![context and save p50 vs stored messages](speed.png)", ""]
    readme += ["## Results", ""] + sections + [""]
    (out / "README.md").write_text("\n".join(readme))
    write_json(
        out / "run_all.json",
        {
            "machine": info,
            "quick": args.quick,
            "minutes": round(minutes, 1),
            "status": status,
            "headline": headline,
        },
    )
    print("\n".join(readme))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
