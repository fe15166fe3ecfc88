"""What every benchmark shares: the machine it ran on, percentiles and spreads, Markdown tables, multi-session
evidence, and the Mastra peer (Node >= 22.13 from the npm registry when the machine's node is older, Mastra's
npm install in a scratch folder, never in the repository).

Pure parts (``percentile``, ``spread``, ``markdown_table``, ``evidence_sessions``, ``is_multi_session``) are
unit-tested in tests/unit/test_bench_common.py; the rest runs processes and is exercised by ``make bench``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PEER_SOURCE = ROOT.parent / "shared" / "bench" / "mastra-peer"
"""The shared Mastra peer (read only): its package.json pins Mastra 1.x."""
PEER_GROWTH = ROOT / "benchmarks" / "mastra" / "locomo-peer-growth.mjs"
"""Our copy of the peer script with growth, repeated runs, several top_k and per-question scores."""
NODE_MIN = (22, 13)
"""Mastra 1.x's ``engines.node`` (>= 22.13)."""


def bench_data_path() -> Path:
    """The LoCoMo file of the full benchmarks: the five-conversation ``../shared/data/locomo/locomo-dev.json``
    when the sibling folder is there (``memstack.demo.full_data_path``), else the repository's two-conversation
    subset (``data/locomo/``), saying so on stderr; every result file records the path it ran on."""
    from memstack.demo import default_data_path, full_data_path

    full = full_data_path()
    if full is not None:
        return full
    subset = default_data_path()
    sys.stderr.write(
        f"benchmarks: the full LoCoMo file (../shared/data/locomo/locomo-dev.json) is not here; using the "
        f"repository's subset {subset} (figures are not comparable with the committed full run)\n"
    )
    return subset


def scratch_dir() -> Path:
    """Where Node 22 and Mastra's node_modules go: ``MEMSTACK_BENCH_SCRATCH``, else ``$TMPDIR/memstack-bench``."""
    base = os.environ.get("MEMSTACK_BENCH_SCRATCH") or str(
        Path(os.environ.get("TMPDIR", "/tmp")) / "memstack-bench"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


# --- statistics -------------------------------------------------------------------------------------------


T = TypeVar("T")


def rotated(items: Sequence[T], n: int) -> list[T]:
    """``items`` rotated left by ``n`` places (modulo their count): the order in which sizes, files or modes
    take their turn at step ``n``, so none is always measured first."""
    k = n % len(items)
    return [*items[k:], *items[:k]]


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-quantile (0 <= q <= 1) of ``values``: the sorted value at index
    ``min(n-1, floor(q*n))`` — the definition the Mastra peer script uses, so both sides report the same
    statistic.

    Raises:
        ValueError: ``values`` is empty or ``q`` is outside [0, 1].
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} outside [0, 1]")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.floor(q * len(ordered)))]


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min, max and run count of repeated measurements (e.g. one p50 per run)."""
    if not values:
        raise ValueError("spread of no values")
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": len(values),
    }


def fmt_spread(s: Mapping[str, float] | None, digits: int = 2) -> str:
    """``"1.23 (1.10–1.40, 3 runs)"``; one run shows just the value; ``None`` shows "not run"."""
    if s is None:
        return "not run"
    if s["runs"] == 1:
        return f"{s['median']:.{digits}f} (1 run)"
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f}, {int(s['runs'])} runs)"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub Markdown table; ``|`` in cells is escaped, floats print as given (format them first)."""

    def cell(value: object) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells, table has {len(headers)} columns")
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


# --- LoCoMo evidence ------------------------------------------------------------------------------------

_SESSION = re.compile(r"(?:^|:)D(\d+):\d+$")


def evidence_sessions(evidence: Iterable[str], session_of: Mapping[str, str] | None = None) -> set[str]:
    """The sessions holding these evidence turns: from ``session_of`` (message or dia id → session) when the
    id is there, else from the dia id itself (``D3:7`` or ``conv-26:D3:7`` → ``"3"``, LoCoMo's
    ``D<session>:<turn>`` numbering). Ids of neither kind are ignored."""
    found: set[str] = set()
    for item in evidence:
        if session_of is not None and item in session_of:
            found.add(session_of[item])
            continue
        m = _SESSION.search(item)
        if m:
            found.add(m.group(1))
    return found


def is_multi_session(evidence: Iterable[str], session_of: Mapping[str, str] | None = None) -> bool:
    """True when the evidence turns lie in two or more sessions (LoCoMo's multi-session questions)."""
    return len(evidence_sessions(evidence, session_of)) >= 2


# --- the machine ---------------------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (Linux), else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(node: str | None = None) -> dict[str, Any]:
    """What a result ran on: CPU model, logical cores, OS, Python, Node (when the peer ran) and the date."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "node": node,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def machine_line(info: Mapping[str, Any]) -> str:
    """One Markdown line naming the machine, for the head of every result file."""
    node = f", Node {info['node']}" if info.get("node") else ""
    return (
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['os']}, Python {info['python']}{node}; "
        f"run {info['date']}."
    )


def write_json(path: Path, payload: Any) -> None:
    """Write ``payload`` as indented JSON, creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")


# --- the Mastra peer -----------------------------------------------------------------------------------


class PeerUnavailable(RuntimeError):
    """The Mastra peer cannot run here; the message says why (shown in the results as "not run: …")."""


def write_report(out: Path, report: str, result: Any) -> None:
    """Print a benchmark's Markdown report and write it beside its JSON: ``out.md`` and ``out.json``."""
    print(report)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(report)
    write_json(out.with_suffix(".json"), result)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def _node_version(node: str) -> str | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def ensure_node(log: Any = sys.stderr) -> tuple[Path, str]:
    """A Node binary >= 22.13: the machine's ``node`` if new enough, else ``node-linux-<arch>@22`` installed
    from the npm registry into ``<scratch>/node22`` (once). Returns (its bin folder, its version).

    Raises:
        PeerUnavailable: no npm, an unsupported platform, or the install failed (e.g. no network).
    """
    system = shutil.which("node")
    if system:
        version = _node_version(system)
        if version and _version(version) >= NODE_MIN:
            return Path(system).parent, version
    prefix = scratch_dir() / "node22"
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    if platform.system() != "Linux" or arch is None:
        raise PeerUnavailable(
            f"no Node >= 22.13 and no npm Node package for {platform.system()} {platform.machine()}"
        )
    package = f"node-linux-{arch}"
    bin_dir = prefix / "node_modules" / package / "bin"
    node = bin_dir / "node"
    if not node.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise PeerUnavailable("no Node >= 22.13 and no npm to install it")
        log.write(
            f"installing Node 22 from the npm registry into {prefix} (machine's node: {system and _node_version(system)})\n"
        )
        done = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(prefix),
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                f"{package}@22",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 or not node.exists():
            raise PeerUnavailable(f"npm install {package}@22 failed: {done.stderr.strip()[-300:]}")
    version = _node_version(str(node))
    if not version or _version(version) < NODE_MIN:
        raise PeerUnavailable(f"installed Node reports {version!r}, need >= 22.13")
    return bin_dir, version


def ensure_mastra(bin_dir: Path, log: Any = sys.stderr) -> Path:
    """Mastra's packages (the shared peer's package.json) installed in ``MASTRA_PEER_DIR`` (default
    ``<scratch>/mastra``, about 170 MB) with the growth script beside them; returns that folder.

    Raises:
        PeerUnavailable: the shared peer is missing or ``npm install`` failed (e.g. no registry access).
    """
    if not (PEER_SOURCE / "package.json").is_file():
        raise PeerUnavailable(f"the shared Mastra peer is missing at {PEER_SOURCE}")
    work = Path(os.environ.get("MASTRA_PEER_DIR") or scratch_dir() / "mastra")
    work.mkdir(parents=True, exist_ok=True)
    for source in (PEER_SOURCE / "package.json", PEER_SOURCE / "locomo-peer.mjs", PEER_GROWTH):
        target = work / source.name
        if target.exists():
            target.chmod(0o644)
        shutil.copyfile(source, target)
    if not (work / "node_modules" / "@mastra" / "memory").is_dir():
        log.write(f"installing Mastra (npm, ~170 MB) into {work}\n")
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise PeerUnavailable(f"npm install of Mastra failed: {done.stderr.strip()[-300:]}")
    return work


class MastraPeer:
    """Runs the Mastra peer (our growth copy of it) with a Node >= 22.13; set up lazily, once."""

    def __init__(self, db_dir: Path | None = None) -> None:
        """Args:
        db_dir: the folder of the peer's LibSQL file (default: the scratch folder); a tmpfs such as
            ``/dev/shm`` takes the disk's sync out of its growth (say so where the figures are reported).
        """
        self.db_dir = db_dir
        self._ready: tuple[Path, str, Path] | None = None
        self.error: str | None = None

    def setup(self) -> bool:
        """Install what the peer needs; False (with ``error`` set) when it cannot run here."""
        if self._ready is not None:
            return True
        if self.error is not None:
            return False
        try:
            bin_dir, version = ensure_node()
            work = ensure_mastra(bin_dir)
        except PeerUnavailable as exc:
            self.error = str(exc)
            return False
        self._ready = (bin_dir, version, work)
        return True

    @property
    def node_version(self) -> str | None:
        """The Node version the peer runs on, once set up."""
        return self._ready[1] if self._ready else None

    def run(
        self, data: Path, conversation: int, env: Mapping[str, str], timeout: float = 3600
    ) -> dict[str, Any]:
        """Run ``locomo-peer-growth.mjs`` on one conversation with these env settings (GROW, RUNS, TOPKS,
        SCORES, TOPK…); returns its (last) JSON line.

        Raises:
            PeerUnavailable: not set up, or the script failed or printed no JSON.
        """
        return self.run_all(data, conversation, env, timeout)[-1]

    def run_all(
        self, data: Path, conversation: int, env: Mapping[str, str], timeout: float = 3600
    ) -> list[dict[str, Any]]:
        """Like ``run``, every JSON line the script printed, in order: one per size with ``SIZES``.

        Raises:
            PeerUnavailable: not set up, or the script failed or printed no JSON.
        """
        if not self.setup() or self._ready is None:
            raise PeerUnavailable(self.error or "not set up")
        bin_dir, _, work = self._ready
        db = (self.db_dir or scratch_dir()) / f"mastra-peer-{os.getpid()}.db"
        full_env = {
            **os.environ,
            **env,
            "DB": str(db),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        try:
            done = subprocess.run(
                [str(bin_dir / "node"), PEER_GROWTH.name, str(data.resolve()), str(conversation)],
                cwd=work,
                env=full_env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            raise PeerUnavailable(
                f"the Mastra peer failed (exit {done.returncode}): {done.stderr.strip()[-400:]}"
            )
        return [json.loads(line) for line in lines]
