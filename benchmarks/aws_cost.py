"""What a turn costs on AWS: dollars per 1,000 turns at three workloads and the idle monthly floor, beside the
managed peer's published prices (Amazon Bedrock AgentCore Memory).

A **turn** is what an agent does per user message: one ``POST context`` (history + hybrid recall, the query
embedded) and one ``POST messages`` saving the user message and the reply; the messages stream to the
``indexer`` (embed the reply, index both). Inputs, and where each comes from:

* **measured** (``benchmarks/results/aws_requests.json``, the real adapters against moto and the OpenSearch
  double): DynamoDB read/write request units of the context and the save (``benchmarks/dynamodb_units.py``),
  OpenSearch requests, embedding calls and the bytes of text embedded;
* **measured** here: the log bytes one turn writes (the ``api`` handler run in-process for a context and a
  save; Lambda's own START/END/REPORT lines added at their documented shape);
* **measured** (``benchmarks/results/observation_cost.json``): Observer and Reflector calls per turn with
  observational memory on;
* **modelled** (no AWS account on this machine; each figure named in ``ASSUMED``): round-trip latencies that
  set Lambda's billed duration, the indexer's batching, the Observer/Reflector token counts per call, the RAM
  per stored vector (OpenSearch's HNSW estimate) and per OCU, message retention, the peer's events and
  records per turn.

Prices: ``benchmarks/aws_prices.json`` (us-east-1, dated, each with its source page). Workloads: a hobby app
(300 turns/day), a team product (10,000/day) and a busy service (300,000/day), 90 days of messages kept
(the stack's ``messageTtlSeconds``). The idle floor is the month with no turns. Variants show the levers:
the stack as deployed (Serverless vector collection with standby replicas, 1536-d embeddings), standby
replicas off (``-c standbyReplicas=false``), 256-d embeddings (``-c embeddingDimensions=256``), and both.

Usage: ``python benchmarks/aws_cost.py [--out benchmarks/results/aws_cost]`` (writes ``.md`` and ``.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import RESULTS, machine, machine_line, markdown_table, write_report  # noqa: E402

PRICES = ROOT / "benchmarks" / "aws_prices.json"
HOURS_PER_MONTH = 730.0
DAYS_PER_MONTH = HOURS_PER_MONTH / 24
GIB = 1024**3

ASSUMED: dict[str, float] = {
    "dynamodb_ms": 8.0,  # one DynamoDB round trip from Lambda in-region
    "opensearch_ms": 25.0,  # one OpenSearch Serverless _msearch or _bulk
    "embedding_ms": 90.0,  # one OpenAI embeddings call
    "indexer_records_per_batch_busy": 20.0,  # stream records per indexer invocation at the busy workload
    "observer_input_tokens": 8_000.0,  # a buffered chunk (20 % of 30k message tokens) + prompt (docs/deploy.md)
    "observer_output_tokens": 500.0,
    "reflector_input_tokens": 42_000.0,
    "reflector_output_tokens": 10_000.0,
    "observe_lambda_seconds": 12.0,  # one Observer call's duration (a chat completion)
    "hnsw_m": 16.0,  # OpenSearch's default HNSW M
    "vector_ram_share_of_ocu": 0.5,  # k-NN graphs may use half an OCU's 6 GiB (the k-NN circuit breaker)
    "ocu_ram_gib": 6.0,
    "retention_days": 90.0,
    "index_bytes_per_message_text": 1_500.0,  # text, BM25 terms and fields per chunk besides the vector
    "xray_sampled_share_busy": 0.05,  # X-Ray's default rule: 1 request/s, then 5 %
    "peer_events_per_turn": 1.0,  # one CreateEvent carrying the user message and the reply
    "peer_retrievals_per_turn": 1.0,  # one RetrieveMemoryRecords for the turn's context
    "peer_records_per_turn": 0.1,  # long-term records extracted per turn (built-in strategies)
}
"""Modelled inputs (module docstring): change them here, the report prints them."""

LAMBDA_MEMORY_GB = {
    "context": 1769 / 1024,
    "api": 1024 / 1024,
    "indexer": 1024 / 1024,
    "sweep": 1024 / 1024,
    "reconcile": 1024 / 1024,
}
UNINDEXED_INDEX_WRITES_PER_TURN = 4.0
"""Writes of the sparse index ``by_unindexed`` per turn (1 WRU each): the save puts both id pointers in it,
the indexer's marks take them out. Index writes do not show in the requests aws_requests.py counts."""
RECONCILE_QUERIES = 16
"""Queries of one reconcile run over an empty ``by_unindexed`` (one per shard; 0.5 RRU each, eventually
consistent)."""
"""The functions' memory sizes in infra/functions.py."""

WORKLOADS = {"hobby app": 300, "team product": 10_000, "busy service": 300_000}
"""Turns per day."""


@dataclass
class Variant:
    name: str
    dimensions: int
    redundancy: bool


VARIANTS = (
    Variant("as deployed: Serverless, standby replicas, 1536-d", 1536, True),
    Variant("standby replicas off (-c standbyReplicas=false)", 1536, False),
    Variant("256-d embeddings (-c embeddingDimensions=256)", 256, True),
    Variant("256-d, standby replicas off (both flags)", 256, False),
)


def load_prices(path: Path = PRICES) -> tuple[dict[str, float], dict[str, Any]]:
    """``{name: price}`` and the whole table (its date, region and sources)."""
    table = json.loads(path.read_text())
    return {k: float(v["price"]) for k, v in table["prices"].items()}, table


def measured_turn(requests: Path) -> dict[str, float]:
    """Per-turn figures from aws_requests.json (the Mastra-defaults run): DynamoDB units, OpenSearch
    requests, embedding calls and embedded text bytes, of the context and of the save (inline indexing, which
    the deployed indexer does instead: the inline save's reads of the marks and its marks' transaction are the
    indexer's).

    Raises:
        SystemExit: the file is missing or has no request units (run aws_requests.py first).
    """
    if not requests.is_file():
        raise SystemExit(f"{requests} is missing: run python benchmarks/aws_requests.py --json {requests}")
    runs = json.loads(requests.read_text())
    run = next(r for r in runs if "defaults" in r["options"])
    ctx, save = run["context"], run["save"]
    if "dynamodb_read_units" not in ctx:
        raise SystemExit(f"{requests} has no request units: run benchmarks/aws_requests.py again")
    embedded = [c for c in run["context_calls"] + run["save_calls"] if c["service"] == "embedding"]
    return {
        "context_rru": ctx["dynamodb_read_units"],
        "save_rru": save["dynamodb_read_units"],
        "save_wru": save["dynamodb_write_units"],
        "context_dynamodb": ctx["dynamodb"],
        "save_dynamodb": save["dynamodb"],
        "opensearch_requests": ctx["opensearch"] + save["opensearch"],
        "embedding_calls": ctx["embedding"] + save["embedding"],
        "embedded_bytes": float(sum(c["request_bytes"] for c in embedded)),
        "stored_bytes": float(save["request_bytes"]),
    }


def measured_observation(path: Path) -> dict[str, float]:
    """Observer and Reflector calls per turn with observational memory on (observation_cost.json)."""
    data = json.loads(path.read_text())
    turns = float(data["turns"])
    return {
        "observer_per_turn": data["on"]["observer_calls"] / turns,
        "reflector_per_turn": data["on"]["reflector_calls"] / turns,
    }


_LOG_PROBE = """
import json, sys
sys.path.insert(0, {root!r})
from tests.integration.events import api_event
from functions.api.app import handler
for event in (
    api_event("POST", "/v1/threads/t1/messages", query={{"resource_id": "r1"}},
              body={{"messages": [{{"role": "user", "content": "warm-up"}}]}}),
):
    handler(event, None)
sys.stdout.write("\\n--- measured ---\\n")
handler(api_event("POST", "/v1/threads/t1/context", query={{"resource_id": "r1"}},
                  body={{"message": "What did I plant last spring?"}}), None)
handler(api_event("POST", "/v1/threads/t1/messages", query={{"resource_id": "r1"}},
                  body={{"messages": [{{"role": "user", "content": "What did I plant last spring?"}},
                                       {{"role": "assistant", "content": "Tomatoes and basil."}}]}}), None)
"""

LAMBDA_PLATFORM_LOG_BYTES = 420
"""Lambda's START, END and REPORT lines of one invocation (with the X-Ray segment id), in bytes."""


def measured_log_bytes() -> float:
    """Bytes the ``api`` handler logs for one context and one save (INFO level, as deployed), plus Lambda's
    platform lines for the turn's three invocations (context, save, indexer)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("MEMSTACK_", "OPENAI_", "POWERTOOLS_"))
        }
        env |= {
            "MEMSTACK_BACKEND": "sqlite",
            "MEMSTACK_DB_PATH": str(Path(tmp) / "m.db"),
            "MEMSTACK_EMBEDDER": "hash",
            "MEMSTACK_INDEXING": "inline",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "POWERTOOLS_SERVICE_NAME": "memstack-api",
            "PYTHONPATH": str(ROOT / "shared"),
        }
        done = subprocess.run(
            [sys.executable, "-c", _LOG_PROBE.format(root=str(ROOT))],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            check=True,
        )
    logged = done.stdout.split("--- measured ---\n", 1)[1]
    return float(len(logged.encode())) + 3 * LAMBDA_PLATFORM_LOG_BYTES


def vector_ram_bytes(dimensions: int) -> float:
    """HNSW memory per vector, OpenSearch's estimate: ``1.1 * (4 * d + 8 * M)`` bytes."""
    return 1.1 * (4 * dimensions + 8 * ASSUMED["hnsw_m"])


def _half_ocus(need: float) -> float:
    """OCUs in Serverless steps: 0.5, then whole OCUs."""
    return 0.5 if need <= 0.5 else float(math.ceil(need))


def search_ocus(stored_messages: float, variant: Variant) -> tuple[float, float]:
    """``(indexing, search)`` OCUs of a vector collection holding ``stored_messages`` vectors: the search
    side holds every graph in RAM; the indexing side stays at its floor (the workloads here index well under
    one OCU's throughput). Standby replicas double both."""
    usable = ASSUMED["ocu_ram_gib"] * GIB * ASSUMED["vector_ram_share_of_ocu"]
    search = _half_ocus(stored_messages * vector_ram_bytes(variant.dimensions) / usable)
    indexing = 0.5
    factor = 2.0 if variant.redundancy else 1.0
    return indexing * factor, search * factor


def turn_cost(
    p: dict[str, float], m: dict[str, float], log_bytes: float, turns_per_day: float
) -> dict[str, float]:
    """Dollars of one turn by line (what scales with turns), at a given rate (batching and X-Ray sampling
    depend on it)."""
    busy = turns_per_day >= 100_000
    records_per_batch = ASSUMED["indexer_records_per_batch_busy"] if busy else 2.0
    context_s = (ASSUMED["embedding_ms"] + ASSUMED["opensearch_ms"] + ASSUMED["dynamodb_ms"] + 10) / 1000
    save_s = (m["save_dynamodb"] * ASSUMED["dynamodb_ms"] + 10) / 1000
    indexer_s = (ASSUMED["embedding_ms"] + ASSUMED["opensearch_ms"] + 2 * ASSUMED["dynamodb_ms"] + 10) / 1000
    indexer_invocations = 2.0 / records_per_batch
    gb_seconds = (
        context_s * LAMBDA_MEMORY_GB["context"]
        + save_s * LAMBDA_MEMORY_GB["api"]
        + indexer_s * LAMBDA_MEMORY_GB["indexer"] * indexer_invocations
    )
    # the measured save indexes inline, so it holds the indexer's DynamoDB work: the BatchGetItem of the two
    # pointers' marks and the marks' TransactWriteItems; the sparse index's writes come on top
    rru = m["context_rru"] + m["save_rru"]
    wru = m["save_wru"] + UNINDEXED_INDEX_WRITES_PER_TURN
    embed_tokens = m["embedded_bytes"] / 4  # ~4 bytes of English per token
    sampled = ASSUMED["xray_sampled_share_busy"] if busy else 1.0
    return {
        "API Gateway (2 REST requests)": 2 * p["apigw_rest_request"],
        "Lambda requests": (2 + indexer_invocations) * p["lambda_request"],
        "Lambda duration": gb_seconds * p["lambda_arm_gb_second"],
        "DynamoDB reads": rru * p["dynamodb_rru"],
        "DynamoDB writes": wru * p["dynamodb_wru"],
        "DynamoDB stream reads (Lambda trigger)": 0.0,
        "embeddings": embed_tokens * p["openai_embedding_token"],
        "CloudWatch Logs": log_bytes / 1e9 * p["logs_ingest_gb"],
        "X-Ray traces": (2 + indexer_invocations) * sampled * p["xray_trace"],
    }


def observation_cost(p: dict[str, float], o: dict[str, float]) -> float:
    """Dollars per turn of observational memory (Observer/Reflector tokens, the observe Lambda, Step
    Functions' transitions: Observe, Choice, Reflect or Done)."""
    observer = (
        ASSUMED["observer_input_tokens"] * p["openai_mini_input_token"]
        + ASSUMED["observer_output_tokens"] * p["openai_mini_output_token"]
    )
    reflector = (
        ASSUMED["reflector_input_tokens"] * p["openai_mini_input_token"]
        + ASSUMED["reflector_output_tokens"] * p["openai_mini_output_token"]
    )
    lam = ASSUMED["observe_lambda_seconds"] * LAMBDA_MEMORY_GB["api"] * p["lambda_arm_gb_second"]
    steps = 4 * p["sfn_transition"]
    return o["observer_per_turn"] * (observer + lam + steps) + o["reflector_per_turn"] * (reflector + lam)


def fixed_monthly(
    p: dict[str, float], variant: Variant, stored_messages: float, stored_bytes: float
) -> dict[str, float]:
    """Dollars per month that do not scale with this month's turns: search capacity and storage, DynamoDB
    storage and backups, the sweep and reconcile schedules, the secret, alarms and the dashboard."""
    indexing, search = search_ocus(stored_messages, variant)
    index_gb = stored_messages * (4 * variant.dimensions + ASSUMED["index_bytes_per_message_text"]) / 1e9
    table_gb = stored_bytes / 1e9
    sweeps = 30.42 * 24 * 12  # every 5 minutes
    sweep_gb_s = sweeps * 0.3 * LAMBDA_MEMORY_GB["sweep"]
    reconciles = 30.42 * 24 * 4  # every 15 minutes
    reconcile_gb_s = reconciles * 0.3 * LAMBDA_MEMORY_GB["reconcile"]
    return {
        "OpenSearch OCUs": (indexing + search) * HOURS_PER_MONTH * p["aoss_ocu_hour"],
        "OpenSearch storage": index_gb * p["aoss_storage_gb_month"],
        "DynamoDB storage + PITR": table_gb * (p["dynamodb_storage_gb_month"] + p["dynamodb_pitr_gb_month"]),
        "sweep (every 5 min)": sweeps * (p["lambda_request"] + p["xray_trace"])
        + sweep_gb_s * p["lambda_arm_gb_second"],
        "reconcile (every 15 min)": reconciles
        * (p["lambda_request"] + p["xray_trace"] + RECONCILE_QUERIES * 0.5 * p["dynamodb_rru"])
        + reconcile_gb_s * p["lambda_arm_gb_second"],
        "secret": p["secret_month"],
        "alarms (20) + dashboard": 20 * p["cloudwatch_alarm_month"] + p["cloudwatch_dashboard_month"],
    }


def peer_monthly(p: dict[str, float], turns_per_day: float) -> float:
    """AgentCore Memory's published prices for the same turns: events, retrievals and stored records."""
    month = turns_per_day * DAYS_PER_MONTH
    records = turns_per_day * ASSUMED["retention_days"] * ASSUMED["peer_records_per_turn"]
    return (
        month
        * (
            ASSUMED["peer_events_per_turn"] * p["agentcore_event"]
            + ASSUMED["peer_retrievals_per_turn"] * p["agentcore_retrieval"]
        )
        + records * p["agentcore_record_month"]
    )


def run(requests: Path, observations: Path) -> dict[str, Any]:
    p, table = load_prices()
    m = measured_turn(requests)
    o = measured_observation(observations)
    log_bytes = measured_log_bytes()
    per_message_bytes = m["stored_bytes"] / 2
    rows = []
    for variant in VARIANTS:
        floor = fixed_monthly(p, variant, 0, 0)
        for name, per_day in WORKLOADS.items():
            month_turns = per_day * DAYS_PER_MONTH
            stored = per_day * ASSUMED["retention_days"] * 2
            per_turn = turn_cost(p, m, log_bytes, per_day)
            fixed = fixed_monthly(p, variant, stored, stored * per_message_bytes)
            variable = sum(per_turn.values()) * month_turns
            total = variable + sum(fixed.values())
            peer = peer_monthly(p, per_day)
            rows.append(
                {
                    "variant": variant.name,
                    "workload": name,
                    "turns_per_day": per_day,
                    "monthly": round(total, 2),
                    "per_1000_turns": round(total / month_turns * 1000, 4),
                    "per_1000_turns_variable": round(sum(per_turn.values()) * 1000, 4),
                    "observational_memory_per_1000_turns": round(observation_cost(p, o) * 1000, 4),
                    "peer_monthly": round(peer, 2),
                    "peer_per_1000_turns": round(peer / month_turns * 1000, 4),
                    "ocus": sum(search_ocus(stored, variant)),
                    "fixed": {k: round(v, 2) for k, v in fixed.items()},
                    "per_turn": {k: v for k, v in per_turn.items()},
                }
            )
        rows.append(
            {
                "variant": variant.name,
                "workload": "idle floor",
                "turns_per_day": 0,
                "monthly": round(sum(floor.values()), 2),
                "fixed": {k: round(v, 2) for k, v in floor.items()},
                "ocus": sum(search_ocus(0, variant)),
                "peer_monthly": 0.0,
            }
        )
    return {
        "machine": machine(),
        "prices_as_of": table["as_of"],
        "region": table["region"],
        "sources": sorted({v["source"] for v in table["prices"].values()}),
        "measured": m | o | {"log_bytes_per_turn": log_bytes},
        "assumed": ASSUMED,
        "rows": rows,
        "snap_start": snap_start_cost(p),
    }


def _money(value: float) -> str:
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def render(result: dict[str, Any]) -> str:
    rows = result["rows"]
    m = result["measured"]
    lines = [
        "# What a turn costs on AWS (us-east-1)",
        "",
        f"`python benchmarks/aws_cost.py`; prices of {result['prices_as_of']} (benchmarks/aws_prices.json, "
        f"{result['region']}, on-demand list prices, no free tier). " + machine_line(result["machine"]),
        "",
        "A turn = one `POST context` + one `POST messages` (user message and reply) + the indexer's share. "
        "Workloads: hobby app 300 turns/day, team product 10,000/day, busy service 300,000/day; 90 days of "
        "messages kept. Per-turn requests, DynamoDB units, embedded text and log bytes are measured "
        "(aws_requests.json, this script); latencies, batching, token counts per Observer call and RAM per "
        "vector are modelled (listed below).",
        "",
    ]
    table = []
    for r in rows:
        if r["workload"] == "idle floor":
            table.append([r["variant"], "idle floor", "0", _money(r["monthly"]), "–", "–", "$0"])
            continue
        table.append(
            [
                r["variant"],
                r["workload"],
                f"{r['turns_per_day']:,}",
                _money(r["monthly"]),
                _money(r["per_1000_turns"]),
                _money(r["per_1000_turns_variable"]),
                f"{_money(r['peer_monthly'])} ({_money(r['peer_per_1000_turns'])}/1k)",
            ]
        )
    lines += [
        markdown_table(
            [
                "variant",
                "workload",
                "turns/day",
                "Memstack / month",
                "per 1,000 turns (all-in)",
                "per 1,000 turns (per-turn lines only)",
                "AgentCore Memory / month",
            ],
            table,
        ),
        "",
        "The idle floor (a month with no turns) by variant: "
        + ", ".join(f"{r['variant']}: {_money(r['monthly'])}" for r in rows if r["workload"] == "idle floor")
        + ". Standby replicas are the stack's `standbyReplicas` flag (docs/deploy.md; default `true`).",
        "",
        snap_start_line(result["snap_start"]),
        "",
        "Per-turn lines of one turn (team product), in dollars per 1,000 turns:",
        "",
    ]
    team = next(r for r in rows if r["workload"] == "team product")
    lines.append(
        markdown_table(
            ["line", "$ per 1,000 turns"], [[k, f"{v * 1000:.5f}"] for k, v in team["per_turn"].items()]
        )
    )
    lines += [
        "",
        f"Observational memory on adds {_money(team['observational_memory_per_1000_turns'])} per 1,000 turns "
        f"(Observer {m['observer_per_turn'] * 1000:.1f} and Reflector {m['reflector_per_turn'] * 1000:.1f} "
        "calls per 1,000 turns, measured; gpt-4o-mini tokens per call modelled).",
        "",
        "Monthly lines that do not scale with turns (as deployed):",
        "",
    ]
    deployed = [r for r in rows if r["variant"] == VARIANTS[0].name]
    keys = list(deployed[0]["fixed"])
    lines.append(
        markdown_table(
            ["line", *[r["workload"] for r in deployed]],
            [[k, *[_money(r["fixed"][k]) for r in deployed]] for k in keys]
            + [["OCUs", *[f"{r['ocus']:g}" for r in deployed]]],
        )
    )
    lines += [
        "",
        f"Measured per turn: DynamoDB {m['context_rru']:g} RRU (context) + {m['save_rru']:g} RRU / "
        f"{m['save_wru']:g} WRU (save), {m['opensearch_requests']:g} OpenSearch requests, "
        f"{m['embedding_calls']:g} embedding calls over {m['embedded_bytes']:g} bytes of text, "
        f"{m['log_bytes_per_turn']:g} log bytes.",
        "",
        "Modelled: " + ", ".join(f"{k} = {v:g}" for k, v in result["assumed"].items()) + ".",
        "",
        "Sources: " + ", ".join(result["sources"]) + ".",
    ]
    return "\n".join(lines) + "\n"


SNAP_START_FUNCTIONS = ("api", "context")
"""The functions ``-c snapStart=true`` gives SnapStart (infra/functions.py ``SNAP_START_FUNCTIONS``)."""


def snap_start_cost(prices: dict[str, float]) -> dict[str, float]:
    """What ``-c snapStart=true`` (off by default) adds: the snapshot cache of the api and context functions'
    live versions all month (older versions are deleted on deploy), and a restore per cold start.

    Returns:
        ``{"gb": memory of the snapshotted functions, "monthly": cache dollars a month,
        "per_1000_cold_starts": restore dollars per 1,000 cold starts of the context function}``.
    """
    gb = sum(LAMBDA_MEMORY_GB[name] for name in SNAP_START_FUNCTIONS)
    return {
        "gb": round(gb, 3),
        "monthly": round(gb * HOURS_PER_MONTH * 3600 * prices["lambda_snapstart_cache_gb_second"], 2),
        "per_1000_cold_starts": round(
            LAMBDA_MEMORY_GB["context"] * 1000 * prices["lambda_snapstart_restore_gb"], 4
        ),
    }


def snap_start_line(cost: dict[str, float]) -> str:
    """One report line for ``snap_start_cost``."""
    return (
        f'SnapStart (`-c snapStart=true`, off by default; docs/deploy.md "Cold start") adds {_money(cost["monthly"])} '
        f"a month to every row, idle floor included (the snapshot cache of the api and context functions, "
        f"{cost['gb']:.2f} GB together), plus {_money(cost['per_1000_cold_starts'])} per 1,000 cold starts of "
        "the context function."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=Path, default=RESULTS / "aws_requests.json")
    parser.add_argument("--observations", type=Path, default=RESULTS / "observation_cost.json")
    parser.add_argument("--out", type=Path, default=RESULTS / "aws_cost")
    args = parser.parse_args(argv)
    result = run(args.requests, args.observations)
    write_report(args.out, render(result), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
