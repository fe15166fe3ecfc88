"""A long thread under observational memory at Mastra's defaults: about 200k tokens of LoCoMo turns through
one thread, with the scripted Observer/Reflector running in-process after every save. Every assembled
context must stay under ``message_tokens + observation_tokens`` (30,000 + 40,000), while observation,
buffering, activation and reflection all happen along the way. The same run with a misbehaving model
(empty, degenerate, oversized and slow answers mixed in) must also keep every ``context()`` within its
deadline and every high-priority (🔴) line the log ever held.
"""

from __future__ import annotations

import time

from memstack.adapters.testing import DEGENERATE, ChatCall, ScriptedChatModel
from tests.observation_support import locomo_turns, om_memory

R, T = "locomo-reader", "one-long-thread"
BATCH = 10


def test_every_context_stays_under_message_plus_observation_tokens() -> None:
    chat = ScriptedChatModel()
    budget = 30_000 + 40_000
    all_turns = locomo_turns(repeats=7)  # the repository's 788 turns seven times: ~220k tokens
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


def misbehaving() -> ScriptedChatModel:
    """The scripted Observer/Reflector with faults mixed in, by call number: Observer answers that are
    empty, degenerate, oversized (the real answer plus ~40k tokens of filler) or slow; every other
    Reflector answer a repetition loop (its ladder's next level then succeeds)."""
    slow_seconds = 2.5

    def answer(call: ChatCall) -> str:
        n = chat.count(call.kind)  # this call included
        if call.kind == "observer":
            fault = n % 9
            if fault == 1:
                return ""
            if fault == 3:
                return DEGENERATE
            real = chat.observe(call.last_content)
            if fault == 5:
                filler = "\n".join(
                    f"* 🟡 (12:00) filler {n}-{i}: the user talked about topic {i} at some length today"
                    for i in range(2_500)
                )
                return real.replace("</observations>", f"{filler}\n</observations>")
            if n % 40 == 7:
                time.sleep(slow_seconds)
            return real
        if call.kind == "reflector":
            return DEGENERATE if n % 2 == 1 else chat.reflect(call.last_content)
        return "Scripted title"

    chat = ScriptedChatModel(respond=answer)
    return chat


def test_with_a_misbehaving_model_every_context_stays_bounded_in_time_and_size_and_keeps_every_red_fact() -> (
    None
):
    chat = misbehaving()
    budget = 30_000 + 40_000
    timeout_ms = 2_000
    all_turns = locomo_turns(repeats=7)
    red: set[str] = set()
    with om_memory(chat, observational_memory=True, context_timeout_ms=timeout_ms) as memory:
        largest = slowest = 0.0
        for start in range(0, len(all_turns), BATCH):
            batch = all_turns[start : start + BATCH]
            began = time.monotonic()
            ctx = memory.context(thread_id=T, resource_id=R, message=batch[0]["content"])
            elapsed = time.monotonic() - began
            slowest = max(slowest, elapsed)
            largest = max(largest, ctx.token_count)
            assert ctx.token_count < budget, f"context of {ctx.token_count} tokens after {start} turns"
            assert elapsed < timeout_ms / 1000 + 1.5, f"context() took {elapsed:.1f}s after {start} turns"
            memory.save_messages(thread_id=T, resource_id=R, messages=batch)
            rec = memory.get_observation_record(resource_id=R, thread_id=T)
            if rec is not None:
                red |= {line.strip() for line in rec.active_observations.splitlines() if "🔴" in line}
        rec = memory.get_observation_record(resource_id=R, thread_id=T)
        assert rec is not None and rec.generation_count >= 1
        assert rec.observed_seq(T) > len(all_turns) - 2_000
        kept = {line.strip() for line in rec.active_observations.splitlines()}
        lost = sorted(red - kept)
        assert not lost, f"{len(lost)} of {len(red)} high-priority lines lost, e.g. {lost[:3]}"
        print(
            f"misbehaving: largest context {largest:.0f}; slowest context() {slowest:.2f}s; "
            f"observer calls {chat.count('observer')}; reflector calls {chat.count('reflector')}; "
            f"generations {rec.generation_count}; red lines {len(red)}"
        )
