"""Reading and writing working memory through the store, safely across processes (spec §2.7).

Resource scope lives in the resource record, whose ``version`` guards compare-and-set writes
(``MemoryStore.put_resource``). An update reads the document and its version, computes the new document
(``memstack.working_memory.updates``) and writes it only if the version is unchanged; on ``Conflict``
it reads, computes and tries again. JSON mode merges, so a retry loses nothing; markdown mode replaces,
so its retries are few and it then raises ``Conflict`` — a document is always written whole, never torn.

Thread scope lives in the thread's metadata (key ``working_memory``), guarded the same way by the
thread's ``version`` (``MemoryStore.update_thread(expected_version=...)``).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from memstack.errors import Conflict, NotFound, PayloadTooLarge
from memstack.model import MAX_METADATA_BYTES, Resource, check_text
from memstack.ports import Clock, MemoryStore, Tokenizer
from memstack.working_memory.updates import Outcome

THREAD_METADATA_KEY = "working_memory"
"""Thread metadata key holding thread-scoped working memory (Mastra: ``workingMemory``)."""

MAX_WORKING_MEMORY_CHARS = 16_000
"""Hard cap on a stored working-memory document, in characters (at most 64,000 bytes of UTF-8, so that
thread-scoped working memory fits the thread's 64 KB metadata)."""

MAX_INPUT_BYTES = 256 * 1024
"""Largest update input accepted, in UTF-8 bytes; larger ones are refused before any parsing."""

JSON_ATTEMPTS = 50
"""Compare-and-set attempts of a JSON-mode update (each re-reads and re-merges). With exponential backoff
and full jitter (``backoff``), two processes writing the same record flat out never ran out of attempts
here; with 10 attempts and linear waits they did, about one run in eight."""

MARKDOWN_ATTEMPTS = 3
"""Compare-and-set attempts of a markdown update before ``Conflict``."""


def document_version(document: str | None) -> str:
    """The version of a working-memory document as the model saw it: 16 hex digits of the SHA-256 of its
    text (``""`` for no document). It names the document's content, not the record holding it, so writes
    to other fields of the record (a thread's title, other metadata) never make a model's view stale."""
    digest = hashlib.sha256((document or "").encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:VERSION_LENGTH]


VERSION_LENGTH = 16
"""Hex digits in a document version (``document_version``)."""


def is_version(value: str) -> bool:
    """Whether ``value`` has the shape of a ``document_version`` (16 lowercase hex digits): anything else
    can name no document, so an update carrying it is refused without comparing."""
    return len(value) == VERSION_LENGTH and all(c in "0123456789abcdef" for c in value)


@dataclass(frozen=True, slots=True)
class Slot:
    """Where one scope's working memory is stored: the resource record, or one thread's metadata."""

    store: MemoryStore
    clock: Clock
    resource_id: str
    thread_id: str | None = None

    def read(self) -> tuple[str | None, int]:
        """The stored document (``None`` if none) and the version to write against.

        Raises:
            NotFound: thread scope, and the thread is missing or another resource's.
        """
        if self.thread_id is None:
            resource = self.store.get_resource(self.resource_id)
            return (resource.working_memory, resource.version) if resource else (None, 0)
        thread = self.store.get_thread(self.resource_id, self.thread_id)
        if thread is None:
            raise NotFound(f"thread {self.thread_id!r} not found", field="thread_id")
        value = thread.metadata.get(THREAD_METADATA_KEY)
        return (value if isinstance(value, str) else None), thread.version

    def write(self, document: str, version: int) -> None:
        """Store ``document`` if the version is still ``version``.

        Raises:
            Conflict: another writer came first. PayloadTooLarge: thread scope, the thread's metadata
                would exceed its limit.
        """
        if self.thread_id is None:
            current = self.store.get_resource(self.resource_id) or Resource(id=self.resource_id)
            if current.version != version:
                raise Conflict("working memory changed concurrently", field="working_memory")
            self.store.put_resource(
                current.model_copy(update={"working_memory": document}), expected_version=version
            )
            return
        thread = self.store.get_thread(self.resource_id, self.thread_id)
        if thread is None:
            raise NotFound(f"thread {self.thread_id!r} not found", field="thread_id")
        merged = {**thread.metadata, THREAD_METADATA_KEY: document}
        if len(json.dumps(merged, ensure_ascii=False).encode()) > MAX_METADATA_BYTES:
            raise PayloadTooLarge(
                "working_memory does not fit: thread metadata, which holds thread-scoped working memory, "
                f"is limited to {MAX_METADATA_BYTES} bytes",
                field="working_memory",
            )
        self.store.update_thread(
            self.resource_id,
            self.thread_id,
            metadata={THREAD_METADATA_KEY: document},
            updated_at=self.clock.now(),
            expected_version=version,
        )


def check_size(document: str, tokenizer: Tokenizer, max_tokens: int) -> None:
    """Enforce the caps on a document about to be stored.

    Raises:
        PayloadTooLarge: over ``MAX_WORKING_MEMORY_CHARS`` characters or over ``max_tokens`` tokens.
        InvalidInput: not valid text (a lone surrogate, e.g. from a JSON ``\\ud800`` escape).
    """
    check_chars(document)
    tokens = tokenizer.count(document)
    if tokens > max_tokens:
        raise PayloadTooLarge(
            f"working_memory has {tokens} tokens, over the limit of {max_tokens} tokens "
            "(working_memory.max_tokens)",
            field="working_memory",
        )


def check_chars(document: str) -> None:
    """The option-free half of ``check_size``: valid text of at most ``MAX_WORKING_MEMORY_CHARS``
    characters. Raises ``InvalidInput`` (a lone surrogate), ``PayloadTooLarge`` (too long)."""
    check_text(document, "working_memory")
    if len(document) > MAX_WORKING_MEMORY_CHARS:
        raise PayloadTooLarge(
            f"working_memory has {len(document)} characters, over the limit of {MAX_WORKING_MEMORY_CHARS} "
            "characters",
            field="working_memory",
        )


def check_input_size(raw: str, field: str = "working_memory") -> None:
    """Refuse an input over ``MAX_INPUT_BYTES`` before parsing it (cheap: counts characters first).

    Raises:
        PayloadTooLarge: naming the limit.
    """
    if len(raw) > MAX_INPUT_BYTES or (size := len(raw.encode("utf-8", "surrogatepass"))) > MAX_INPUT_BYTES:
        shown = f"{len(raw)} characters" if len(raw) > MAX_INPUT_BYTES else f"{size} bytes"
        raise PayloadTooLarge(
            f"{field} is {shown}, larger than the limit of {MAX_INPUT_BYTES} bytes", field=field
        )


def backoff(attempt: int) -> float:
    """Seconds to wait after losing race number ``attempt`` (from 0): exponential with full jitter, capped
    at 50 ms, so racing writers spread out instead of colliding again in step."""
    return random.uniform(0.0, min(0.05, 0.002 * 2**attempt))


def apply(
    slot: Slot,
    compute: Callable[[str | None], Outcome],
    *,
    attempts: int,
    check: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Read, compute, compare-and-set write; on ``Conflict`` start again, at most ``attempts`` times.

    Args:
        slot: where the document lives.
        compute: the update, from the stored document to an ``Outcome`` (run again on every attempt).
        attempts: how many compare-and-set rounds before giving up.
        check: size checks of the new document (raises ``PayloadTooLarge``).
        sleep: waits a small random time between attempts (injected in tests).

    Raises:
        Conflict: every attempt lost its race. NotFound, PayloadTooLarge: from ``slot`` and ``check``.
    """
    for attempt in range(attempts):
        current, version = slot.read()
        outcome = compute(current)
        if outcome.document is None or outcome.document == current:
            return outcome
        check(outcome.document)
        try:
            slot.write(outcome.document, version)
            return outcome
        except Conflict:
            sleep(backoff(attempt))
    raise Conflict(
        f"working memory changed concurrently {attempts} times in a row; retry", field="working_memory"
    )
