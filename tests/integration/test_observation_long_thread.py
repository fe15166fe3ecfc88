"""A long thread under observational memory at Mastra's defaults: about 200k tokens of LoCoMo turns through
one thread, with the scripted Observer/Reflector running in-process after every save. Every assembled
context must stay under ``message_tokens + observation_tokens`` (30,000 + 40,000), while observation,
buffering, activation and reflection all happen along the way.
"""

from __future__ import annotations

from memstack.adapters.testing import ScriptedChatModel
from tests.observation_support import locomo_turns, om_memory

R, T = "locomo-reader", "one-long-thread"
BATCH = 10


def test_every_context_stays_under_message_plus_observation_tokens() -> None:
    chat = ScriptedChatModel()
    budget = 30_000 + 40_000
    all_turns = locomo_turns(repeats=2)  # every turn twice: ~210k tokens
    with om_memory(chat, observational_memory=True) as memory:
        saved_tokens = 0
        largest = 0
        for start in range(0, len(all_turns), BATCH):
            batch = all_turns[start : start + BATCH]
            ctx = memory.context(thread_id=T, resource_id=R, message=batch[0]["content"])
            largest = max(largest, ctx.token_count)
            assert ctx.token_count < budget, f"context of {ctx.token_count} tokens after {start} turns"
            memory.save_messages(thread_id=T, resource_id=R, messages=batch)
            saved_tokens += sum(memory.tokenizer.count(t["content"]) + 4 for t in batch)
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None
        assert saved_tokens > 190_000
        assert rec.generation_count >= 1, "the observations should have been reflected at least once"
        assert rec.observation_tokens < 40_000
        assert chat.count("observer") > 10 and chat.count("reflector") >= 1
        assert rec.observed_seq(T) > len(all_turns) - 2_000
        # the chunks and the cursor never overlap, and observed + buffered + tail cover every message
        expected = rec.observed_seq(T) + 1
        for chunk in rec.buffered_chunks:
            assert chunk.from_seq == expected
            expected = chunk.to_seq + 1
        print(f"saved {saved_tokens} tokens; largest context {largest}; generations {rec.generation_count}")
