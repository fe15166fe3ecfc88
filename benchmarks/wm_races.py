"""Markdown working memory under racing tool calls (issue 13 item 1): N ``updateWorkingMemory`` calls
built from one read of the document, applied at once, on SQLite and on DynamoDB (moto).

For each backend it runs the race twice — the calls without the version the model saw (a caller that
passes nothing: the last write wins) and with it (``apply_tool_call(context=ctx)``) — and prints, side by
side, how many writers were told success, told to redo (the error result with ``current_memory``), got
``Conflict``, and how many were told success while their fact is not in the stored document: silent
losses, the defect.

Usage: ``python benchmarks/wm_races.py [--writers 16] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.store_backends import BACKENDS, memory_on  # noqa: E402

from memstack import Conflict, Memory  # noqa: E402


def race(memory: Memory, writers: int, round_no: int, *, with_version: bool) -> dict[str, int]:
    """One race on a fresh thread; the counts of what the writers were told and what was kept."""
    thread = f"race-{round_no}-{with_version}"
    base = "# Facts\n- base"
    memory.update_working_memory(resource_id=thread, working_memory=base)
    ctx = memory.context(resource_id=thread, thread_id=thread, message="hi")
    barrier = threading.Barrier(writers)
    told: dict[int, bool] = {}
    conflicts = 0
    lock = threading.Lock()

    def write(i: int) -> None:
        nonlocal conflicts
        arguments = json.dumps({"memory": f"{base}\n- fact {i}"})
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "updateWorkingMemory", "arguments": arguments},
        }
        barrier.wait()
        try:
            result = memory.apply_tool_call(
                resource_id=thread,
                thread_id=thread,
                tool_call=call,
                working_memory_version=ctx.working_memory_version if with_version else None,
            )
            with lock:
                told[i] = bool(result.parts[0].result["success"])
        except Conflict:
            with lock:
                conflicts += 1

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = memory.get_working_memory(resource_id=thread) or ""
    succeeded = [i for i, ok in told.items() if ok]
    return {
        "success": len(succeeded),
        "redo": sum(1 for ok in told.values() if not ok),
        "conflict": conflicts,
        "silent_losses": sum(1 for i in succeeded if f"- fact {i}" not in stored),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    keys = ("success", "redo", "conflict", "silent_losses")
    print(f"{args.writers} writers from one read, {args.rounds} rounds; totals over the rounds")
    print(f"{'backend':<10}{'figure':<16}{'without version':>18}{'with version':>16}")
    for backend in BACKENDS:
        with (
            tempfile.TemporaryDirectory() as tmp,
            memory_on(backend, Path(tmp), working_memory={"enabled": True}) as m,
        ):
            totals: dict[bool, dict[str, int]] = {}
            for with_version in (False, True):
                total = dict.fromkeys(keys, 0)
                for r in range(args.rounds):
                    for key, value in race(m, args.writers, r, with_version=with_version).items():
                        total[key] += value
                totals[with_version] = total
        for key in keys:
            print(f"{backend:<10}{key:<16}{totals[False][key]:>18}{totals[True][key]:>16}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
