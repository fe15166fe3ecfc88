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


async def run(params: StdioServerParameters) -> None:
    async with Client(params) as client:
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        print("tools:", ", ".join(tools))
        await client.call_tool(
            "remember", {"content": "My passport expires in June 2027", "thread_id": "mcp-example"}
        )
        found = await client.call_tool("recall", {"query": "passport expiry", "thread_id": "mcp-example"})
        matches = found.structured_content["matches"]
        print("recalled:", matches[0]["text"] if matches else None)
        threads = await client.call_tool("list_threads", {})
        print("threads:", [t["id"] for t in threads.structured_content["threads"]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", type=Path, default=HERE / "mcp" / "mcp.json")
    parser.add_argument("--url", help="override the Memstack API URL of the configuration")
    args = parser.parse_args()
    asyncio.run(run(server_parameters(args.config, args.url)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
