"""A Strands agent whose memory is Memstack: two agents, one after the other, on one thread — the second
knows what the first learnt (working memory) and what was said (history).

    memstack serve &                                   # or a deployed API: --url https://...execute-api...
    python examples/strands_agent.py                   # Bedrock (Strands' default model) with AWS credentials,
    python examples/strands_agent.py --model scripted  # or offline, with a scripted model
"""

from __future__ import annotations

import boto3
from _common import OPTIONS, arguments, client
from strands import Agent

from memstack.integrations.strands import MemstackSessionManager
from memstack.integrations.testing import scripted_strands_model

THREAD = "example-strands"


def main() -> int:
    args = arguments(__doc__ or "", real_when="Bedrock, when AWS credentials are found")
    real = args.model == "real" or (
        args.model == "auto" and boto3.session.Session().get_credentials() is not None
    )
    memory = client(args)
    scripted = scripted_strands_model(
        [
            (
                "t1",
                "update_working_memory",
                {"memory_markdown": "# User\n- vegetarian\n- trip: Lisbon in May"},
            ),
            "Noted: vegetarian, Lisbon in May.",
            "A vegetarian tasca in Lisbon: you told me you are vegetarian.",
        ]
    )

    def agent() -> Agent:
        manager = MemstackSessionManager(THREAD, memory=memory, resource_id=args.resource_id, options=OPTIONS)
        model = None if real else scripted
        return Agent(
            model=model,
            system_prompt="You are a travel assistant. Keep what you learn about the user in working memory.",
            session_manager=manager,
            tools=manager.tools,
            callback_handler=None,
        )

    print("user: I am vegetarian and I go to Lisbon in May.")
    print("agent:", str(agent()("I am vegetarian and I go to Lisbon in May.")).strip())
    print("user: Where should I have dinner?")
    print("agent:", str(agent()("Where should I have dinner?")).strip())
    if not real:
        shown = scripted.calls[-1]["system"] or ""
        print("the second agent was shown working memory:", "vegetarian" in shown)
    print("working memory:", repr(memory.get_working_memory(thread_id=THREAD, options=OPTIONS)))
    print("messages stored:", len(memory.list_messages(thread_id=THREAD, last=100).messages))
    memory.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
