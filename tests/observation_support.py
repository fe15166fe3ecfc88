"""A scripted chat model for observational-memory tests: a deterministic Observer and Reflector.

The Observer writes one short observation per transcript line it is shown (so observations are about a
third of the messages' tokens); the Reflector keeps every 🔴 line and one in ``level + 1`` of the others
(so higher compression levels give smaller logs). Faults can be scripted: a queue of answers (``""`` for an
empty answer, ``"DEGENERATE"`` for a repetition loop, an exception instance to raise) is used first.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

from memstack.ports import ChatResult

_LINE = re.compile(r"^(?:User|Assistant|Tool \w+)[^:]*:\s*(.+)$")

DEGENERATE = "DEGENERATE"


def degenerate_text() -> str:
    """A repetition loop that ``is_degenerate`` must catch."""
    return "<observations>\n" + ("* 🟡 the same line again and again and again\n" * 400) + "</observations>"


class ScriptedChat:
    """``ChatModel`` double. ``calls`` records ``(kind, messages)``; ``kind`` is observer/reflector/title."""

    model_id = "scripted/observer"

    def __init__(self, script: Sequence[Any] = (), *, words: int = 8) -> None:
        self.script = list(script)
        self.words = words
        self.calls: list[tuple[str, list[dict[str, Any]]]] = []
        self._lock = threading.Lock()

    def kind(self, messages: Sequence[dict[str, Any]]) -> str:
        system = str(messages[0]["content"]) if messages else ""
        if "<observational-memory-instruction>" in system:
            return "reflector"
        if any("## New Message History to Observe" in str(m["content"]) for m in messages):
            return "observer"
        return "title"

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        kind = self.kind(messages)
        with self._lock:
            self.calls.append((kind, list(messages)))
            scripted = self.script.pop(0) if self.script else None
        if isinstance(scripted, BaseException):
            raise scripted
        if scripted == DEGENERATE:
            return ChatResult(text=degenerate_text())
        if isinstance(scripted, str):
            return ChatResult(text=scripted)
        if kind == "observer":
            return ChatResult(text=self.observe(str(messages[-1]["content"])))
        if kind == "reflector":
            return ChatResult(text=self.reflect(str(messages[-1]["content"])))
        return ChatResult(text="Scripted title")

    def count(self, kind: str) -> int:
        """Calls of one kind so far."""
        return sum(1 for k, _ in self.calls if k == kind)

    def observe(self, history: str) -> str:
        lines = []
        for raw in history.splitlines():
            m = _LINE.match(raw.strip())
            if m:
                words = m.group(1).split()[: self.words]
                lines.append(
                    f"* 🔴 (12:00) {' '.join(words)}"
                    if "?" in m.group(1)
                    else f"* 🟡 (12:00) {' '.join(words)}"
                )
        body = "\n".join(lines) or "* 🟢 (12:00) nothing new"
        return (
            f"<observations>\nDate: May 8, 2023\n{body}\n</observations>\n"
            "<current-task>\nPrimary: keep the conversation going\n</current-task>\n"
            "<suggested-response>\nAsk how the week went\n</suggested-response>"
        )

    def reflect(self, task: str) -> str:
        level = 1
        for n, heading in ((4, "EXTREME"), (3, "CRITICAL"), (2, "AGGRESSIVE")):
            if f"## {heading} COMPRESSION REQUIRED" in task:
                level = n
                break
        body = task.split("## OBSERVATIONS TO REFLECT ON", 1)[-1].split("\n---\n", 1)[0]
        kept: list[str] = []
        others = 0
        for line in body.splitlines():
            line = line.strip()
            if not line.startswith(("*", "Date:")):
                continue
            if "🔴" in line or line.startswith("Date:"):
                if not kept or kept[-1] != line:
                    kept.append(line)
                continue
            others += 1
            if others % (level + 1) == 0:
                kept.append(line)
        return "<observations>\n" + "\n".join(kept) + "\n</observations>"


def om_memory(
    chat: Any, *, background: str = "inline", scheduler: Any = None, path: str = ":memory:", **options: Any
) -> Any:
    """A local ``Memory`` (SQLite, hash embedder) with ``chat`` as the Observer/Reflector model."""
    from memstack.adapters.hash_embed import HashEmbedder
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex
    from memstack.adapters.sqlite.store import SqliteMemoryStore
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
