"""An OpenAI Agents SDK agent whose session is a Memstack thread: two runs, each with a new session
object (as two processes would), and working memory plus recall from other threads fed into the run.

    memstack serve &
    python examples/openai_agents_session.py                   # OpenAI, when OPENAI_API_KEY is set,
    python examples/openai_agents_session.py --model scripted  # or offline, with a scripted model
"""

from __future__ import annotations

import argparse
import asyncio
import os

from _common import OPTIONS, arguments, client
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled

from memstack.integrations.openai_agents import MemstackSession
from memstack.integrations.testing import scripted_agents_model

THREAD = "example-agents"


@function_tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny, 24 °C in {city}"


async def run(args: argparse.Namespace, real: bool) -> None:
    memory = client(args)
    memory.update_working_memory(
        thread_id=THREAD, working_memory="# User\n- name: Ana\n- allergic to nuts", options=OPTIONS
    )
    memory.save_messages(
        thread_id="example-old-trip", messages=["Last time in Porto I loved the francesinha"]
    )
    model = (
        None
        if real
        else scripted_agents_model(
            [
                ("call_1", "get_weather", {"city": "Porto"}),
                "It is sunny in Porto, Ana.",
                "Try the francesinha again, without nuts.",
            ]
        )
    )
    agent = Agent(
        name="travel",
        instructions="You are a travel assistant.",
        tools=[get_weather],
        **({"model": model} if model else {}),
    )
    for text in ("What's the weather in Porto?", "What should I eat there, like last time?"):
        session = MemstackSession(THREAD, memory=memory, resource_id=args.resource_id)
        result = await Runner.run(
            agent, text, session=session, run_config=RunConfig(session_input_callback=session.input_callback)
        )
        print("user:", text)
        print("agent:", result.final_output)
    if model is not None:
        lead = model.inputs[-1][0]
        print("the model was shown memory:", lead["role"] == "system" and "francesinha" in lead["content"])
    print(
        "items in the session:",
        len(await MemstackSession(THREAD, memory=memory, resource_id=args.resource_id).get_items()),
    )
    memory.close()


def main() -> int:
    args = arguments(__doc__ or "", real_when="OpenAI, when OPENAI_API_KEY is set")
    real = args.model == "real" or (args.model == "auto" and bool(os.environ.get("OPENAI_API_KEY")))
    set_tracing_disabled(not real)
    asyncio.run(run(args, real))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
