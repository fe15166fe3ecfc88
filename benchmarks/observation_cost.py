"""What observational memory costs Memstack's own code per turn, side by side in one run.

The same LoCoMo turns are replayed into one long thread twice, on the embedded default (SQLite, hash
embedder): once without observational memory (Mastra's ``last_messages`` history) and once with it at
Mastra's defaults. The Observer and Reflector are an instant scripted model (tests/observation_support.py),
so the figures are Memstack's bookkeeping — counting unobserved tokens after each save, reading the record
and the unobserved tail for each context — not a model's latency. With ``--inline`` the background step
runs inside the save (its work is then included in save times).

Prints a Markdown table (p50/p95 in milliseconds and the ratio on/off) and the largest context in tokens,
and writes ``benchmarks/results/observation_cost.{md,json}``.

Usage: ``python benchmarks/observation_cost.py [--turns 2000] [--inline]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import RESULTS, machine, machine_line, markdown_table, percentile, write_report  # noqa: E402
from tests.observation_support import locomo_turns, om_memory  # noqa: E402

from memstack.adapters.testing import RecordingScheduler, ScriptedChatModel  # noqa: E402


def run(turns: int, *, inline: bool) -> dict[str, Any]:
    """Replay ``turns`` turns with the layer off and on; returns the timings (ms) and context sizes."""
    data = locomo_turns(turns)
    result: dict[str, Any] = {"turns": turns, "inline": inline}
    for label, om in (("off", False), ("on", True)):
        chat = ScriptedChatModel()
        # jobs are kept and run between turns (outside the timed calls), as a worker thread or Step
        # Functions would
        deferred = None if inline else RecordingScheduler()
        memory = om_memory(chat, scheduler=deferred, observational_memory=om, semantic_recall=True)
        save_ms: list[float] = []
        context_ms: list[float] = []
        largest = 0
        with memory:
            for i, turn in enumerate(data):
                t0 = time.perf_counter()
                ctx = memory.context(thread_id="t", resource_id="r", message=turn["content"])
                t1 = time.perf_counter()
                memory.save_messages(thread_id="t", resource_id="r", messages=[turn])
                t2 = time.perf_counter()
                context_ms.append((t1 - t0) * 1000)
                save_ms.append((t2 - t1) * 1000)
                if i % 50 == 0:
                    largest = max(largest, ctx.token_count)
                if deferred is not None:
                    while deferred.jobs:
                        memory.run_observation_job(deferred.jobs.pop(0))
            rec = memory.get_observation_record(resource_id="r", thread_id="t") if om else None
        result[label] = {
            "save_p50": percentile(save_ms, 0.5),
            "save_p95": percentile(save_ms, 0.95),
            "context_p50": percentile(context_ms, 0.5),
            "context_p95": percentile(context_ms, 0.95),
            "largest_context_tokens": largest,
            "observer_calls": chat.count("observer"),
            "reflector_calls": chat.count("reflector"),
            "generations": rec.generation_count if rec else 0,
        }
    return result


def report(result: dict[str, Any]) -> str:
    """The Markdown report of ``run``."""
    off, on = result["off"], result["on"]
    rows = [
        [name, f"{off[key]:.2f}", f"{on[key]:.2f}", f"{on[key] / off[key]:.2f}x" if off[key] else "-"]
        for name, key in (
            ("save ms p50", "save_p50"),
            ("save ms p95", "save_p95"),
            ("context ms p50", "context_p50"),
            ("context ms p95", "context_p95"),
        )
    ]
    rows.append(
        [
            "largest context (tokens, every 50th turn)",
            str(off["largest_context_tokens"]),
            str(on["largest_context_tokens"]),
            "",
        ]
    )
    where = "inside the save" if result["inline"] else "between turns (not timed)"
    return (
        f"# Observational memory: cost per turn\n\n{result['turns']} LoCoMo turns into one thread, SQLite + hash "
        f"embedder, Mastra's defaults; scripted instant model, background step {where}. "
        f"Observer calls {on['observer_calls']}, Reflector calls {on['reflector_calls']}, "
        f"generations {on['generations']}.\n\n"
        + markdown_table(["figure", "layer off", "layer on", "on/off"], rows)
        + f"\n\n{machine_line(machine())}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=2_000)
    parser.add_argument("--inline", action="store_true", help="run the background step inside the save")
    parser.add_argument("--out", type=Path, default=RESULTS / "observation_cost", help="path without suffix")
    args = parser.parse_args(argv)
    result = run(args.turns, inline=args.inline)
    write_report(args.out, report(result), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
