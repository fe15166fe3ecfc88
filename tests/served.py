"""``memstack serve``'s server in-process on a free loopback port, for tests that reach a ``Memory`` over
real HTTP through the clients."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from memstack import Memory
from memstack.serve import LocalServer, ServeConfig, make_server


@contextmanager
def serving(memory: Memory) -> Iterator[str]:
    """Serve ``memory``; yields the base URL; shuts the server down on exit (the memory stays open)."""
    with served_server(memory) as server:
        yield "http://{}:{}".format(*server.server_address[:2])


@contextmanager
def served_server(memory: Memory) -> Iterator[LocalServer]:
    """Serve ``memory``; yields the running ``LocalServer``; shuts it down on exit (the memory stays open)."""
    server = make_server(memory, ServeConfig(host="127.0.0.1", port=0), log=io.StringIO())
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
