"""``memstack serve --workers N``: several processes on one socket, one API (memstack.serve_workers)."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memstack.client import MemstackClient
from memstack.serve_workers import MAX_DEFAULT_WORKERS, default_workers
from tests.e2e.serve_support import Served, clean_env, running_serve

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are read from /proc")


def workers_of(served: Served) -> list[int]:
    pid = served.process.pid
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@contextmanager
def two_workers(folder: Path) -> Iterator[Served]:
    """``memstack serve --workers 2`` on a SQLite file in ``folder`` (hash embedder)."""
    with running_serve("--db", str(folder / "m.db"), "--embedder", "hash", "--workers", "2", cwd=folder) as s:
        yield s


def wait_for(condition: object, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_given_two_workers_when_clients_connect_then_every_connection_sees_the_others_writes(
    tmp_path: Path,
) -> None:
    with two_workers(tmp_path) as s:
        assert s.stdout[0].endswith("workers=2")
        assert len(workers_of(s)) == 2
        # each connection is kept by the worker that won its accept, so these six are spread over both
        clients = [MemstackClient(s.url, resource_id="u1", timeout=30) for _ in range(6)]
        try:
            for k, c in enumerate(clients):
                saved = c.save_messages(thread_id="t", messages=[f"note {k}: the locker code is {4700 + k}"])
                for other in clients:  # each save is read back through every connection
                    texts = [m.text for m in other.list_messages(thread_id="t").messages]
                    assert texts[-1] == f"note {k}: the locker code is {4700 + k}"
                    hits = other.recall(thread_id="elsewhere", query=f"locker code {4700 + k}").hits
                    assert saved[0].id in {h.message_id for h in hits}, "a search cache went stale"
        finally:
            for c in clients:
                c.close()
        workers = workers_of(s)
        assert s.stop() == 0
        assert s.stdout[-1] == "memstack serve: stopped"
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def connections_of(pid: int, port: int) -> int:
    """Established TCP connections to ``port`` whose socket ``pid`` holds (``/proc``: its fds' socket
    inodes matched against ``/proc/net/tcp``)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == "01" and fields[9] in inodes:  # 01: ESTABLISHED
                count += 1
    return count


def ask_health(conn: http.client.HTTPConnection, start: threading.Barrier, statuses: list[int]) -> None:
    start.wait()
    conn.request("GET", "/v1/health")
    response = conn.getresponse()
    response.read()
    statuses.append(response.status)


def test_given_two_workers_when_four_keep_alive_clients_connect_at_once_then_each_worker_holds_two(
    tmp_path: Path,
) -> None:
    # Before: the quickest worker accepted whatever was pending (and "listening on" came before the
    # workers were up), so one worker often held every connection for its lifetime while the other idled.
    with two_workers(tmp_path) as s:
        port = int(s.url.rsplit(":", 1)[1])
        for _ in range(3):
            clients = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(4)]
            start = threading.Barrier(4)
            statuses: list[int] = []

            askers = [threading.Thread(target=ask_health, args=(c, start, statuses)) for c in clients]
            for a in askers:
                a.start()
            for a in askers:
                a.join(30)
            try:
                assert statuses == [200] * 4
                assert sorted(connections_of(pid, port) for pid in workers_of(s)) == [2, 2]
            finally:
                for c in clients:
                    c.close()
            wait_for(lambda: sum(connections_of(pid, port) for pid in workers_of(s)) == 0)
        assert s.stop() == 0


def test_given_two_workers_when_clients_save_at_once_then_no_write_is_lost_and_each_thread_keeps_its_order(
    tmp_path: Path,
) -> None:
    with two_workers(tmp_path) as s:
        failures: list[BaseException] = []

        def writer(k: int) -> None:
            try:
                with MemstackClient(s.url, resource_id="u1", timeout=60) as c:
                    for i in range(15):  # one thread of its own, and one shared by every writer
                        c.save_messages(thread_id=f"own-{k}", messages=[f"writer {k} message {i}"])
                        c.save_messages(thread_id="shared", messages=[f"writer {k} shared {i}"])
            except BaseException as exc:  # reported by the main thread
                failures.append(exc)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not failures, failures
        with MemstackClient(s.url, resource_id="u1", timeout=30) as c:
            for k in range(4):
                texts = [m.text for m in c.list_messages(thread_id=f"own-{k}", limit=100).messages]
                assert texts == [f"writer {k} message {i}" for i in range(15)]
            shared = c.list_messages(thread_id="shared", limit=100).messages
            assert len(shared) == 60
            assert [m.seq for m in shared] == sorted(m.seq for m in shared)
            for k in range(4):  # each writer's saves keep their order inside the shared thread
                mine = [m.text for m in shared if m.text.startswith(f"writer {k} ")]
                assert mine == [f"writer {k} shared {i}" for i in range(15)]
        assert s.stop() == 0


def test_given_a_worker_that_dies_then_a_new_one_takes_its_place(tmp_path: Path) -> None:
    with two_workers(tmp_path) as s:
        first = workers_of(s)
        time.sleep(2.5)  # older than WORKER_MIN_LIFETIME_SECONDS: a crash, not a failed start
        os.kill(first[0], signal.SIGKILL)
        wait_for(lambda: len(workers_of(s)) == 2 and first[0] not in workers_of(s))
        with MemstackClient(s.url, resource_id="u1", timeout=30) as c:
            c.save_messages(thread_id="t", messages=["after the crash"])
            assert [m.text for m in c.list_messages(thread_id="t").messages] == ["after the crash"]
        assert s.stop() == 0
    assert any(f"worker {first[0]} exited (signal 9)" in line for line in s.stderr)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "0"], "--workers must be at least 1"),
        (["--workers", "2", "--db", ":memory:"], "needs a database file"),
    ],
)
def test_given_bad_workers_then_serve_exits_2_naming_the_flag(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memstack.cli", "serve", "--port", "0", "--embedder", "hash", *args],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


def test_given_this_machine_then_the_default_is_one_worker_per_cpu_up_to_the_cap() -> None:
    assert default_workers() == max(1, min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS))
