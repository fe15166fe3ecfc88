"""``memstack serve --workers N``: several server processes accepting on one listening socket.

CPython runs one thread at a time, so one ``memstack serve`` process answers on one core whatever its
thread count. ``serve_workers`` binds the socket once, then forks ``N`` workers; each builds its own
``Memory`` after the fork and serves exactly as the single-process server does (``memstack.serve``). The
kernel queues connections on the one socket; whichever worker is free accepts the next one (the others get
``BlockingIOError`` from their non-blocking ``accept``, which ``socketserver`` ignores), so a keep-alive
connection stays with the worker that accepted it.

What ``--workers > 1`` means (docs/local.md "Workers"): the same API on the same port, one ``Memory`` per
process over the same SQLite file or AWS tables. It relies on these invariants, none of them in-process:

* SQLite: WAL mode and a busy timeout on every connection (``adapters/sqlite/db.py``): readers never block,
  writes queue on SQLite's file lock, a writer that waits past the timeout gets ``Unavailable`` (503);
* search caches: a process's vector cache is checked against the resource's ``search_generations`` counter,
  read in the same transaction as the search, and every chunk write bumps it; the message cache is keyed by
  the whole row, so another worker's write can never be served stale;
* working memory and observation records are written compare-and-set on a version: when two workers'
  background Observers work on one thread, one wins and the other retries or gives up (``Conflict``);
* background work (inline indexing, observation) runs in the worker that took the save; a worker stopped
  by SIGTERM finishes its requests in flight and closes its ``Memory`` as ``serve`` does.

An in-memory SQLite database would be one per worker: the CLI refuses it with ``--workers`` above 1.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, TextIO

from memstack.errors import InvalidInput
from memstack.serve import (
    LISTEN_BACKLOG,
    SHUTDOWN_GRACE_SECONDS,
    ServeConfig,
    make_server,
    serve,
    serve_until_stopped,
    stop_requested,
    stop_signals,
    url_of,
)

if TYPE_CHECKING:
    from memstack.memory import Memory

MAX_DEFAULT_WORKERS = 4
"""The default number of worker processes is the CPU count up to this (``default_workers``)."""

WORKER_MIN_LIFETIME_SECONDS = 2.0
"""A worker that exits sooner after its start is taken as unable to start: the server stops (exit 1)
instead of forking it again and again."""


WORKER_READY_TIMEOUT_SECONDS = 60.0
"""How long the start waits for every worker to build its ``Memory`` before it says it is listening
anyway (the workers that are ready answer meanwhile)."""

ACCEPT_DEFER_SECONDS = 0.05
"""How long a worker that holds more connections than another leaves a pending connection to the others
before it accepts it anyway (a busy or stuck sibling must not leave a client waiting)."""

_DEFER_POLL_SECONDS = 0.001
"""While a worker defers, the listener stays readable: it waits this long between looks, never spins."""

_EPISODE_GAP_SECONDS = 0.005
"""A look at the listener this long after the previous one is a new pending connection, not the same
one still waiting (while deferring, a worker looks every ``_DEFER_POLL_SECONDS``)."""


class ConnectionBalance:
    """Open connections per worker, in memory shared by the forked workers, so that keep-alive connections
    spread evenly over them.

    The kernel wakes every worker selecting on the shared listener for each connection and the quickest
    accepts: measured with 4 keep-alive clients opened at once, one of 2 workers took all 4 in 4 of 6
    starts and kept them for their lifetime, so one core served every request (its threads contending for
    the GIL) while the other idled. A worker that holds more open connections than the least-loaded one now
    leaves a pending connection to the others for up to ``ACCEPT_DEFER_SECONDS``, then accepts it anyway.

    Args:
        workers: how many slots (one per worker); call before forking, so the children share the memory.

    Each worker writes only its own slot (``opened``/``closed``, under a lock of its process) and reads the
    others' without a lock: a stale read costs one connection placed less evenly, never a lost one.
    """

    def __init__(self, workers: int) -> None:
        import multiprocessing

        self._counts = multiprocessing.RawArray("i", workers)
        self._ready = multiprocessing.RawArray("b", workers)
        self._slot = 0
        self._lock = threading.Lock()
        self._deferring_since: float | None = None
        self._last_look = 0.0

    def claim(self, slot: int) -> None:
        """Make this process the worker of ``slot`` (in the worker, after the fork), starting at 0 open
        connections (a replaced worker's connections died with it)."""
        self._slot = slot
        self._counts[slot] = 0
        self._ready[slot] = 0
        self._lock = threading.Lock()  # a lock held at fork time stays held in the child
        self._deferring_since = None

    def mark_ready(self) -> None:
        """This worker has built its ``Memory`` and its server: it answers what it accepts from now on."""
        self._ready[self._slot] = 1

    def all_ready(self) -> bool:
        """Whether every worker has marked itself ready."""
        return all(self._ready)

    def counts(self) -> list[int]:
        """Open connections of each worker, by slot."""
        return list(self._counts)

    def opened(self) -> None:
        """This worker accepted a connection."""
        with self._lock:
            self._counts[self._slot] += 1

    def closed(self) -> None:
        """One of this worker's connections ended."""
        with self._lock:
            self._counts[self._slot] -= 1

    def may_accept(self) -> bool:
        """Whether this worker should accept the pending connection now: it holds no more connections than
        any other worker, or it has left the connection to them for ``ACCEPT_DEFER_SECONDS`` already.
        Waits ``_DEFER_POLL_SECONDS`` before answering ``False`` (the caller looks again at once)."""
        now = time.monotonic()
        if now - self._last_look > _EPISODE_GAP_SECONDS:
            self._deferring_since = None
        self._last_look = now
        counts = self._counts
        mine = counts[self._slot]
        others = [counts[i] for i in range(len(counts)) if i != self._slot]
        if not others or mine <= min(others):
            self._deferring_since = None
            return True
        if self._deferring_since is None:
            self._deferring_since = now
        elif now - self._deferring_since >= ACCEPT_DEFER_SECONDS:
            self._deferring_since = None
            return True
        time.sleep(_DEFER_POLL_SECONDS)
        self._last_look = time.monotonic()
        return False


def default_workers() -> int:
    """The default of ``--workers``: one per CPU, at most ``MAX_DEFAULT_WORKERS``, where the worker processes
    can be forked safely (Linux); 1 elsewhere (macOS forks badly once system frameworks are loaded; Windows
    has no ``fork``)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return 1
    return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS))


def serve_workers(
    build: Callable[[], Memory],
    config: ServeConfig,
    *,
    workers: int,
    banner: str = "",
    out: TextIO | None = None,
) -> int:
    """Serve with ``workers`` processes accepting on one listening socket, until Ctrl-C or SIGTERM.

    The Python interpreter runs one thread at a time, so one process answers on one core; several worker
    processes use every core. This process binds the socket, then forks the workers; each builds its own
    ``Memory`` with ``build`` after the fork (no SQLite connection, thread pool or HTTP client crosses a
    fork) and serves as ``serve`` does. What stays correct across processes (docs/local.md "Workers"):
    SQLite in WAL mode with a busy timeout serialises the writes; the vector cache of each process checks
    the resource's ``search_generations`` counter in the same read, so a write by another worker is seen;
    working memory and observation records are compare-and-set on a version, so two workers' background
    Observers for one thread cannot both win. An in-memory database (``:memory:``) would be one per worker:
    refused by the CLI.

    A worker that dies is replaced, unless it died within ``WORKER_MIN_LIFETIME_SECONDS`` of its start (it
    cannot start: the others are stopped and the exit code is 1). SIGINT/SIGTERM stop the workers (SIGTERM,
    each finishing its requests in flight), then this process.

    Args:
        build: makes a worker's ``Memory`` (called in each worker, after the fork).
        workers: how many processes; 1 serves in this process (``serve(build(), ...)``).

    Returns:
        The exit code: 0, or 1 when a worker could not start.

    Raises:
        InvalidInput: ``workers`` below 1, or above 1 where ``os.fork`` is missing.
        OSError: the address cannot be bound.
    """
    if workers < 1:
        raise InvalidInput(f"--workers must be at least 1, not {workers}", field="workers")
    if workers == 1:
        return serve(build(), config, banner=banner, out=out)
    if not hasattr(os, "fork"):
        raise InvalidInput("--workers above 1 needs os.fork (Linux or macOS)", field="workers")
    from memstack.observability import emit_json_logs

    out = out if out is not None else sys.stdout
    emit_json_logs("INFO" if config.verbose else "WARNING")
    listener = _listen(config.host, config.port)
    balance = ConnectionBalance(workers)
    children: dict[int, tuple[int, float]] = {}
    code = 0
    with stop_requested() as stop:
        try:
            for slot in range(workers):
                children[_fork_worker(build, config, listener, balance, slot)] = (slot, time.monotonic())
            code = _wait_ready(balance, stop, lambda: _reap(children, build, config, listener, balance))
            if not code and not stop.is_set():
                url = url_of(listener.getsockname())
                print(f"memstack serve: listening on {url}{banner} workers={workers}", file=out, flush=True)
            while not code and not stop.wait(0.2):
                code = _reap(children, build, config, listener, balance)
            print("memstack serve: stopping", file=out, flush=True)
        finally:
            _stop_workers(children)
            listener.close()
    print("memstack serve: stopped", file=out, flush=True)
    return code


def _wait_ready(balance: ConnectionBalance, stop: threading.Event, reap: Callable[[], int]) -> int:
    """Wait until every worker is ready (``WORKER_READY_TIMEOUT_SECONDS`` at most, or a stop request),
    replacing workers that exit meanwhile; returns ``reap``'s code (1: a worker cannot start). The
    ``listening on`` line comes after it, so a client that waits for that line finds every worker
    accepting: connections made while one worker was still starting all went to the other, and
    keep-alive kept them there."""
    deadline = time.monotonic() + WORKER_READY_TIMEOUT_SECONDS
    while not balance.all_ready() and time.monotonic() < deadline:
        code = reap()
        if code or stop.wait(0.02):
            return code
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening (``LISTEN_BACKLOG``), non-blocking: every worker
    selects on it, and the ones that lose the race to ``accept`` a connection get ``BlockingIOError``, which
    ``socketserver`` ignores."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _fork_worker(
    build: Callable[[], Memory],
    config: ServeConfig,
    listener: socket.socket,
    balance: ConnectionBalance,
    slot: int,
) -> int:
    """Fork the worker of ``slot``; returns its pid. The worker never returns here: it exits with
    ``os._exit`` (the parent's ``finally`` blocks and ``atexit`` hooks are not the worker's to run)."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        for sig in stop_signals():  # the parent's handlers set the parent's event; ours come with the server
            signal.signal(sig, signal.SIG_DFL)
        balance.claim(slot)
        memory = build()
        try:
            server = make_server(memory, config, listener=listener, balance=balance)
        except BaseException:
            memory.close()
            raise
        balance.mark_ready()
        serve_until_stopped(server, memory)
        code = 0
    except BaseException:  # a worker's failure is printed; the parent sees its exit code
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reap(
    children: dict[int, tuple[int, float]],
    build: Callable[[], Memory],
    config: ServeConfig,
    listener: socket.socket,
    balance: ConnectionBalance,
) -> int:
    """Replace the workers that exited (in their slot of ``balance``); 1 when one died young (it cannot
    start), else 0."""
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return 0
        child = children.pop(pid, None)
        if child is None:
            continue
        slot, started = child
        print(
            f"memstack serve: worker {pid} exited ({_exit_reason(status)})",
            file=sys.stderr,
            flush=True,
        )
        if time.monotonic() - started < WORKER_MIN_LIFETIME_SECONDS:
            return 1
        children[_fork_worker(build, config, listener, balance, slot)] = (slot, time.monotonic())
    return 0


def _exit_reason(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"code {os.waitstatus_to_exitcode(status)}"


def _stop_workers(children: dict[int, tuple[int, float]]) -> None:
    """SIGTERM every worker and wait for them (grace period plus a margin), then SIGKILL what is left."""
    for pid in children:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + SHUTDOWN_GRACE_SECONDS + 5.0
    while children and time.monotonic() < deadline:
        for pid in list(children):
            with suppress(ChildProcessError):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if not done:
                    continue
            children.pop(pid, None)
        time.sleep(0.05)
    for pid in children:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with suppress(ChildProcessError):
            os.waitpid(pid, 0)
    children.clear()
