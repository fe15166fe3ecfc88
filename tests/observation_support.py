"""Helpers of the observational-memory tests: a local ``Memory`` with a chat model, and LoCoMo turns.

The deterministic Observer/Reflector is ``memstack.adapters.testing.ScriptedChatModel``; ``huge_answers``
scripts it as an Observer whose answers nearly fill the observation record, with a Reflector that only
loops.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def huge_answers(lines: int) -> Any:
    """A ``ScriptedChatModel`` whose every Observer answer is ``lines`` unique lines (one 🔴 key fact
    each, ~45 tokens a line) and whose Reflector only ever answers a repetition loop."""
    from memstack.adapters.testing import DEGENERATE, ChatCall, ScriptedChatModel

    def answer(call: ChatCall) -> str:
        n = chat.count(call.kind)
        if call.kind == "observer":
            body = [f"* 🔴 (12:00) Key fact {n}: the locker code of batch {n} is {n * 7919 % 10_000}"]
            body += [
                f"* 🟡 (12:00) Detail {n}-{i}: the user mentioned item {i} of batch {n} while talking about "
                f"the garden, the weather and the train timetable number {i * 31 % 997}"
                for i in range(lines)
            ]
            return "<observations>\nDate: May 8, 2023\n" + "\n".join(body) + "\n</observations>"
        if call.kind == "reflector":
            return DEGENERATE
        return "A title"

    chat = ScriptedChatModel(respond=answer)
    return chat


def sentence(i: int) -> str:
    """About 25 tokens of small talk with a number in it."""
    return f"Message {i}: I went hiking near lake number {i} with my sister and we talked about painting classes."


def save_sentences(memory: Any, resource_id: str, thread_id: str, start: int, count: int) -> None:
    """Save ``count`` messages of ``sentence`` one per call (each save may schedule observation), ids
    ``<thread>-m<i>`` from ``start``, alternating user (odd) and assistant."""
    for i in range(start, start + count):
        memory.save_messages(
            thread_id=thread_id,
            resource_id=resource_id,
            messages=[
                {"id": f"{thread_id}-m{i}", "role": "user" if i % 2 else "assistant", "content": sentence(i)}
            ],
        )


def om_memory(
    chat: Any,
    *,
    background: str = "inline",
    scheduler: Any = None,
    path: str = ":memory:",
    embedder: Any = None,
    **options: Any,
) -> Any:
    """A local ``Memory`` (SQLite, the hash embedder unless ``embedder`` is given) with ``chat`` as the
    Observer/Reflector model."""
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex
    from memstack.adapters.sqlite.store import SqliteMemoryStore
    from memstack.adapters.testing import HashEmbedder
    from memstack.memory import Memory
    from memstack.tokens import default_tokenizer

    options.setdefault("semantic_recall", False)  # recall would interleave older messages by design
    db = SqliteDatabase(path)
    emb = embedder if embedder is not None else HashEmbedder()
    return Memory(
        store=SqliteMemoryStore(db),
        index=SqliteSearchIndex(db, emb.dimension),
        embedder=emb,
        tokenizer=default_tokenizer(),
        options=options,
        chat_model=chat,
        scheduler=scheduler,
        background=background,  # type: ignore[arg-type]
    )


def locomo_turns(count: int | None = None, *, repeats: int | None = None) -> list[dict[str, Any]]:
    """LoCoMo turns of the repository's data (data/locomo/, two conversations, 788 turns and about 30k
    tokens a pass) as message dicts, every conversation's sessions in order, pass after pass: ``repeats``
    passes (default 1), or with ``count`` alone as many passes as ``count`` turns need, cut to ``count``.
    Each later pass is a year later, with its own ids and its text tagged ``[year N]``, so that an Observer
    which drops facts it already holds sees every pass as new conversation."""
    from datetime import timedelta

    from memstack import locomo
    from memstack.demo import REPO_DATA

    data = Path(__file__).resolve().parents[1] / REPO_DATA
    assert data.is_file(), f"the repository's LoCoMo data is missing: {data}"
    conversations = locomo.load(data)
    per_pass = sum(len(session) for conv in conversations for session in conv.sessions.values())
    if repeats is None:
        repeats = 1 if count is None else -(-count // per_pass)
    out: list[dict[str, Any]] = []
    for rep in range(repeats):
        for conv in conversations:
            for session in conv.sessions.values():
                for turn in session:
                    out.append(
                        {
                            "id": f"{turn.message_id}:{rep}",
                            "role": turn.role,
                            "content": f"[year {rep + 1}] {turn.text}" if rep else turn.text,
                            "created_at": turn.created_at + timedelta(days=366 * rep),
                        }
                    )
    return out if count is None else out[:count]
