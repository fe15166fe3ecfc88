"""What the operator's commands share: one convention for where they act (``--db``/``--backend`` with
``--embedder`` for a local memory, or ``--url`` with ``--sigv4``/``--jwt``/``--header`` for a Memstack
API through ``MemstackClient``), ``--json`` output, and a clean stop on Ctrl-C and SIGTERM."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memstack.errors import InvalidInput

EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C (SIGINT): 128 + 2, the shell's convention."""

EXIT_TERMINATED = 143
"""Exit code after SIGTERM: 128 + 15."""


class Terminated(BaseException):  # noqa: N818 - named for the signal, like KeyboardInterrupt
    """Raised in the main thread by SIGTERM while a long job runs (``stoppable``): a BaseException, so no
    ``except Exception`` on the way swallows it, and every ``with``/``finally`` cleans up on the way out."""


@contextmanager
def stoppable() -> Iterator[None]:
    """Turn SIGTERM into ``Terminated`` while the block runs (Ctrl-C is ``KeyboardInterrupt`` already);
    ``memstack.cli.main`` turns both into a one-line message and exit code 130 or 143."""

    def stop(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def port(text: str) -> int:
    """An ``argparse`` type: a TCP port, 0 (any free port) to 65535.

    Raises:
        argparse.ArgumentTypeError: not a whole number in that range (argparse exits 2 naming the flag).
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{value} is outside 0-{MAX_PORT} (0: any free port)")
    return value


MAX_PORT = 65_535
"""The largest TCP port."""


def embedder_argument(parser: argparse.ArgumentParser, help: str | None = None) -> None:  # noqa: A002
    """``--embedder`` of a command that builds a local memory."""
    parser.add_argument(
        "--embedder",
        choices=["wordllama", "hash", "local", "openai", "bedrock"],
        help=help or "default: MEMSTACK_EMBEDDER, else openai when OPENAI_API_KEY is set, else wordllama",
    )


def backend_arguments(parser: argparse.ArgumentParser) -> None:
    """``--backend`` and ``--db``: the local backend a command acts on."""
    parser.add_argument(
        "--backend",
        choices=["sqlite", "aws"],
        help="sqlite (embedded) or aws: DynamoDB + OpenSearch at the endpoints in the MEMSTACK_* settings "
        "(default: MEMSTACK_BACKEND, else sqlite)",
    )
    parser.add_argument(
        "--db", help="SQLite file of the sqlite backend (default: MEMSTACK_DB_PATH, .memstack/memory.db)"
    )


def remote_arguments(parser: argparse.ArgumentParser, verb: str = "act") -> None:
    """``--url`` and its authentication: ``--sigv4`` (IAM), ``--jwt`` and ``--header``."""
    parser.add_argument("--url", help=f"{verb} through a Memstack API at this URL instead of a local backend")
    parser.add_argument("--sigv4", action="store_true", help="--url: sign requests with SigV4 (IAM auth)")
    parser.add_argument("--jwt", metavar="TOKEN", help="--url: send 'Authorization: Bearer TOKEN' (JWT auth)")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="--url: an extra request header, e.g. 'Authorization: Bearer <token>'; repeatable",
    )


def target_arguments(parser: argparse.ArgumentParser) -> None:
    """Every argument of a command that acts locally or through ``--url``, plus ``--json``."""
    backend_arguments(parser)
    embedder_argument(parser)
    remote_arguments(parser)
    json_argument(parser)


def json_argument(parser: argparse.ArgumentParser) -> None:
    """``--json``: one JSON document on stdout, for scripts."""
    parser.add_argument("--json", action="store_true", help="print JSON (for scripts) instead of text")


def check_target(args: argparse.Namespace) -> None:
    """``--url`` excludes the local options and the local options exclude the remote ones.

    Raises:
        InvalidInput: a mix (field ``url``).
    """
    remote = getattr(args, "url", None) is not None
    local_given = [f"--{n}" for n in ("db", "backend", "embedder") if getattr(args, n, None)]
    remote_given = [f"--{n}" for n in ("sigv4", "jwt", "header") if getattr(args, n, None)]
    if remote and local_given:
        raise InvalidInput(f"--url acts through the API: {', '.join(local_given)} do not apply", field="url")
    if not remote and remote_given:
        raise InvalidInput(f"{', '.join(remote_given)} apply with --url only", field="url")


def open_client(args: argparse.Namespace) -> Any:
    """The ``MemstackClient`` of ``--url`` with ``--sigv4``, ``--jwt`` and ``--header``.

    Raises:
        InvalidInput: a header that is not ``NAME:VALUE``; SigV4 without credentials or region.
    """
    from memstack.client import MemstackClient

    headers: dict[str, str] = {}
    for header in args.header:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise InvalidInput(f"--header must be NAME:VALUE, not {header!r}", field="header")
        headers[name.strip()] = value.strip()
    if args.jwt:
        headers["Authorization"] = f"Bearer {args.jwt}"
    return MemstackClient(args.url, sigv4=args.sigv4, headers=headers)


def existing_database(args: argparse.Namespace) -> None:
    """A local command must name a database that exists: opening a mistyped path would create an empty
    one and report on (or erase) nothing.

    Raises:
        InvalidInput: the sqlite backend's file is missing (field ``db``).
    """
    from memstack.settings import load_settings

    settings = load_settings()
    if (args.backend or settings.backend) != "sqlite":
        return
    path = Path(args.db or settings.db_path)
    if not path.is_file():
        raise InvalidInput(f"no database at {path} (check --db)", field="db")


def open_local(args: argparse.Namespace, *, must_exist: bool = True) -> Any:
    """The local ``Memory`` of ``--backend``/``--db``/``--embedder`` (``serve.build_memory``).

    Raises:
        InvalidInput: a missing database when ``must_exist``; an embedder the index was not built with.
    """
    from memstack.serve import build_memory
    from memstack.settings import load_settings

    if must_exist:
        existing_database(args)
    settings = load_settings(**({"backend": args.backend} if args.backend else {}))
    return build_memory(settings.backend, db=args.db, embedder=args.embedder or settings.embedder_name)


@contextmanager
def open_store(args: argparse.Namespace) -> Iterator[Any]:
    """The ``MemoryStore`` of ``--backend``/``--db`` alone (``bootstrap.build_store``), for commands that
    read records only: no embedder is loaded and the search index is not opened.

    Raises:
        InvalidInput: the sqlite backend's file is missing (field ``db``).
    """
    from memstack.bootstrap import build_store
    from memstack.settings import load_settings

    existing_database(args)
    store = build_store(load_settings(**({"backend": args.backend} if args.backend else {})), path=args.db)
    try:
        yield store
    finally:
        store.close()


def open_target(args: argparse.Namespace) -> Any:
    """The client of ``--url``, else the local memory: both answer the same methods (``Memory``'s)."""
    check_target(args)
    return open_client(args) if args.url else open_local(args)


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout (datetimes and other values as their strings)."""
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def say(text: str) -> None:
    """A status line on stderr (stdout is the command's output)."""
    print(text, file=sys.stderr, flush=True)
