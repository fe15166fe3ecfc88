"""Helpers of the observational-memory tests: a local ``Memory`` with a chat model, and LoCoMo turns.

The deterministic Observer/Reflector is ``memstack.adapters.testing.ScriptedChatModel``.
"""

from __future__ import annotations

from typing import Any


def om_memory(
    chat: Any, *, background: str = "inline", scheduler: Any = None, path: str = ":memory:", **options: Any
) -> Any:
    """A local ``Memory`` (SQLite, hash embedder) with ``chat`` as the Observer/Reflector model."""
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex
    from memstack.adapters.sqlite.store import SqliteMemoryStore
    from memstack.adapters.testing import HashEmbedder
    from memstack.memory import Memory
    from memstack.tokens import default_tokenizer

    options.setdefault("semantic_recall", False)  # recall would interleave older messages by design
    db = SqliteDatabase(path)
    emb = HashEmbedder()
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


def locomo_turns(count: int | None = None, *, repeats: int = 1) -> list[dict[str, Any]]:
    """LoCoMo turns as message dicts, every conversation's sessions in order, ``repeats`` passes (each pass a
    year later, with its own ids), cut to ``count``. One pass is about 105k tokens."""
    from datetime import timedelta

    from memstack import locomo
    from memstack.demo import default_data_path

    out: list[dict[str, Any]] = []
    conversations = locomo.load(default_data_path())
    for rep in range(repeats):
        for conv in conversations:
            for session in conv.sessions.values():
                for turn in session:
                    out.append(
                        {
                            "id": f"{turn.message_id}:{rep}",
                            "role": turn.role,
                            "content": turn.text,
                            "created_at": turn.created_at + timedelta(days=366 * rep),
                        }
                    )
    return out if count is None else out[:count]
