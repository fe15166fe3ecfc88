"""The working-memory use cases behind ``Memory``: read, update, and run a model's tool call.

``Memory`` checks ids and options and delegates here; everything is scoped to the resource it acts for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memstack.config import MemoryOptions, WorkingMemoryOptions
from memstack.errors import Conflict, Forbidden, InvalidInput, NotFound, PayloadTooLarge
from memstack.model import Message, Thread, ToolResultPart, check_text, new_id
from memstack.ports import Clock, MemoryStore, Tokenizer
from memstack.working_memory import service
from memstack.working_memory.schema import MemorySchema
from memstack.working_memory.service import Slot
from memstack.working_memory.tools import TOOL_NAME, VERSION_ARGUMENT, ToolCall, parse_tool_call
from memstack.working_memory.updates import (
    Outcome,
    json_merge,
    markdown_replace,
    stale,
    vnext_update,
)


@dataclass(frozen=True, slots=True)
class WorkingMemoryActions:
    """Working-memory reads and writes over a store (see ``memstack.working_memory.service``)."""

    store: MemoryStore
    clock: Clock
    tokenizer: Tokenizer

    def slot(self, options: WorkingMemoryOptions, resource_id: str, thread_id: str | None) -> Slot:
        """Where this scope's document lives."""
        return Slot(self.store, self.clock, resource_id, None if options.scope == "resource" else thread_id)

    def get(self, options: WorkingMemoryOptions, resource_id: str, thread_id: str | None) -> str | None:
        """The stored document, ``None`` if none (or the thread is missing or another resource's)."""
        try:
            return self.slot(options, resource_id, thread_id).read()[0]
        except NotFound:
            return None

    def update(self, opts: MemoryOptions, resource_id: str, thread_id: str | None, value: object) -> Outcome:
        """A direct update: markdown replaces, JSON merges (``value`` an object or a JSON string).

        Raises:
            InvalidInput: disabled, wrong type, invalid JSON or a schema violation. Forbidden: read-only.
            PayloadTooLarge: over a size cap. NotFound: thread scope, thread missing or another's.
            Conflict: lost the compare-and-set race every time.
        """
        wm = self._writable(opts)
        if isinstance(value, str):
            check_text(value, "working_memory")
            service.check_input_size(value)
        elif not (wm.mode == "json" and isinstance(value, dict)):
            kind = "a string or an object" if wm.mode == "json" else "a string"
            raise InvalidInput(f"working_memory must be {kind}", field="working_memory")
        else:
            try:
                encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError, RecursionError):
                raise InvalidInput(
                    "working_memory is not JSON-serialisable", field="working_memory"
                ) from None
            service.check_input_size(encoded)
        try:
            outcome = self._run(wm, resource_id, thread_id, {"memory": value}, guard=False)
        except RecursionError:
            raise InvalidInput("working_memory is nested too deeply", field="working_memory") from None
        if outcome.is_error:
            raise InvalidInput(outcome.message, field="working_memory")
        return outcome

    def apply_tool_call(
        self,
        opts: MemoryOptions,
        resource_id: str,
        thread_id: str,
        tool_call: object,
        *,
        seen_version: str | None = None,
        versions: dict[str, str] | None = None,
    ) -> Message:
        """Run a model's ``updateWorkingMemory`` call and return the tool-result message to show it.

        A missing thread is created for ``resource_id``. What the model got wrong (bad JSON, a schema
        violation, the bare template, a size cap, read-only) comes back as the result, never raised.

        A markdown update replaces the whole document, so it is checked against ``seen_version`` (the
        ``document_version`` of the document the model was shown): when the stored document has moved on
        since, nothing is written and the error result carries the current document for the model to redo
        its change on — never a silent overwrite of what another writer added. The check and the write are
        one compare-and-set, so of N calls made from one read exactly one succeeds and the others are told.
        The seen version comes from ``seen_version``, else the turn's ``versions``, else the call's own
        ``version`` argument (the model copies it from the system message, ``tools.VERSION_ARGUMENT``), so
        a caller that passes back only the tool call is guarded too. A call with none of them replaces
        whatever is stored (a Mastra-shaped call). The result tells the model the version it has seen
        since (``"version"``), for its next call in the same turn.

        The returned message's ``metadata["working_memory_version"]`` is the version the model has seen
        once it reads the result (the document it wrote, or the current one an error result shows it).

        Args:
            seen_version: the version the model was shown; ``None``: read from ``versions``, then from the
                call's ``version`` argument.
            versions: a turn's ``ModelContext.versions``: read for the seen version when ``seen_version``
                is ``None``, and updated with the version the model has seen once it reads the result.

        Raises:
            InvalidInput: not an ``updateWorkingMemory`` call, malformed, disabled; ``seen_version`` not a str.
            NotFound: the thread belongs to another resource (nothing is written).
            Conflict: lost the compare-and-set race every time.
        """
        _check_callers_version(seen_version)
        call = parse_tool_call(tool_call)
        if call.name != TOOL_NAME:
            raise InvalidInput(
                f"tool_call is {call.name!r}, not {TOOL_NAME}", field="tool_call.function.name"
            )
        if not opts.working_memory.enabled:
            raise InvalidInput("working memory is not enabled", field="working_memory")
        self._own_thread(resource_id, thread_id)
        whole_document = opts.working_memory.json_schema is None and opts.working_memory.version != "vnext"
        if seen_version is None:
            seen_version = _seen_version(call, versions, whole_document)
        try:
            outcome = self._tool_outcome(opts, resource_id, thread_id, call, seen_version)
        except (Forbidden, PayloadTooLarge, InvalidInput) as exc:
            outcome = Outcome(False, f"Not saved: {exc.message}", is_error=True)
        except RecursionError:
            outcome = Outcome(False, "Not saved: the memory is nested too deeply.", is_error=True)
        now_seen = _now_seen(outcome, seen_version)
        if versions is not None and now_seen is not None:
            versions["working_memory"] = now_seen
        result = outcome.as_result()
        if whole_document and now_seen is not None:
            result[VERSION_ARGUMENT] = now_seen  # what the model passes with its next call of this turn
        return Message(
            id=new_id(),
            thread_id=thread_id,
            resource_id=resource_id,
            metadata={"working_memory_version": now_seen} if now_seen is not None else {},
            role="tool",
            parts=(
                ToolResultPart(
                    tool_call_id=call.id,
                    name=TOOL_NAME,
                    result=result,
                    is_error=outcome.is_error,
                ),
            ),
            created_at=self.clock.now(),
        )

    def _tool_outcome(
        self, opts: MemoryOptions, resource_id: str, thread_id: str, call: ToolCall, seen: str | None
    ) -> Outcome:
        wm = self._writable(opts)
        if call.arguments is None:
            return Outcome(False, f"Not saved: {call.error}.", is_error=True)
        return self._run(wm, resource_id, thread_id, call.arguments, guard=True, seen=seen)

    def _run(
        self,
        wm: WorkingMemoryOptions,
        resource_id: str,
        thread_id: str | None,
        args: dict[str, Any],
        *,
        guard: bool,
        seen: str | None = None,
    ) -> Outcome:
        slot = self.slot(wm, resource_id, thread_id)

        def check(document: str) -> None:
            service.check_size(document, self.tokenizer, wm.max_tokens)

        if wm.json_schema is not None:
            schema = MemorySchema.of(wm.json_schema)
            # a missing {memory} wrapper is tolerated: the arguments are then the memory itself
            payload = args.get("memory", args or None)
            return service.apply(
                slot,
                lambda cur: json_merge(cur, payload, schema),
                attempts=service.JSON_ATTEMPTS,
                check=check,
            )
        if wm.version == "vnext" and guard:
            new, search, reason = args.get("newMemory"), args.get("searchString"), args.get("updateReason")
            if (
                not isinstance(new, str)
                or not isinstance(search, str | None)
                or not isinstance(reason, str | None)
            ):
                return Outcome(
                    False,
                    "Not saved: newMemory, searchString and updateReason must be strings.",
                    is_error=True,
                )
            return service.apply(
                slot,
                lambda cur: vnext_update(
                    cur,
                    new,
                    search_string=search,
                    reason=reason or "append-new-memory",
                    template=wm.effective_template,
                    scope=wm.scope,
                ),
                attempts=service.MARKDOWN_ATTEMPTS,
                check=check,
            )
        memory = args.get("memory")
        if not isinstance(memory, str):
            return Outcome(
                False,
                "Not saved: memory must be a string holding the whole Markdown document.",
                is_error=True,
            )
        check_text(memory, "working_memory")
        template = wm.effective_template

        def replace(cur: str | None) -> Outcome:
            if seen is not None and not service.is_version(seen):
                return stale(cur, garbled=True)
            if seen is not None and service.document_version(cur) != seen:
                return stale(cur)
            if guard:
                return markdown_replace(cur, memory, template)
            return Outcome(True, "Working memory saved.", document=memory)

        return service.apply(slot, replace, attempts=service.MARKDOWN_ATTEMPTS, check=check)

    @staticmethod
    def _writable(opts: MemoryOptions) -> WorkingMemoryOptions:
        if not opts.working_memory.enabled:
            raise InvalidInput("working memory is not enabled", field="working_memory")
        if opts.read_only:
            raise Forbidden("memory is read-only: working memory cannot be updated", field="working_memory")
        return opts.working_memory

    def _own_thread(self, resource_id: str, thread_id: str) -> Thread:
        """The thread, created for ``resource_id`` when missing.

        Raises:
            NotFound: it belongs to another resource.
        """
        thread = self.store.get_thread(resource_id, thread_id)
        if thread is not None:
            return thread
        now: datetime = self.clock.now()
        try:
            return self.store.create_thread(
                Thread(id=thread_id, resource_id=resource_id, created_at=now, updated_at=now)
            )
        except Conflict:  # it exists: created meanwhile by this resource, or another resource's
            thread = self.store.get_thread(resource_id, thread_id)
            if thread is None:
                raise NotFound(f"thread {thread_id!r} not found", field="thread_id") from None
            return thread

    def check_seed(self, opts: MemoryOptions, metadata: dict[str, Any]) -> None:
        """Size checks of initial working memory given in thread metadata, before anything is written —
        whether or not working memory is enabled in ``opts`` (a call may enable it), with the limits of
        every other path (``service.check_size``: characters, then ``max_tokens``).

        Raises:
            PayloadTooLarge: over the input, character or token limits.
            InvalidInput: the value is not a string (``None`` included: metadata holds no nulls to delete
                a key with); JSON mode, and it is not a JSON object valid against the schema (nulls are
                stripped and merged as an update onto nothing, as the model's first write would be).
        """
        wm = opts.working_memory
        if service.THREAD_METADATA_KEY not in metadata:
            return
        value = metadata[service.THREAD_METADATA_KEY]
        if not isinstance(value, str):
            # every reader takes a non-string as no document, so it would seed nothing and read as None
            raise InvalidInput(
                "metadata.working_memory must be a string: the working-memory document (markdown, or in "
                f"schema mode the JSON text of an object), not {type(value).__name__}",
                field="metadata.working_memory",
            )
        # sized even while working memory is off in the configured options: a call may enable it, and
        # then this document is shown and written back, so it must fit the same limits as any other path
        service.check_input_size(value)
        document = value
        if wm.enabled and wm.json_schema is not None:
            try:
                outcome = json_merge(None, value, MemorySchema.of(wm.json_schema))
            except RecursionError:
                raise InvalidInput(
                    "metadata.working_memory is nested too deeply", field="metadata.working_memory"
                ) from None
            if outcome.is_error or outcome.document is None:
                raise InvalidInput(
                    f"metadata.working_memory: {outcome.message}", field="metadata.working_memory"
                )
            document = outcome.document
        service.check_size(document, self.tokenizer, wm.max_tokens)

    def seed_from_thread(self, opts: MemoryOptions, thread: Thread) -> None:
        """Initial working memory given in a thread's metadata (spec §2.7 "Initial WM"): thread scope keeps
        it there; resource scope copies it to the resource record only while the resource has none.

        Mastra's ``saveThread`` writes the resource record whenever a thread's metadata carries working
        memory, so creating a scratch thread silently replaces what every other thread of the resource
        sees. Here the copy is a seed, written compare-and-set against a record without a document (a
        concurrent first write wins, and the seed then keeps it); changing a resource's working memory
        is ``update_working_memory``'s job, with its stale-write check.
        """
        wm = opts.working_memory
        value = thread.metadata.get(service.THREAD_METADATA_KEY)
        if not wm.enabled or wm.scope != "resource" or not isinstance(value, str) or opts.read_only:
            return
        schema = MemorySchema.of(wm.json_schema) if wm.json_schema is not None else None

        def seed(current: str | None) -> Outcome:
            if current is not None:
                return Outcome(True, "the resource already has working memory: kept")
            if schema is not None:
                return json_merge(None, value, schema)
            return Outcome(True, "seeded", document=value)

        service.apply(
            self.slot(wm, thread.resource_id, thread.id),
            seed,
            attempts=service.JSON_ATTEMPTS if schema is not None else service.MARKDOWN_ATTEMPTS,
            check=lambda doc: service.check_size(doc, self.tokenizer, wm.max_tokens),
        )


def _check_callers_version(seen_version: object) -> None:
    """Refuse a caller's seen version that is not a string: compared with a document's version it
    would never match, and the refusal would blame the model for the caller's mistake.

    Raises:
        InvalidInput: field ``working_memory_version``.
    """
    if seen_version is not None and not isinstance(seen_version, str):
        raise InvalidInput(
            "working_memory_version must be a string: the working_memory_version a context gave",
            field="working_memory_version",
        )


def _seen_version(call: ToolCall, versions: dict[str, str] | None, whole_document: bool) -> str | None:
    """The version the model was shown: the turn's ``versions``, else (a whole-document update) the
    call's own ``version`` argument as ``echoed_version`` reads it; ``None`` when neither has one."""
    if versions is not None and versions.get("working_memory") is not None:
        return versions["working_memory"]
    if not whole_document or call.arguments is None:
        return None
    return echoed_version(call.arguments.get(VERSION_ARGUMENT))


def echoed_version(value: object) -> str | None:
    """The ``version`` argument of a model's markdown call, as the text to compare with the stored
    document's version.

    * absent or ``null`` → ``None``, no version: the call is unguarded, as a Mastra-shaped call is
      (a strict provider pads every optional argument with ``null``, so ``null`` means "not given");
    * a string → itself;
    * a JSON integer → its decimal digits. A version is 16 hex digits, and about one in two thousand
      has none of a–f; a model that copies such a version without its quotes wrote the right digits.
      Compared as text, a right one is written and any other is refused (a version whose leading zero
      a number cannot carry no longer has 16 digits, and is refused as garbled, never matched);
    * anything else (``true``, a fraction, a list, an object) → its JSON text, which is never a version,
      so the update is refused with the current document and its version. Taking it as "no version"
      would write the whole document unchecked and drop what another writer added since the model read.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=repr)


def _now_seen(outcome: Outcome, seen: str | None) -> str | None:
    """The version the model has seen once it reads the result: of the current document an error shows
    it, of the document it wrote, else the one it was shown."""
    if outcome.current is not None:
        return service.document_version(outcome.current)
    if outcome.success and outcome.document is not None:
        return service.document_version(outcome.document)
    return seen
