"""The MCP client configuration in ``examples/mcp/mcp.json`` (the ``mcpServers`` shape of Claude Desktop,
Cursor and most MCP clients), used by the MCP SDK's own client: it starts ``memstack mcp`` over stdio as
the configuration says and calls its tools. No model is needed: this is what a desktop client would do for
its model.

    memstack serve &
    python examples/mcp_client.py [--config examples/mcp/mcp.json] [--url http://127.0.0.1:8765]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

HERE = Path(__file__).resolve().parent


def server_parameters(config: Path, url: str | None) -> StdioServerParameters:
    """The ``memstack`` server of the configuration; ``memstack`` resolves to this Python's command."""
    spec = json.loads(config.read_text())["mcpServers"]["memstack"]
    args = list(spec["args"])
    if url:
        args[args.index("--url") + 1] = url
    command = spec["command"]
    if command == "memstack" and shutil.which("memstack") is None:
        command, args = sys.executable, ["-m", "memstack.cli", *args]
    return StdioServerParameters(command=command, args=args, env=spec.get("env"))


class ToolFailed(Exception):
    """A tool answered with ``is_error`` (e.g. the Memstack API is not running): its text says why."""


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's structured result; raises ``ToolFailed`` with the tool's own error text."""
    result = await client.call_tool(tool, arguments)
    if result.is_error or result.structured_content is None:
        text = " ".join(getattr(part, "text", "") for part in result.content)
        raise ToolFailed(f"{tool}: {text or 'no result'}")
    content: dict[str, Any] = result.structured_content
    return content


async def run(params: StdioServerParameters) -> None:
    async with Client(params) as client:
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        print("tools:", ", ".join(tools))
        await call(
            client, "remember", {"content": "My passport expires in June 2027", "thread_id": "mcp-example"}
        )
        matches = (await call(client, "recall", {"query": "passport expiry", "thread_id": "mcp-example"}))[
            "matches"
        ]
        print("recalled:", matches[0]["text"] if matches else None)
        threads = await call(client, "list_threads", {})
        print("threads:", [t["id"] for t in threads["threads"]])


def leaves(group: BaseExceptionGroup[ToolFailed]) -> list[BaseException]:
    """The errors inside nested exception groups (each task group adds one level)."""
    return [
        e
        for inner in group.exceptions
        for e in (leaves(inner) if isinstance(inner, BaseExceptionGroup) else [inner])
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", type=Path, default=HERE / "mcp" / "mcp.json")
    parser.add_argument("--url", help="override the Memstack API URL of the configuration")
    args = parser.parse_args()
    failures: list[BaseException] = []
    try:
        asyncio.run(run(server_parameters(args.config, args.url)))
    except* ToolFailed as failed:  # the MCP client's task group wraps what its body raised
        failures.extend(leaves(failed))
    for error in failures:
        print(f"error: {error} (is `memstack serve` running at the configured URL?)", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
