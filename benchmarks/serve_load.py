"""Load on ``memstack serve`` (127.0.0.1 only, bounded): HTTP context latency beside the library's, keep-alive
throughput with several clients, and a burst of simultaneous connections.

Workload: LoCoMo conversation 0 (419 messages) saved into one thread of a fresh SQLite file with the hash
embedder (so the figures are the server's and the store's, not an embedding model's); every request asks the
context of a new turn — ``POST /v1/threads/<t>/context`` with one of the conversation's questions as the
new message (history + hybrid semantic recall over the resource, nothing saved).

Measured in one run, side by side:

1. **library**: ``Memory.context`` in this process on the same file, ``--requests`` calls → p50/p99 ms;
2. **1 client**: one keep-alive HTTP connection to ``memstack serve`` (a subprocess), ``--requests``
   sequential calls → p50/p99 ms and the ratio HTTP p50 / library p50;
3. **N clients** (``--clients``, default 4): each a thread with its own keep-alive connection, sending
   back to back for ``--seconds`` (bounded: at most ``--requests`` × 20 calls in all) → requests/s, p50, p99;
4. **health**: one keep-alive connection sending ``GET /v1/health`` (no ``Memory`` call): the server's
   CPU per request here is what the HTTP server and the resolver cost on their own;
5. **burst**: ``--burst`` (default 64) connections opened at once, one request each → the slowest connect
   and the slowest answer (a listen backlog that is too small shows as connects of a second or more).

Phases 2-5 run once per ``--workers`` value (default ``1,2``: the single-process server, then
``memstack serve --workers 2``), on the same file, side by side in one run. With ``--baseline DIR`` (another
checkout, e.g. a worktree of ``main``) they run a second time against a server started from that checkout's
``shared/`` on the same file and machine, so a change is measured before/after in one run under the same
load: both servers run at once and the trees take turns phase by phase. With ``--rounds R`` each phase runs
``R`` times per tree, still taking turns, and the table shows each tree's median round (the round whose
requests/s is the median); the summary lists the 4-client rounds one by one. On a shared machine a burst of
other work then falls on one round of each tree rather than on one tree's whole run.

CPU: for each load phase the report gives the server's CPU (every process of it, from ``/proc``) and the
benchmark process's (the clients), in ms per request, and how busy the machine's cores were (``/proc/stat``,
every process, other users' included). The client runs in this process (threads), the server in others:
all share the machine's cores, as they do on a developer's laptop; on a 2-core machine the clients' CPU
is taken from the server's. So phases 2-4 send through ``LeanConnection`` (a bare socket, request bytes
made once: about a fifth of ``http.client``'s 0.2-0.35 ms of CPU per request); the burst opens its
connections with ``http.client``. Targets: HTTP p50 <= 2x the library's with 1 client; >= 1,000 requests/s with
4 clients on a 2-core machine; p99 <= 20 ms. Benchmarks print; they never assert.

Usage: ``python benchmarks/serve_load.py [--quick] [--requests 400] [--clients 4] [--seconds 5]
[--burst 64] [--workers 1,2] [--baseline ../main] [--rounds 3] [--out benchmarks/results/serve_load]``
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import RESULTS, machine, machine_line, markdown_table, percentile, write_report  # noqa: E402

HOST = "127.0.0.1"
RESOURCE = "load"
THREAD = "load-t"
CONVERSATION = 0
START_TIMEOUT_S = 60.0


@dataclass
class Phase:
    """One measured phase: latencies (ms) of its requests and its wall time (s)."""

    name: str
    latencies: list[float]
    seconds: float
    errors: int = 0
    cpu: CpuUse | None = None

    def figures(self) -> dict[str, Any]:
        n = len(self.latencies)
        out: dict[str, Any] = {
            "requests": n,
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "requests_per_s": round(n / self.seconds, 1) if self.seconds else None,
            "p50_ms": round(percentile(self.latencies, 0.5), 2) if n else None,
            "p99_ms": round(percentile(self.latencies, 0.99), 2) if n else None,
            "max_ms": round(max(self.latencies), 2) if n else None,
        }
        if self.cpu is not None and n:
            out |= {
                "server_cpu_ms_per_request": round(self.cpu.server_s * 1000 / n, 3),
                "client_cpu_ms_per_request": round(self.cpu.client_s * 1000 / n, 3),
                "machine_busy_cores": round(self.cpu.busy_cores, 2),
            }
        return out


@dataclass
class CpuUse:
    """CPU seconds of the server's processes and of this one (the clients) over a phase, and the machine's
    busy cores (every process's, from ``/proc/stat``) averaged over it."""

    server_s: float
    client_s: float
    busy_cores: float


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (``/proc/<pid>/stat``; 0 when gone or not on Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _machine_ticks() -> tuple[float, float]:
    """(busy, total) jiffies of every core since boot (``/proc/stat``; zeros off Linux)."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return float(sum(values) - idle), float(sum(values))


class CpuMeter:
    """Measures a phase's ``CpuUse`` for the server process ``pid`` and its worker processes."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.pids = [pid, *_children(pid)]
        self.server = sum(_process_cpu(p) for p in self.pids)
        self.client = time.process_time()
        self.busy, self.total = _machine_ticks()

    def done(self) -> CpuUse:
        server = sum(_process_cpu(p) for p in self.pids) - self.server
        busy, total = _machine_ticks()
        cores = os.cpu_count() or 1
        share = (busy - self.busy) / (total - self.total) if total > self.total else 0.0
        return CpuUse(server, time.process_time() - self.client, share * cores)


def seed(db: Path, data: Path) -> list[str]:
    """Save conversation 0 into ``THREAD`` of ``RESOURCE`` (hash embedder); return its questions."""
    from memstack import Memory, locomo

    conv = locomo.load(data)[CONVERSATION]
    memory = Memory.local(db, embedder="hash")
    try:
        turns = [t for session in conv.sessions.values() for t in session]
        memory.save_messages(
            thread_id=THREAD,
            resource_id=RESOURCE,
            messages=[
                {"id": t.message_id, "role": t.role, "content": t.text, "created_at": t.created_at}
                for t in turns
            ],
        )
    finally:
        memory.close()
    return [q.text for q in conv.questions]


def library_phase(db: Path, questions: list[str], requests: int) -> Phase:
    """``Memory.context`` in this process, ``requests`` calls (after a warm-up pass)."""
    from memstack import Memory

    memory = Memory.local(db, embedder="hash")
    try:
        for q in questions[:20]:
            memory.context(thread_id=THREAD, resource_id=RESOURCE, message=q)
        latencies = []
        started = time.perf_counter()
        for i in range(requests):
            t0 = time.perf_counter()
            memory.context(thread_id=THREAD, resource_id=RESOURCE, message=questions[i % len(questions)])
            latencies.append((time.perf_counter() - t0) * 1000)
        return Phase("library", latencies, time.perf_counter() - started)
    finally:
        memory.close()


class Server:
    """``memstack serve`` on a free port of 127.0.0.1, in a subprocess, stopped on exit.

    Args:
        source: the checkout whose ``shared/`` the server imports ``memstack`` from (this one by default).
    """

    def __init__(self, db: Path, workers: int, source: Path = ROOT) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTACK_", "OPENAI_"))}
        env["PYTHONPATH"] = str(source / "shared")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memstack.cli", "serve", "--host", HOST, "--port", "0"]
            + ["--db", str(db), "--embedder", "hash", "--workers", str(workers)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # the access log: one line per request
            text=True,
            env=env,
        )
        self.port = self._port()

    def _port(self) -> int:
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            if "listening on" in line:
                return int(line.split("listening on", 1)[1].split()[0].rsplit(":", 1)[1])
        self.stop()
        raise RuntimeError("memstack serve did not start")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def _body(question: str) -> bytes:
    return json.dumps({"message": question}).encode()


PATH = f"/v1/threads/{THREAD}/context?resource_id={RESOURCE}"
HEADERS = {"Content-Type": "application/json"}


def _call(conn: http.client.HTTPConnection, question: str) -> bool:
    conn.request("POST", PATH, body=_body(question), headers=HEADERS)
    response = conn.getresponse()
    response.read()
    return response.status == 200


class LeanConnection:
    """A keep-alive HTTP/1.1 client on a bare socket: sends request bytes made once, reads the status
    line, ``Content-Length`` and the body, nothing else. It shares the machine's cores with the server, so
    every microsecond it spends is taken from the server: ``http.client`` (header parsing through the email
    package, a response object per call) cost 0.2-0.35 ms of CPU per request here, this about a fifth of
    that (the reports' "client CPU ms/request" column). Only for this benchmark's own server: it expects
    ``Content-Length`` on every answer (``memstack serve`` always sends it)."""

    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer = b""

    def send(self, request: bytes) -> int:
        """Send one request (whole, as bytes); returns the answer's status after reading its body."""
        self.sock.sendall(request)
        data = self._buffer
        end = data.find(b"\r\n\r\n")
        while end < 0:
            data += self._recv()
            end = data.find(b"\r\n\r\n")
        head, body = data[:end], data[end + 4 :]
        at = head.lower().index(b"\r\ncontent-length:") + 17
        stop = head.find(b"\r\n", at)
        length = int(head[at : stop if stop > 0 else len(head)])
        while len(body) < length:
            body += self._recv()
        self._buffer = body[length:]
        return int(head[9:12])

    def _recv(self) -> bytes:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk

    def close(self) -> None:
        self.sock.close()


def context_request(port: int, question: str) -> bytes:
    """The bytes of a context request for ``question`` (what ``http.client`` sends, made once)."""
    body = _body(question)
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: {HOST}:{port}\r\nAccept-Encoding: identity\r\n"
        f"Content-Length: {len(body)}\r\nContent-Type: application/json\r\n\r\n"
    )
    return head.encode() + body


def health_request(port: int) -> bytes:
    """The bytes of ``GET /v1/health``."""
    return f"GET /v1/health HTTP/1.1\r\nHost: {HOST}:{port}\r\nAccept-Encoding: identity\r\n\r\n".encode()


def one_client_phase(
    server: Server, questions: list[str], requests: int, *, health: bool = False, name: str = "1 client"
) -> Phase:
    """One keep-alive connection (``LeanConnection``) sending ``requests`` calls one after another: context
    requests, or with ``health`` ``GET /v1/health`` (what the HTTP server and the resolver cost without
    ``Memory``)."""
    made = [health_request(server.port)] if health else [context_request(server.port, q) for q in questions]
    conn = LeanConnection(server.port)
    try:
        for i in range(20):
            conn.send(made[i % len(made)])
        latencies, errors = [], 0
        meter = CpuMeter(server.process.pid)
        started = time.perf_counter()
        for i in range(requests):
            t0 = time.perf_counter()
            errors += conn.send(made[i % len(made)]) != 200
            latencies.append((time.perf_counter() - t0) * 1000)
        return Phase(name, latencies, time.perf_counter() - started, errors, meter.done())
    finally:
        conn.close()


def many_clients_phase(server: Server, questions: list[str], clients: int, seconds: float, cap: int) -> Phase:
    """``clients`` keep-alive connections (``LeanConnection``) sending back to back for ``seconds`` (at most
    ``cap`` calls in all)."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)
    sent = [0]
    made = [context_request(server.port, q) for q in questions]

    def run(k: int) -> None:
        conn = LeanConnection(server.port)
        mine: list[float] = []
        bad = 0
        try:
            conn.send(made[k % len(made)])  # connected and warm before the clock starts
            start.wait()
            i = k
            while time.perf_counter() < deadline:
                with lock:
                    if sent[0] >= cap:
                        break
                    sent[0] += 1
                t0 = time.perf_counter()
                bad += conn.send(made[i % len(made)]) != 200
                mine.append((time.perf_counter() - t0) * 1000)
                i += clients
        finally:
            conn.close()
            with lock:
                latencies.extend(mine)
                errors[0] += bad

    deadline = float("inf")
    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    deadline = time.perf_counter() + seconds
    start.wait()
    meter = CpuMeter(server.process.pid)
    started = time.perf_counter()
    deadline = started + seconds
    for t in threads:
        t.join(seconds + 60)
    elapsed = time.perf_counter() - started
    return Phase(f"{clients} clients", latencies, elapsed, errors[0], meter.done())


def burst_phase(port: int, questions: list[str], burst: int) -> dict[str, Any]:
    """``burst`` connections opened at once, one request each: the slowest connect and answer (ms)."""
    connects: list[float] = []
    totals: list[float] = []
    errors = [0]
    lock = threading.Lock()
    go = threading.Event()

    def run(k: int) -> None:
        go.wait()
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection(HOST, port, timeout=30)
        try:
            conn.connect()
            t1 = time.perf_counter()
            ok = _call(conn, questions[k % len(questions)])
            t2 = time.perf_counter()
            with lock:
                connects.append((t1 - t0) * 1000)
                totals.append((t2 - t0) * 1000)
                errors[0] += not ok
        except OSError:
            with lock:
                errors[0] += 1
        finally:
            conn.close()

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(burst)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(90)
    return {
        "connections": burst,
        "errors": errors[0],
        "connect_max_ms": round(max(connects), 1) if connects else None,
        "connect_over_1s": sum(c > 1000 for c in connects),
        "answer_p50_ms": round(percentile(totals, 0.5), 1) if totals else None,
        "answer_max_ms": round(max(totals), 1) if totals else None,
    }


def run(
    data: Path,
    requests: int,
    clients: int,
    seconds: float,
    burst: int,
    workers: list[int],
    baseline: Path | None = None,
    rounds: int = 1,
) -> dict[str, Any]:
    servers: list[dict[str, Any]] = []
    sources = [("this checkout", ROOT)] + ([("baseline", baseline)] if baseline is not None else [])
    with tempfile.TemporaryDirectory(prefix="memstack-serve-load-") as tmp:
        db = Path(tmp) / "load.db"
        questions = seed(db, data)
        lib = library_phase(db, questions, requests).figures()
        for n in workers:
            with contextlib.ExitStack() as stack:
                started = [stack.enter_context(Server(db, n, source)) for _, source in sources]
                taken: list[dict[str, list[dict[str, Any]]]] = [
                    {"one": [], "health": [], "many": []} for _ in sources
                ]
                # Phase by phase, the trees take turns, round after round: both see the machine's load of
                # the same minutes, and a burst of other work falls on one round of each, not on one tree.
                for _ in range(rounds):
                    for server, mine in zip(started, taken, strict=True):
                        mine["one"].append(one_client_phase(server, questions, requests).figures())
                    for server, mine in zip(started, taken, strict=True):
                        health = one_client_phase(server, questions, requests, health=True, name="health")
                        mine["health"].append(health.figures())
                    for server, mine in zip(started, taken, strict=True):
                        many = many_clients_phase(server, questions, clients, seconds, cap=requests * 20)
                        mine["many"].append(many.figures())
                bursts = [burst_phase(server.port, questions, burst) for server in started]
            for (label, source), mine, burst_result in zip(sources, taken, bursts, strict=True):
                one = median_round(mine["one"])
                servers.append(
                    {
                        "server": label,
                        "source": _describe(source),
                        "workers": n,
                        "one_client": one,
                        "health_one_client": median_round(mine["health"]),
                        "many_clients": median_round(mine["many"]),
                        "rounds": mine,
                        "burst": burst_result,
                        "ratio_http_to_library_p50": round(one["p50_ms"] / lib["p50_ms"], 2),
                    }
                )
    return {
        "machine": machine(),
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "workload": {
            "conversation": CONVERSATION,
            "questions": len(questions),
            "embedder": "hash",
            "requests": requests,
            "clients": clients,
            "seconds": seconds,
            "workers": workers,
            "rounds": rounds,
            "baseline": _describe(baseline) if baseline is not None else None,
        },
        "library": lib,
        "servers": servers,
        "targets": {"ratio_p50": 2.0, "requests_per_s": 1000, "p99_ms": 20.0},
    }


def median_round(figures: list[dict[str, Any]]) -> dict[str, Any]:
    """The round whose requests/s is the median of the rounds' (the lower middle one of an even count)."""
    ordered = sorted(figures, key=lambda f: f.get("requests_per_s") or 0.0)
    return ordered[(len(ordered) - 1) // 2]


def _describe(source: Path) -> str:
    """A checkout named by its folder and commit (``main@1a2b3c4``), or its folder alone outside git."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return source.name
    return f"{source.name}@{commit}"


def _cpu_cells(phase: dict[str, Any]) -> list[Any]:
    return [
        phase.get("server_cpu_ms_per_request", "–"),
        phase.get("client_cpu_ms_per_request", "–"),
        phase.get("machine_busy_cores", "–"),
    ]


def render(result: dict[str, Any]) -> str:
    lib, w = result["library"], result["workload"]
    rows: list[list[Any]] = [
        ["library `Memory.context` (in process)", lib["requests"], "–", lib["p50_ms"], lib["p99_ms"], "–"]
        + ["–"] * 3
    ]
    for s in result["servers"]:
        one, many = s["one_client"], s["many_clients"]
        label = f"{s['workers']} worker{'s' if s['workers'] > 1 else ''}"
        if w.get("baseline"):
            label = f"{s['source']}, {label}"
        rows.append(
            [f"HTTP, {label}, 1 keep-alive client", one["requests"], one["errors"], one["p50_ms"]]
            + [one["p99_ms"], one["requests_per_s"], *_cpu_cells(one)]
        )
        rows.append(
            [f"HTTP, {label}, {w['clients']} keep-alive clients ({w['seconds']:g} s)", many["requests"]]
            + [many["errors"], many["p50_ms"], many["p99_ms"], many["requests_per_s"], *_cpu_cells(many)]
        )
        health = s.get("health_one_client")
        if health is not None:
            rows.append(
                [
                    f"HTTP, {label}, `GET /v1/health`, 1 keep-alive client",
                    health["requests"],
                    health["errors"],
                ]
                + [health["p50_ms"], health["p99_ms"], health["requests_per_s"], *_cpu_cells(health)]
            )
    cores = result["machine"].get("cores") or os.cpu_count() or 1
    lines = [
        "# `memstack serve` under load (127.0.0.1)",
        "",
        machine_line(result["machine"])
        + f" Load average at the end (1/5/15 min): {'/'.join(str(x) for x in result['load_average'])} "
        "(other work on this shared machine shows here).",
        f"Workload: LoCoMo conversation {w['conversation']} (419 messages) in one thread of a fresh SQLite file, "
        f"hash embedder; each request is the context of a new turn (one of {w['questions']} questions: history "
        "+ hybrid recall, nothing saved). Server in a subprocess (`--workers` processes), clients as threads of "
        "the benchmark process, all on this machine's cores. Targets: HTTP p50 <= 2x library p50 (1 client), "
        ">= 1,000 requests/s with 4 clients, p99 <= 20 ms.",
        "",
        markdown_table(
            [
                "regime",
                "requests",
                "errors",
                "p50 ms",
                "p99 ms",
                "requests/s",
                "server CPU ms/request",
                "client CPU ms/request",
                f"busy cores (of {cores}, every process)",
            ],
            rows,
        ),
        "",
    ]
    for s in result["servers"]:
        burst, many = s["burst"], s["many_clients"]
        cpu = (many.get("server_cpu_ms_per_request") or 0) + (many.get("client_cpu_ms_per_request") or 0)
        ceiling = f"{cores * 1000 / cpu:,.0f}" if cpu else "–"
        name = f"{s['source']}, " if w.get("baseline") else ""
        lines += [
            f"**{name}{s['workers']} worker(s)**: HTTP p50 / library p50 (1 client) **{s['ratio_http_to_library_p50']}x**. "
            f"With {w['clients']} clients a request cost {cpu:.2f} ms of CPU, server and client together: "
            f"{cores} cores doing nothing else would top out near {ceiling} requests/s. "
            f"Burst: {burst['connections']} connections opened at once, one request each: slowest connect "
            f"{burst['connect_max_ms']} ms ({burst['connect_over_1s']} over 1 s), answers p50 "
            f"{burst['answer_p50_ms']} ms, slowest {burst['answer_max_ms']} ms, {burst['errors']} errors."
            + _rounds_text(s, w["clients"]),
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def _rounds_text(server: dict[str, Any], clients: int) -> str:
    """The rounds of the many-clients phase, when there were several (the table shows their median)."""
    rounds = server.get("rounds", {}).get("many", [])
    if len(rounds) < 2:
        return ""
    rates = " / ".join(f"{r['requests_per_s']:,.0f}" for r in rounds)
    cpu = " / ".join(str(r.get("server_cpu_ms_per_request", "–")) for r in rounds)
    return f" {clients} clients, round by round: {rates} requests/s, server CPU {cpu} ms/request."


def main(argv: list[str] | None = None) -> int:
    from memstack.demo import default_data_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="100 requests, 2 s of load, a burst of 32")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--burst", type=int, default=64)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument(
        "--workers", default="1,2", help="comma-separated --workers values, each a server run (default 1,2)"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout (its shared/ is imported by a second server) measured beside this one",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="phases per tree, the trees taking turns (the median is shown)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "serve_load")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.seconds, args.burst = 100, 2.0, 32
    workers = [int(n) for n in args.workers.split(",") if n.strip()]
    result = run(
        args.data or default_data_path(),
        args.requests,
        args.clients,
        args.seconds,
        args.burst,
        workers,
        args.baseline.resolve() if args.baseline is not None else None,
        max(1, args.rounds),
    )
    write_report(args.out, render(result), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
