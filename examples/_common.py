"""What the examples share: their command line and the Memstack API client."""

from __future__ import annotations

import argparse
import os

from memstack.client import MemstackClient

OPTIONS = {"working_memory": {"enabled": True}}
"""The memory options the examples assemble context with: working memory on (recall is on by default)."""


def arguments(description: str, *, real_when: str) -> argparse.Namespace:
    """``--url``, ``--resource-id``, ``--model`` (``auto``: the real provider when ``real_when`` says its
    credentials are present, else the scripted model)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--url", default=os.environ.get("MEMSTACK_URL", "http://127.0.0.1:8765"))
    parser.add_argument("--resource-id", default="example-user")
    parser.add_argument(
        "--model", choices=["auto", "scripted", "real"], default="auto", help=f"real: {real_when}"
    )
    return parser.parse_args()


def client(args: argparse.Namespace) -> MemstackClient:
    """The Memstack API at ``--url`` (SigV4-signed when it is an API Gateway URL)."""
    return MemstackClient(args.url, resource_id=args.resource_id, sigv4=".execute-api." in args.url)
