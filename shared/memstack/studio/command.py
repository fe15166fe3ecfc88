"""``memstack studio``: the Studio page on localhost against a deployed Memstack API (``--url``), each API
request signed with SigV4 (``--sigv4``) or a JWT bearer token (``--jwt``) — ``memstack.studio.proxy``.

``memstack serve`` already serves the Studio at ``/studio/`` over its own API; this command is for an API
elsewhere (the deployed stack does not host the page).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

DEFAULT_PORT = 8766
"""``memstack studio``'s default port (``memstack serve`` has 8765)."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``studio`` subcommand to ``memstack``'s subparsers (``run`` as its ``run`` default, the CLI's
    convention); returns its parser."""
    studio: argparse.ArgumentParser = subparsers.add_parser(
        "studio",
        help="Memstack Studio on localhost against a deployed API (signing each request)",
        description="Serve Memstack Studio (threads, messages, working memory, observations, recall, what the "
        "model sees, index health) on localhost and forward its API requests to --url, signed with "
        "SigV4 (--sigv4, IAM auth) or a bearer token (--jwt, JWT auth). For a local API, `memstack serve` "
        "serves the Studio itself at /studio/. Ctrl-C or SIGTERM stops it.",
    )
    studio.add_argument(
        "--url",
        required=True,
        help="the API's root without /v1, e.g. https://abc.execute-api.eu-west-1.amazonaws.com/prod",
    )
    auth = studio.add_mutually_exclusive_group()
    auth.add_argument("--sigv4", action="store_true", help="sign each request with SigV4 (IAM auth)")
    auth.add_argument("--jwt", metavar="TOKEN", help="send 'Authorization: Bearer TOKEN' (JWT auth)")
    from memstack.cli.common import port  # here: memstack.cli imports this module

    studio.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    studio.add_argument(
        "--port", type=port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free port)"
    )
    studio.set_defaults(run=run)
    return studio


def run(args: argparse.Namespace) -> int:
    """Run ``memstack studio`` with parsed ``args``; returns the exit code (1 when the port is taken).

    Raises:
        InvalidInput: a bad ``--url`` or token, or SigV4 without credentials or region.
    """
    from memstack.studio.proxy import ProxyConfig, run_studio

    config = ProxyConfig(url=args.url, host=args.host, port=args.port, sigv4=args.sigv4, jwt=args.jwt)
    try:
        return run_studio(config)
    except OSError as exc:
        print(f"memstack: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
