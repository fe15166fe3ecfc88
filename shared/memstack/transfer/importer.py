"""``import_jsonl``: an export file into a store (a migration when the file came from another backend).

Two passes over the file. The first validates every line (JSON, known ``type``, the model's rules, the
header's format and version, the ``end`` record and its counts) and the rules between records (each
thread's records after the thread, each record once, messages in ``seq`` order within their thread's
``last_seq``, message ids unique per resource, observation cursors within their threads) and compares
every thread, resource record and observation record with what the target already holds: a bad file or
a conflicting target is refused before anything is written, naming the line. The second
pass writes through the ``restore_*`` methods and indexes each thread's messages with the target's
embedder. Restores are idempotent, so an import stopped part way (Ctrl-C, a failure) is completed by
running it again, and importing a file twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from memstack.errors import Conflict, MemstackError
from memstack.model import Message, ObservationRecord, Resource, Thread, same_record
from memstack.transfer.progress import NoProgress, Progress
from memstack.transfer.records import COUNT_KEYS, COUNTED, Record, bad_line, check_header, parse
from memstack.transfer.walk import PAGE

if TYPE_CHECKING:
    from memstack.memory import Memory

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest line an import reads (UTF-8 bytes): far above any record a store accepts (a message body, an
observation record of at most ``MAX_OBSERVATION_RECORD_BYTES``), so only a file that is not an export
reaches it."""


@dataclass(slots=True)
class ImportReport:
    """What an import did: records written per kind (``COUNT_KEYS``), records the target already held
    exactly so (``unchanged``, left as they were: a second import of one file writes nothing) and the
    index chunks it embedded."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_KEYS, 0))
    unchanged: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_KEYS, 0))
    chunks_indexed: int = 0


@dataclass(frozen=True, slots=True)
class CheckedFile:
    """An export file that passed ``check_file``: its path and its records other than messages (threads,
    resource records, observation records), which ``import_jsonl`` compares with the target."""

    path: Path
    records: tuple[Record, ...]


def import_jsonl(
    memory: Memory, path: str | Path, *, progress: Progress | None = None, checked: CheckedFile | None = None
) -> ImportReport:
    """Import the export file at ``path`` into ``memory``'s store and index.

    ``checked`` is ``check_file(path)``'s result when the caller validated the file already (the CLI does,
    before it creates a database file); otherwise the file is checked here first.

    Raises:
        InvalidInput: a bad line (the message starts with ``line N:``), a file without its ``end``
            record (truncated), or counts that differ from the ``end`` record's; nothing is written.
        Conflict: the target holds a different thread, resource record or observation record under an
            id of the file (``line N:``), found before anything is written; or, while writing, a message
            id or seq the target uses otherwise (``lines N-M:``, the batch of messages it was in: what came
            before it is written).
        Whatever the store, embedder or index raise.
    """
    file = Path(path)
    checked = checked if checked is not None and checked.path == file else check_file(file)
    present = _present(memory, checked)
    progress = progress or NoProgress()
    progress.start(file.stat().st_size, "bytes")
    writer = _Writer(memory, present)
    with file.open("rb") as f:
        for record, size in _records(f):
            writer.write(record)
            progress.advance(size)
    writer.flush()
    return writer.report


def _records(f: IO[bytes]) -> Iterator[tuple[Record, int]]:
    """Each non-blank line parsed, with its size in bytes."""
    number = 0
    while raw := f.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(raw) > MAX_LINE_BYTES:
            raise bad_line(number, f"longer than the limit of {MAX_LINE_BYTES} bytes (MAX_LINE_BYTES)")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise bad_line(number, "not UTF-8 text") from None
        if text.strip():
            yield parse(number, text), len(raw)


def check_file(path: str | Path) -> CheckedFile:
    """The first pass over an export file, without a target: every line parses (JSON, a known ``type``,
    the model's rules), the header's format and version, the ``end`` record and its counts, and the rules
    that hold between records (``_FileCheck``): each thread's records after the thread, each record once,
    a thread's messages in ``seq`` order within ``1..last_seq`` and each message id once per resource,
    and no observation cursor or buffered chunk past its thread's ``last_seq``. So whatever the file holds
    is refused here, before anything is written.

    Raises:
        InvalidInput: the first bad line (``line N: …``); a file that is empty, truncated (no ``end``
            record) or whose ``end`` counts differ from its records.
    """
    file = Path(path)
    check = _FileCheck()
    end: Record | None = None
    last = 0
    with file.open("rb") as f:
        for record, _ in _records(f):
            last = record.line
            if check.first:
                check_header(record)
                check.first = False
            elif end is not None:
                raise bad_line(record.line, f"a record after the end record of line {end.line}")
            elif record.kind == "end":
                end = record
            elif record.kind == "header":
                raise bad_line(record.line, "a second header")
            else:
                check.add(record)
    if check.first:
        raise bad_line(1, "the file is empty: not a Memstack export")
    if end is None:
        raise bad_line(last, "the file ends without its end record: it is truncated; nothing was imported")
    if end.value.get("counts") != check.counts:
        raise bad_line(
            end.line, f"the end record counts {end.value.get('counts')}, but the file holds {check.counts}"
        )
    check.observations_within_threads()
    return CheckedFile(file, tuple(check.kept))


class _FileCheck:
    """The rules between an export file's records (docs/export.md), checked line by line.

    The rules are the store's own invariants, so that a file breaking one is refused before the first
    write rather than half written: ``restore_messages`` refuses a ``seq`` outside ``1..last_seq`` or
    taken twice and an id stored twice in a resource; the observer's cursor and buffered chunks name
    seqs of saved messages, so never one past the thread's ``last_seq``.
    """

    def __init__(self) -> None:
        self.first = True
        self.counts = dict.fromkeys(COUNT_KEYS, 0)
        self.kept: list[Record] = []
        self.owners: dict[tuple[str, str, str | None], int] = {}  # (kind, resource, id) → line
        self.last_seqs: dict[tuple[str, str], int] = {}  # (resource, thread) → last_seq
        self.message_lines: dict[tuple[str, str], int] = {}  # (resource, message id) → line
        self.thread: Thread | None = None  # the thread whose messages may follow
        self.previous: Record | None = None  # the thread's last message so far

    def add(self, record: Record) -> None:
        """Check one record (neither header nor end).

        Raises:
            InvalidInput: naming the record's line.
        """
        self.counts[COUNTED[record.kind]] += 1
        value = record.value
        if isinstance(value, Message):
            self._message(record, value)
            return
        if isinstance(value, Thread):
            self._once(record, (record.kind, value.resource_id, value.id))
            self.thread, self.previous = value, None
            self.last_seqs[(value.resource_id, value.id)] = value.last_seq
        elif isinstance(value, ObservationRecord):
            self._once(record, (record.kind, value.resource_id, value.thread_id))
            if value.thread_id is not None and (value.resource_id, value.thread_id) not in self.last_seqs:
                raise bad_line(record.line, "a thread's observation record comes before the thread's record")
        else:
            self._once(record, (record.kind, value.id, None))
        self.kept.append(record)

    def _once(self, record: Record, key: tuple[str, str, str | None]) -> None:
        seen = self.owners.setdefault(key, record.line)
        if seen != record.line:
            what = record.kind.replace("_", " ")
            raise bad_line(record.line, f"a second {what} of the same owner (the first is line {seen})")

    def _message(self, record: Record, message: Message) -> None:
        thread = self.thread
        if thread is None or (message.resource_id, message.thread_id) != (thread.resource_id, thread.id):
            raise bad_line(record.line, f"message {message.id!r} does not follow its thread's record")
        if not 1 <= message.seq <= thread.last_seq:
            raise bad_line(
                record.line,
                f"message {message.id!r} has seq {message.seq}, outside 1..{thread.last_seq} (its thread's "
                "last_seq)",
            )
        seen = self.message_lines.setdefault((message.resource_id, message.id), record.line)
        if seen != record.line:
            raise bad_line(
                record.line, f"message id {message.id!r} is already in this resource on line {seen}"
            )
        previous = self.previous
        if previous is not None and message.seq <= previous.value.seq:
            raise bad_line(
                record.line,
                f"message {message.id!r} has seq {message.seq}, not after seq {previous.value.seq} of line "
                f"{previous.line} (a thread's messages are in seq order, each seq once)",
            )
        self.previous = record

    def observations_within_threads(self) -> None:
        """No observation record's cursor or buffered chunk passes the ``last_seq`` of a thread of the file
        (a resource-scope cursor may name threads the file does not hold: those are not checked).

        Raises:
            InvalidInput: naming the observation record's line.
        """
        for record in self.kept:
            value = record.value
            if not isinstance(value, ObservationRecord):
                continue
            marks = [(t, seq, "cursor") for t, seq in value.cursor.items()]
            marks += [(c.thread_id, c.to_seq, f"buffered chunk {c.id!r}") for c in value.buffered_chunks]
            for thread_id, seq, what in marks:
                last_seq = self.last_seqs.get((value.resource_id, thread_id))
                if last_seq is not None and seq > last_seq:
                    raise bad_line(
                        record.line,
                        f"the observation record's {what} reaches seq {seq} of thread {thread_id!r}, past its "
                        f"last_seq {last_seq}",
                    )


def _present(memory: Memory, checked: CheckedFile) -> set[int]:
    """The lines of ``checked``'s records that the target already holds exactly so.

    Raises:
        Conflict: the target holds a different record under one of the file's ids (see ``import_jsonl``).
    """
    store = memory.store
    present: set[int] = set()
    for record in checked.records:
        value = record.value
        _within_target_limits(memory, record)
        stored: object
        if isinstance(value, Thread):
            stored = store.get_thread(value.resource_id, value.id)
        elif isinstance(value, ObservationRecord):
            stored = store.get_observation_record(value.resource_id, value.thread_id)
        else:
            assert isinstance(value, Resource)
            stored = store.get_resource(value.id)
        if stored is None:
            continue
        if not same_record(stored, value):  # type: ignore[arg-type]
            raise Conflict(
                f"line {record.line}: the target already holds a different {record.kind.replace('_', ' ')} "
                "under this id; nothing was imported (erase it, or import into another database)",
                field="line",
            )
        present.add(record.line)
    return present


def _within_target_limits(memory: Memory, record: Record) -> None:
    """Working memory within the limits of the target's options, as every other path that writes it:
    a resource's document (``working_memory.max_tokens``) and a thread's ``metadata.working_memory``
    (``WorkingMemoryActions.check_seed``: the schema in JSON mode, then the limits).

    Raises:
        InvalidInput: naming the record's line (``line N: …``); nothing is written.
    """
    from memstack.working_memory.service import check_size

    value = record.value
    try:
        if isinstance(value, Thread):
            memory.working_memory.check_seed(memory.options, value.metadata)
        elif isinstance(value, Resource) and value.working_memory is not None:
            check_size(value.working_memory, memory.tokenizer, memory.options.working_memory.max_tokens)
    except MemstackError as exc:
        raise bad_line(record.line, f"{record.kind}: {exc.message}") from None


class _Writer:
    """The second pass: restores each record, a thread's messages ``PAGE`` at a time, and indexes them.
    Records the target holds exactly so (``present``, by line) are counted as unchanged."""

    def __init__(self, memory: Memory, present: set[int]) -> None:
        self.memory = memory
        self.store = memory.store
        self.present = present
        self.report = ImportReport()
        self.thread: Thread | None = None
        self.pending: list[Message] = []
        self.first_line = 0  # the line of the first pending message

    def write(self, record: Record) -> None:
        value = record.value
        if isinstance(value, Message):
            if not self.pending:
                self.first_line = record.line
            self.pending.append(value)
            if len(self.pending) >= PAGE:
                self.flush()
            return
        self.flush()
        if isinstance(value, Thread):
            self.thread = self.store.restore_thread(value)
        elif isinstance(value, Resource):
            self.store.restore_resource(value)
        elif isinstance(value, ObservationRecord):
            self.store.restore_observation_record(value)
        else:
            return  # header, end
        tally = self.report.unchanged if record.line in self.present else self.report.counts
        tally[COUNTED[record.kind]] += 1

    def flush(self) -> None:
        """Write and index the buffered messages of the current thread."""
        if not self.pending:
            return
        thread, batch = self.thread, self.pending
        assert thread is not None  # the first pass checked the order
        self.pending = []
        try:
            written = self.store.restore_messages(thread.resource_id, thread.id, batch)
        except Conflict as exc:  # the target holds one of these ids or seqs otherwise
            first, last = self.first_line, self.first_line + len(batch) - 1
            raise Conflict(
                f"lines {first}-{last}: {exc.message}; the lines before {first} are imported (erase the "
                "conflicting thread, or import into another database)",
                field="line",
            ) from exc
        self.report.counts["messages"] += written
        self.report.unchanged["messages"] += len(batch) - written
        recall = self.memory.options.semantic_recall
        if recall.enabled:  # ``once``: messages left unchanged keep their index marks and are skipped
            self.report.chunks_indexed += self.memory.recall_engine.index_messages(
                thread, batch, recall, once=True, metered=False
            )
