"""The observational-memory engine: Observer and Reflector runs over the observation record (spec §2.9).

Every change of the record is one compare-and-set write (``MemoryStore.put_observation_record`` with the
version read). Model calls run outside any lock, on a snapshot; when the write loses a race the engine
re-reads and applies its result only if the messages it observed are still unobserved and uncovered —
otherwise the result is dropped. So two triggers racing over the same messages never observe them
twice, and the cursor never skips a message (tests/unit/test_observation_engine.py).

One background step (``step``) does, in order, whatever the thresholds say is due (spec §2.9.4):

1. **activate** a prefix of buffered chunks once pending tokens reach ``message_tokens`` (no model call);
2. **observe** synchronously when pending is still at the threshold after activation: every buffered
   chunk becomes active and the uncovered tail is observed;
3. **buffer**: below the threshold, observe the messages after the last chunk when an interval boundary
   was crossed, as a chunk that is not yet shown to the model.

``reflect`` runs the Reflector with the compression ladder (spec §2.9.4 step 8, §3.3) and never commits
an empty or degenerate reflection: a bad model answer never wipes the observations.

The record is per thread (scope ``thread``) or per resource (scope ``resource``: one log for all the
resource's threads, each thread's contribution inside ``<thread id="…">``, a cursor per thread, no async
buffering).
"""

from __future__ import annotations

import hashlib
import html
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memstack import deadline as turn_deadline
from memstack.config import MemoryOptions, ObservationalMemoryOptions
from memstack.errors import Conflict, InvalidInput, MemstackError, NotFound, Unavailable
from memstack.model import (
    MAX_BUFFERED_CHUNKS,
    MAX_ERROR_CHARS,
    BufferedChunk,
    Message,
    ObservationRecord,
    Thread,
)
from memstack.observation.capacity import MIN_CUT_TOKENS, TRUNCATE_AT_BYTES, TRUNCATE_TO_SHARE, cut_log, fit
from memstack.observation.guards import new_lines_only, reflection_problem
from memstack.observation.log_format import BOUNDARY, model_text, split_log
from memstack.observation.recall_tool import split_range
from memstack.observation.requirements import missing_chat_model
from memstack.observation.thresholds import Thresholds, activation_count, resolve, should_buffer
from memstack.observation.transcript import count_message_tokens, transcript_batches
from memstack.observation.usage import FLUSH_CALLS, MeteredChat, UsageMeter
from memstack.ports import ChatModel, Clock, MemoryStore, ObservationJob, Tokenizer

if TYPE_CHECKING:
    from memstack.observation.parsing import ObserverOutput

__all__ = [
    "BOUNDARY",
    "MAX_UNOBSERVED_MESSAGES",
    "ObservationFailed",
    "ObservationEngine",
    "ObserveResult",
    "ReflectResult",
    "ReflectionFailed",
    "ReflectorUnavailable",
    "failure_text",
    "reflection_failure",
    "split_log",
    "thread_label",
]

logger = logging.getLogger(__name__)

MAX_UNOBSERVED_MESSAGES = 2_000
"""Most unobserved messages one step reads; a longer backlog is worked through over several steps."""

MAX_WRITE_ATTEMPTS = 5
"""Compare-and-set writes one step may lose in a row before it gives up with ``Conflict``."""

MAX_STEP_ROUNDS = 40
"""Most read-decide-write rounds of one step (each round commits one activation, batch or chunk)."""

_SAFE_KEY = re.compile(r"[^A-Za-z0-9_-]")

_THREAD_TAG = re.compile(r"</?thread\b", re.IGNORECASE)

_RANGE_RE = re.compile(r'<observation-group\b[^>\n]*\brange="([^"\n]*)"')


class ObservationFailed(MemstackError):
    """The Observer or Reflector answered with nothing usable twice (empty or degenerate output). The
    record is unchanged; the failure is recorded and a later run retries (spec §2.9.4 steps 7–8)."""

    code = "observation_failed"
    status = 502


class ReflectionFailed(ObservationFailed):
    """Every Reflector attempt of the ladder was empty or degenerate, or the Reflector could not be run
    (``reflection_failure``); the observations are unchanged. Reflection is then not retried by saves for
    a while (``REFLECTION_BACKOFF``); the sweep retries.

    Attributes:
        retry_after: seconds the model asked to wait (its ``Retry-After``), or ``None``.
    """

    code = "reflection_failed"
    retry_after: float | None = None


class ReflectorUnavailable(Unavailable):
    """The Reflector's model call failed or was throttled (HTTP 5xx/429, a timeout, an unreadable answer).
    A kind of ``Unavailable`` (HTTP 503: callers and the state machine retry it), named apart because a
    failure is recorded by its class name — on AWS by the state machine's Catch — and this one must back
    off reflection only, not observation."""

    code = "reflector_unavailable"


REFLECTION_ERRORS = (ReflectionFailed.__name__, ReflectorUnavailable.__name__)
"""The class names that mark a recorded failure (``last_error``) as the Reflector's stage."""

REFLECTION_BACKOFF = timedelta(minutes=2)
"""After a failed background run of any kind (an unusable answer, an HTTP 5xx or 429, a timeout, a store
failure), saves do not call the model for the failed stage (Observer or Reflector) again for
``REFLECTION_BACKOFF × 2^(failures − 1)`` (at most ``MAX_REFLECTION_BACKOFF``), or for as long as the
model's ``Retry-After`` asked when that is longer: a model that keeps failing is not called on every turn.
A turn's deadline (``DeadlineExceeded``) is not a failure of the model and starts no backoff: the run goes
on in the background."""

MAX_REFLECTION_BACKOFF = timedelta(hours=1)

MAX_SWEEP_BACKOFF = timedelta(hours=6)
"""The longest the sweep waits before retrying a record that keeps failing."""

TRUNCATE_AFTER_FAILURES = 2
"""Failed reflections in a row after which ``reflect`` itself truncates a log over the reflection's
``block_after`` to ``TRUNCATE_TO_SHARE`` of the threshold (``ObservationEngine._truncated``, reported as
``truncated``) instead of raising: two failures are a Reflector that cannot do the job right now. The log
never stays past that point meanwhile: a write of a record whose reflection failed cuts it back to it
(``capacity.fit``)."""

MAX_OUTPUT_TOKENS = 32_000
"""Largest answer asked of the Observer or Reflector, whatever ``model_settings.max_output_tokens`` says
(Mastra's 100,000): a longer answer could not fit the observation record (``MAX_OBSERVATION_RECORD_BYTES``)."""


def failure_text(exc: BaseException) -> str:
    """``"<ErrorClass>: <message>"`` for Memstack's own errors (their messages name ids and limits, never
    conversation text), the class alone for anything else (whose message could quote anything)."""
    name = type(exc).__name__
    return f"{name}: {exc.message}" if isinstance(exc, MemstackError) and exc.message else name


def reflection_failure(exc: Exception) -> ReflectionFailed:
    """``exc``, raised while reflecting, as the ``ReflectionFailed`` it is recorded as: the Reflector's
    stage backs off and observation goes on (a Reflector answering HTTP 500 must not stop the cursor).
    The cause's ``retry_after`` (``Unavailable``) is kept."""
    if isinstance(exc, ReflectionFailed):
        return exc
    failed = ReflectionFailed(f"the Reflector could not run ({failure_text(exc)})")
    failed.retry_after = getattr(exc, "retry_after", None)
    return failed


def _complete(
    chat: ChatModel, request: list[dict[str, Any]], max_output_tokens: int, temperature: float, agent: str
) -> str:
    """One model call; an error that is not Memstack's (a broken endpoint's undecodable answer, a client
    bug) becomes ``Unavailable`` naming its class, so callers and the state machine treat it as transient."""
    try:
        answer = chat.complete(
            request, max_output_tokens=min(max_output_tokens, MAX_OUTPUT_TOKENS), temperature=temperature
        )
    except MemstackError:
        raise
    except Exception as exc:
        raise Unavailable(f"the {agent} model call failed ({type(exc).__name__})") from exc
    return answer.text or ""


@dataclass(frozen=True, slots=True)
class ObserveResult:
    """What one background step did.

    Attributes:
        should_reflect: the observations reached a reflection point (run ``reflect`` next).
        observed_messages: messages made active by this step (activation or synchronous observation).
        activated_chunks: buffered chunks activated.
        buffered_chunks: chunks buffered by this step.
        observation_tokens: tokens of the active observations after the step.
        pending_tokens: tokens of unobserved messages after the step.
        title: the thread title set by this step, if any.
    """

    should_reflect: bool = False
    observed_messages: int = 0
    activated_chunks: int = 0
    buffered_chunks: int = 0
    observation_tokens: int = 0
    pending_tokens: int = 0
    title: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (the Step Functions task output)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ReflectResult:
    """What a reflection did.

    Attributes:
        reflected: a reflection (or a buffered one) was committed.
        level: the compression level of the committed attempt (0: none).
        tokens_before, tokens_after: observation tokens around the reflection.
        generation_count: reflections of the record so far.
        buffered: the reflection was stored as buffered (not yet active).
        truncated: every Reflector answer was refused and the log was over its hard point, so it was cut
            deterministically instead (``ObservationEngine._truncated``: 🔴 lines and the newest lines).
    """

    reflected: bool = False
    level: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    generation_count: int = 0
    buffered: bool = False
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (the Step Functions task output)."""
        return asdict(self)


WorkingMemoryWriter = Callable[[MemoryOptions, str, str, str], None]
"""``(options, resource_id, thread_id, document)`` → replace working memory (``manage_working_memory``)."""

WorkingMemoryReader = Callable[[MemoryOptions, str, str], "str | None"]
"""``(options, resource_id, thread_id)`` → the current working memory (``None``: none yet)."""


@dataclass(frozen=True, slots=True)
class _View:
    """A snapshot: the record (or a fresh one), the thread's unobserved messages and their token count."""

    record: ObservationRecord
    thread_id: str
    tail: list[Message]
    pending: int

    @property
    def chunks(self) -> list[BufferedChunk]:
        return [c for c in self.record.buffered_chunks if c.thread_id == self.thread_id]

    @property
    def covered_seq(self) -> int:
        """The last seq observed or buffered for the thread."""
        chunks = self.chunks
        return chunks[-1].to_seq if chunks else self.record.observed_seq(self.thread_id)

    @property
    def uncovered(self) -> list[Message]:
        covered = self.covered_seq
        return [m for m in self.tail if m.seq > covered]


class ObservationEngine:
    """Observer and Reflector over one store.

    Args:
        store: the observation records and messages.
        tokenizer: counts message and observation tokens (tiktoken ``o200k_base``).
        chat_model: the Observer's and Reflector's model; ``None`` makes every model step raise
            ``InvalidInput`` (field ``chat_model``).
        clock: time source.
        working_memory: writes the Observer's ``<working-memory>`` (``manage_working_memory``).
        read_working_memory: reads the current working memory shown to the Observer for that.
        usage: where model and embedding calls are metered until a record write takes them (shared
            with semantic recall, which meters embeddings into it); a new one if omitted.
    """

    def __init__(
        self,
        *,
        store: MemoryStore,
        tokenizer: Tokenizer,
        chat_model: ChatModel | None,
        clock: Clock,
        working_memory: WorkingMemoryWriter | None = None,
        read_working_memory: WorkingMemoryReader | None = None,
        usage: UsageMeter | None = None,
    ) -> None:
        self.store = store
        self.tokenizer = tokenizer
        self.chat_model = chat_model
        self.clock = clock
        self._write_working_memory = working_memory
        self._read_working_memory = read_working_memory
        self._models: dict[tuple[int, str], ChatModel] = {}
        self._token_cache: OrderedDict[tuple[str, int, int], int] = OrderedDict()
        self._pending: OrderedDict[tuple[str, str], tuple[int, int, int]] = OrderedDict()
        self._pending_lock = threading.Lock()
        self.usage = usage if usage is not None else UsageMeter()

    # reading -------------------------------------------------------------------------------------

    def owner(self, om: ObservationalMemoryOptions, thread_id: str) -> str | None:
        """The record's ``thread_id``: the thread in thread scope, ``None`` in resource scope."""
        return thread_id if om.scope == "thread" else None

    def get_record(
        self, om: ObservationalMemoryOptions, resource_id: str, thread_id: str
    ) -> ObservationRecord | None:
        """The stored record of the thread (or of its resource in resource scope)."""
        return self.store.get_observation_record(resource_id, self.owner(om, thread_id))

    def _fresh(self, om: ObservationalMemoryOptions, resource_id: str, thread_id: str) -> ObservationRecord:
        return ObservationRecord(scope=om.scope, resource_id=resource_id, thread_id=self.owner(om, thread_id))

    def view(
        self,
        om: ObservationalMemoryOptions,
        resource_id: str,
        thread_id: str,
        record: ObservationRecord | None = None,
    ) -> tuple[ObservationRecord, list[Message], int]:
        """``(record, unobserved messages, their tokens)`` of the thread: the record as stored (or a
        fresh, unsaved one) and the thread's messages after its cursor, oldest first (at most
        ``MAX_UNOBSERVED_MESSAGES``)."""
        rec = record if record is not None else self.get_record(om, resource_id, thread_id)
        rec = rec if rec is not None else self._fresh(om, resource_id, thread_id)
        tail = self.store.list_messages(
            resource_id, thread_id, limit=MAX_UNOBSERVED_MESSAGES, after_seq=rec.observed_seq(thread_id)
        )
        return rec, tail, self.count(tail)

    def pending(
        self, om: ObservationalMemoryOptions, resource_id: str, thread_id: str
    ) -> tuple[ObservationRecord, int, int]:
        """``(record, pending tokens, last seq)`` for a trigger check after a save — the cheap version of
        ``view``: while the thread's cursor has not moved, only the messages saved since the last check
        are read and counted (a per-process cache; a cold cache reads the whole tail once). Edits or
        deletions of counted messages can skew the figure until the cursor moves; the step itself always
        recounts from the store."""
        rec = self.get_record(om, resource_id, thread_id) or self._fresh(om, resource_id, thread_id)
        cursor = rec.observed_seq(thread_id)
        key = (resource_id, thread_id)
        with self._pending_lock:
            cached = self._pending.get(key)
        if cached is not None and cached[0] == cursor:
            _, last, tokens = cached
            new = self.store.list_messages(
                resource_id, thread_id, limit=MAX_UNOBSERVED_MESSAGES, after_seq=last
            )
        else:
            last, tokens = cursor, 0
            new = self.store.list_messages(
                resource_id, thread_id, limit=MAX_UNOBSERVED_MESSAGES, after_seq=cursor
            )
        tokens += self.count(new)
        last = new[-1].seq if new else last
        with self._pending_lock:
            self._pending[key] = (cursor, last, tokens)
            self._pending.move_to_end(key)
            if len(self._pending) > 10_000:
                self._pending.popitem(last=False)
        return rec, tokens, last

    def _view(self, om: ObservationalMemoryOptions, resource_id: str, thread_id: str) -> _View:
        rec, tail, pending = self.view(om, resource_id, thread_id)
        return _View(rec, thread_id, tail, pending)

    def count(self, messages: Sequence[Message]) -> int:
        """Tokens of ``messages`` (cached per message id, seq, part count and text)."""
        total = 0
        for m in messages:
            key = (m.id, m.seq, hash((len(m.parts), m.text)))  # parts may hold dicts (unhashable)
            cached = self._token_cache.get(key)
            if cached is None:
                cached = count_message_tokens([m], self.tokenizer)
                self._token_cache[key] = cached
                if len(self._token_cache) > 50_000:
                    self._token_cache.popitem(last=False)
            total += cached
        return total

    def thresholds(self, om: ObservationalMemoryOptions, record: ObservationRecord) -> Thresholds:
        """The resolved token points for this record (``share_token_budget`` depends on it)."""
        return resolve(om, observation_tokens_now=record.observation_tokens)

    def reflection_due(self, om: ObservationalMemoryOptions, record: ObservationRecord) -> bool:
        """Whether ``reflect`` has work: over the threshold, or over the buffered-reflection point with
        none buffered yet."""
        t = self.thresholds(om, record)
        if self._reflection_backing_off(record):
            return False
        if record.observation_tokens >= t.observation_tokens:
            return True
        return (
            bool(t.reflection_buffer_at)
            and record.buffered_reflection is None
            and (record.observation_tokens >= t.reflection_buffer_at)
        )

    def _reflection_backing_off(self, record: ObservationRecord) -> bool:
        """Whether reflection waits: after a failure of either stage (an Observer failing means the
        endpoint both usually share is failing; and a stage that fails must not hand every save to the
        other one) until its backoff runs out; never for a turn's deadline (``DeadlineExceeded``)."""
        if (record.last_error or "").startswith("DeadlineExceeded"):
            return False
        return self._in_backoff(record)

    def observer_backing_off(self, record: ObservationRecord) -> bool:
        """Whether saves must not call the Observer for this record now: its last failure was not a
        reflection's nor a turn's deadline (``DeadlineExceeded``: the run went on in the background) and
        its backoff has not run out (``REFLECTION_BACKOFF``)."""
        error = record.last_error or ""
        if not record.failure_count or error.startswith((*REFLECTION_ERRORS, "DeadlineExceeded")):
            return False
        return self._in_backoff(record)

    def backoff_until(self, record: ObservationRecord) -> datetime | None:
        """When the backoff of the record's last failure ends, or ``None`` without a failure: its
        ``retry_at``, or for a record written before that field, ``pending_since`` plus
        ``REFLECTION_BACKOFF × 2^(failures − 1)`` (at most ``MAX_REFLECTION_BACKOFF``)."""
        if not record.failure_count:
            return None
        if record.retry_at is not None:
            return record.retry_at
        if record.pending_since is None:
            return None
        return record.pending_since + _backoff(record.failure_count)

    def _in_backoff(self, record: ObservationRecord) -> bool:
        until = self.backoff_until(record)
        return until is not None and self.clock.now() < until

    def _retry_at(self, failures: int, retry_after: float | None) -> datetime:
        """The end of the backoff of the ``failures``-th failure in a row: the doubling interval, or the
        model's ``Retry-After`` (seconds) when longer (capped at ``MAX_SWEEP_BACKOFF``)."""
        wait = _backoff(failures)
        if retry_after is not None and retry_after > wait.total_seconds():
            # capped as a number first: a huge wait (Retry-After: 1e300) does not fit a timedelta
            wait = timedelta(seconds=min(retry_after, MAX_SWEEP_BACKOFF.total_seconds()))
        return self.clock.now() + wait

    def _sweep_backing_off(self, rec: ObservationRecord, idle_seconds: int) -> bool:
        """A record that keeps failing is retried by the sweep ever less often: ``idle × 2^(failures−1)``,
        at most ``MAX_SWEEP_BACKOFF`` (a model that refuses every request does not cost a run each sweep)."""
        if rec.failure_count <= 1 or rec.pending_since is None:
            return False
        wait = timedelta(seconds=max(idle_seconds, 60)) * 2 ** min(rec.failure_count - 1, 12)
        return bool(self.clock.now() - rec.pending_since < min(wait, MAX_SWEEP_BACKOFF))

    def due(self, om: ObservationalMemoryOptions, rec: ObservationRecord, pending: int) -> str | None:
        """Why a background step is due now (``threshold``, ``buffer``, ``reflect``), or ``None``. After
        a failed observation of any kind (``observer_backing_off``) saves do not observe again until its
        backoff runs out (the sweep and ``context()`` above ``block_after`` still do); after a failed
        reflection they observe but do not reflect (``reflection_due``)."""
        t = self.thresholds(om, rec)
        if self.observer_backing_off(rec):
            return "reflect" if self.reflection_due(om, rec) else None
        if pending >= t.message_tokens:
            return "threshold"
        if should_buffer(pending, rec.last_buffered_at_tokens, t):
            return "buffer"
        if self.reflection_due(om, rec):
            return "reflect"
        return None

    def job(
        self, rec: ObservationRecord, thread_id: str, last_seq: int, reason: str, *, salt: str = ""
    ) -> ObservationJob:
        """The idempotent job for this state: the key hashes the record's owner and includes its
        version and the thread's last ``seq``, so triggers that see the same state share one key (at
        most 80 characters, Step Functions' execution-name limit). ``salt`` separates jobs that must
        run again on an unchanged state (the sweep passes its time bucket)."""
        digest = hashlib.sha256(
            f"{rec.resource_id}\x00{rec.thread_id or ''}\x00{thread_id}".encode()
        ).hexdigest()
        tag = _SAFE_KEY.sub("", reason)[:10] + _SAFE_KEY.sub("", salt)[:12]
        key = f"om-{digest[:20]}-v{rec.version}-s{last_seq}-{tag}"
        return ObservationJob(resource_id=rec.resource_id, thread_id=thread_id, key=key, reason=reason)

    def title_job(self, thread: Thread) -> ObservationJob:
        """The job that titles ``thread``: keyed on the thread's version and the current minute, so a
        title that failed is tried again by a later save, at most once a minute."""
        minute = str(int(self.clock.now().timestamp()) // 60)
        rec = self._fresh(ObservationalMemoryOptions(), thread.resource_id, thread.id)
        return self.job(rec, thread.id, 0, f"title{thread.version}", salt=minute)

    # the background step -------------------------------------------------------------------------

    def step(
        self,
        opts: MemoryOptions,
        resource_id: str,
        thread_id: str,
        *,
        reason: str = "background",
        block: bool = False,
        deadline: float | None = None,
    ) -> ObserveResult:
        """Activate, observe or buffer as the thresholds say (module docstring), committing as it goes.
        ``block`` is context assembly above ``block_after``: activation may overshoot its target
        (``forceMaxActivation``).

        Synchronous observation commits one batch (at most ``message_tokens``, ≤ 30,000 tokens, of the
        oldest unobserved messages) per write, so a long backlog makes progress even when a run is cut
        short. Before a model call the record is marked (``pending_since``) unless it already is: a run
        killed mid-call (a Lambda timeout) leaves the mark, which the sweep and ``context()`` see.

        Args:
            deadline: ``time.monotonic()`` value after which no new model call starts (the step returns
                what it committed so far); the turn's deadline (``memstack.deadline``) counts too.

        Raises:
            InvalidInput: observational memory is disabled or no chat model is configured.
            ObservationFailed: the Observer answered with nothing usable twice (record unchanged).
            Unavailable: the model or the store failed (retrying is safe).
            Conflict: lost the compare-and-set race ``MAX_WRITE_ATTEMPTS`` times in a row.
        """
        om = opts.observational_memory
        if not om.enabled:
            raise InvalidInput("observational memory is disabled", field="observational_memory.enabled")
        activated = observed = buffered = lost = 0
        reflected = False
        for _ in range(MAX_STEP_ROUNDS):
            if lost >= MAX_WRITE_ATTEMPTS:
                raise Conflict(
                    f"observation of thread {thread_id} lost the write race {MAX_WRITE_ATTEMPTS} times; retry"
                )
            v = self._view(om, resource_id, thread_id)
            t = self.thresholds(om, v.record)
            chunks = v.chunks
            idle = reason == "sweep" and self._idle_activation_due(om, v)
            if chunks and (v.pending >= t.message_tokens or idle):
                n = len(chunks) if idle else activation_count(chunks, v.pending, t, force_max=block)
                if n:
                    if self.write(om, v.record, self._activated(om, v, n, t)):
                        activated += n
                        observed += sum(1 for m in v.tail if m.seq <= chunks[n - 1].to_seq)
                    else:
                        lost += 1
                    continue
            sync = v.pending >= t.message_tokens
            if not sync and not (
                should_buffer(v.pending, v.record.last_buffered_at_tokens, t) and v.uncovered
            ):
                return self._result(om, v, activated, observed, buffered)
            if (deadline is not None and time.monotonic() >= deadline) or turn_deadline.expired():
                break  # no time for another model call: what is committed stays
            if v.record.pending_since is None:  # mark the record before the model runs (a lease)
                lost += not self.write(
                    om, v.record, v.record.model_copy(update={"pending_since": self.clock.now()})
                )
                continue
            if sync:
                acted, reflected, missed = self._bound_log(opts, v, t, reflected=reflected)
                if acted:
                    lost += missed
                    continue
                done = self._observe_batch(opts, v, thread_id)
                if done is None:
                    lost += 1
                else:
                    reflected = False  # the log grew: it may be over the threshold again
                    activated, observed = activated + len(chunks), observed + done
                continue
            ok = self._write_buffered(om, v, *self._observe(opts, v, v.uncovered, buffering=True))
            buffered, lost = buffered + ok, lost + (not ok)
        v = self._view(om, resource_id, thread_id)
        return self._result(om, v, activated, observed, buffered)

    def _observe_batch(self, opts: MemoryOptions, v: _View, thread_id: str) -> int | None:
        """Observe the oldest uncovered batch and commit it with the buffered chunks; the count of the
        thread's messages now observed, or ``None`` when the write lost its race."""
        om = opts.observational_memory
        batch = self._prefix(om, v.uncovered)
        outputs, last = self._observe(opts, v, batch, buffering=False)
        if not self._write_observed(om, v, outputs, last, thread_id, batch):
            return None
        return sum(1 for m in v.tail if m.seq <= (last.seq if last else v.covered_seq))

    def _cap(self, om: ObservationalMemoryOptions) -> int:
        """Most transcript tokens of one Observer call: ``message_tokens`` (≤ 30,000); in resource scope
        also ``max_tokens_per_batch``; at least 1,000."""
        cap = min(om.observation.message_tokens, 30_000)
        if om.scope == "resource":
            cap = min(cap, om.observation.max_tokens_per_batch)
        return max(1_000, cap)

    def _prefix(self, om: ObservationalMemoryOptions, messages: list[Message]) -> list[Message]:
        """The oldest messages whose tokens fit one Observer call (at least one: a huge message is
        observed in parts, then committed whole)."""
        cap = self._cap(om)
        out: list[Message] = []
        used = 0
        for m in messages:
            tokens = self.count([m])
            if out and used + tokens > cap:
                break
            out.append(m)
            used += tokens
        return out

    def _result(
        self, om: ObservationalMemoryOptions, v: _View, activated: int, observed: int, buffered: int
    ) -> ObserveResult:
        return ObserveResult(
            should_reflect=self.reflection_due(om, v.record),
            observed_messages=observed,
            activated_chunks=activated,
            buffered_chunks=buffered,
            observation_tokens=v.record.observation_tokens,
            pending_tokens=v.pending,
        )

    def _idle_activation_due(self, om: ObservationalMemoryOptions, v: _View) -> bool:
        idle = om.activate_after_idle_ms
        if idle is None or not v.tail or not v.chunks:
            return False
        ms = 300_000 if idle == "auto" else idle
        return self.clock.now() - v.tail[-1].created_at >= timedelta(milliseconds=ms)

    def write(
        self, om: ObservationalMemoryOptions | None, base: ObservationRecord, new: ObservationRecord
    ) -> bool:
        """Compare-and-set ``new`` over ``base``: the one way the engine and the layer's lifecycle
        rewrites write a record. ``new`` is first held to what a record may hold (``capacity.fit``): past
        its hard point while reflection fails, or over ``MAX_OBSERVATION_RECORD_BYTES``, the log (then the
        buffered reflection and chunk texts) is cut in this write, so no write fails with
        ``PayloadTooLarge`` for the log's size. The model usage metered for the record since its last
        write goes into ``new`` (``observation.usage``); a write that fails puts it back.

        Args:
            om: the options the record is written under; ``None`` for a rewrite that only removes content
                and does not know them (the log's token bound is then not applied, the byte cap is).
            base: the record as read (its ``version`` is the compare-and-set's expectation; a fresh
                record, version 0, creates one).
            new: the record to store.

        Returns:
            ``False`` when someone else wrote first.

        Raises:
            NotFound: thread scope and the thread is gone. Unavailable: store failure.
        """
        key = (new.resource_id, new.thread_id)
        pending = self.usage.take(key)
        if pending is not None:
            new = new.model_copy(update={"usage": new.usage.plus(pending)})
        try:
            self.store.put_observation_record(self._fit(om, new), expected_version=base.version)
        except Conflict:
            if pending is not None:
                self.usage.restore(key, pending)
            return False
        except BaseException:
            if pending is not None:
                self.usage.restore(key, pending)
            raise
        return True

    def _fit(self, om: ObservationalMemoryOptions | None, rec: ObservationRecord) -> ObservationRecord:
        """``capacity.fit`` with this record's bounds (``om``'s reflection threshold and hard point)."""
        t = self.thresholds(om if om is not None else ObservationalMemoryOptions(), rec)
        return fit(
            rec,
            tokenizer=self.tokenizer,
            cut_budget=self._cut_budget(t),
            hard_point=t.reflection_block_after if om is not None else None,
            reflection_failing=self._failed_reflecting(rec),
        )

    @staticmethod
    def _cut_budget(t: Thresholds) -> int:
        return max(MIN_CUT_TOKENS, int(t.observation_tokens * TRUNCATE_TO_SHARE))

    def _thread_gone(self, rec: ObservationRecord, thread_id: str) -> bool:
        """Whether a resource-scoped run lost its write because its thread was deleted. Deleting a thread
        always rewrites the resource's record (``observation.lifecycle``), so a run that read the record
        before the delete fails its compare-and-set and asks here before trying again. Thread-scoped
        records go with their thread (the store refuses a record for a missing thread)."""
        return rec.scope == "resource" and self.store.get_thread(rec.resource_id, thread_id) is None

    def _health(
        self, om: ObservationalMemoryOptions, rec: ObservationRecord, *, chunks_left: bool
    ) -> dict[str, Any]:
        """The failure and due-time fields after a successful observation write: a recorded observation
        failure is healed; a failing reflection keeps its record (and backoff) until a reflection
        succeeds; with ``activate_after_idle`` and chunks left the record stays due for the sweep."""
        if self._failed_reflecting(rec):
            return {}
        idle = om.activate_after_idle is not None and chunks_left
        return {
            "failure_count": 0,
            "last_error": None,
            "retry_at": None,
            "pending_since": (rec.pending_since or self.clock.now()) if idle else None,
        }

    def _activated(
        self, om: ObservationalMemoryOptions, v: _View, n: int, t: Thresholds
    ) -> ObservationRecord:
        rec = v.record
        chunks = v.chunks
        taken = chunks[:n]
        text = rec.active_observations
        for chunk in taken:
            text = _append(text, chunk.observations, chunk.created_at)
        cursor = {**rec.cursor, v.thread_id: taken[-1].to_seq}
        pending = max(0, v.pending - sum(c.message_tokens for c in taken))
        last = taken[-1]
        left = [c for c in rec.buffered_chunks if c not in taken]
        return rec.model_copy(
            update={
                "active_observations": text,
                "cursor": cursor,
                "buffered_chunks": tuple(left),
                "observation_tokens": self.tokenizer.count(text),
                "pending_message_tokens": pending,
                "total_tokens_observed": rec.total_tokens_observed + sum(c.message_tokens for c in taken),
                "last_buffered_at_tokens": pending,
                "current_task": last.current_task,
                "suggested_response": last.suggested_response,
                "thread_title": last.thread_title or rec.thread_title,
                **self._health(om, rec, chunks_left=bool(left)),
            }
        )

    def _write_observed(
        self,
        om: ObservationalMemoryOptions,
        v: _View,
        outputs: list[ObserverOutput],
        last: Message | None,
        thread_id: str,
        batch: list[Message],
    ) -> bool:
        """Commit a synchronous observation of ``batch`` (the oldest uncovered messages): every buffered
        chunk of the thread, then the new text; the cursor moves to the batch's last message."""
        for _ in range(MAX_WRITE_ATTEMPTS):
            rec = v.record
            chunks = v.chunks
            text = rec.active_observations
            now = self.clock.now()
            for chunk in chunks:
                text = _append(text, chunk.observations, chunk.created_at)
            new_text = new_lines_only(
                self._own_lines(om, rec, thread_id, text),
                "\n\n".join(o.observations for o in outputs if o.observations.strip()),
            )
            if new_text:
                text = _append(text, self._wrap(om, rec, thread_id, new_text, batch), now)
            final = outputs[-1] if outputs else None
            to_seq = max(last.seq if last is not None else 0, v.covered_seq)
            done = self.count([m for m in v.tail if m.seq <= to_seq])
            left = max(0, v.pending - done)
            update: dict[str, Any] = {
                "active_observations": text,
                "cursor": {**rec.cursor, thread_id: to_seq},
                "buffered_chunks": tuple(c for c in rec.buffered_chunks if c.thread_id != thread_id),
                "observation_tokens": self.tokenizer.count(text),
                "pending_message_tokens": left,
                "total_tokens_observed": rec.total_tokens_observed + done,
                "last_buffered_at_tokens": left,
                **self._health(om, rec, chunks_left=False),
            }
            if final is not None:
                update.update(
                    current_task=final.current_task,
                    suggested_response=final.suggested_response,
                    thread_title=final.thread_title or rec.thread_title,
                )
            if self.write(om, rec, rec.model_copy(update=update)):
                self._apply_side_outputs(om, rec, thread_id, outputs, batch)
                return True
            if self._thread_gone(rec, thread_id):
                return False  # deleted meanwhile: its content must not come back
            fresh = self._view(om, rec.resource_id, thread_id)
            if fresh.record.observed_seq(thread_id) != rec.observed_seq(thread_id) or [
                c.id for c in fresh.chunks
            ] != [c.id for c in chunks]:
                return False  # someone else observed these messages: drop ours, never observe twice
            if _lost_any(batch, fresh.tail):
                return False  # computed from a message deleted meanwhile: observed again without it
            v = _View(fresh.record, thread_id, fresh.tail, fresh.pending)
        return False

    def _write_buffered(
        self, om: ObservationalMemoryOptions, v: _View, outputs: list[ObserverOutput], last: Message | None
    ) -> bool:
        """Append a buffered chunk right after the covered range (the invariant of spec §2.9.2)."""
        uncovered = v.uncovered
        if last is None or not uncovered:
            return False
        covered = [m for m in uncovered if m.seq <= last.seq]
        known = "\n".join([v.record.active_observations, *(c.observations for c in v.chunks)])
        text = new_lines_only(
            self._own_lines(om, v.record, v.thread_id, known),
            "\n\n".join(o.observations for o in outputs if o.observations.strip()),
        )
        text = self._wrap(om, v.record, v.thread_id, text, covered)
        final = outputs[-1] if outputs else None
        message_tokens = self.count(covered)
        chunk = BufferedChunk(
            id=f"{uncovered[0].seq}-{last.seq}",
            thread_id=v.thread_id,
            from_seq=uncovered[0].seq,
            to_seq=last.seq,
            observations=text,
            token_count=self.tokenizer.count(text),
            message_tokens=message_tokens,
            created_at=self.clock.now(),
            current_task=final.current_task if final else None,
            suggested_response=final.suggested_response if final else None,
            thread_title=final.thread_title if final else None,
        )
        for _ in range(MAX_WRITE_ATTEMPTS):
            rec = v.record
            if len(rec.buffered_chunks) >= MAX_BUFFERED_CHUNKS:
                raise Unavailable(
                    f"thread {v.thread_id} has {MAX_BUFFERED_CHUNKS} buffered chunks waiting; activation is overdue"
                )
            new = rec.model_copy(
                update={
                    "buffered_chunks": (*rec.buffered_chunks, chunk),
                    "last_buffered_at_tokens": v.pending,
                    "pending_message_tokens": v.pending,
                    **self._health(om, rec, chunks_left=True),
                }
            )
            if self.write(om, rec, new):
                return True
            if self._thread_gone(rec, v.thread_id):
                return False  # deleted meanwhile: its content must not come back
            fresh = self._view(om, rec.resource_id, v.thread_id)
            if fresh.covered_seq != v.covered_seq:
                return False  # another run covered these messages first
            if _lost_any(covered, fresh.tail):
                return False  # computed from a message deleted meanwhile: buffered again without it
            v = _View(fresh.record, v.thread_id, fresh.tail, fresh.pending)
        return False

    def _own_lines(
        self, om: ObservationalMemoryOptions, rec: ObservationRecord, thread_id: str, text: str
    ) -> str:
        """The part of the log a new observation of ``thread_id`` is checked against for duplicates: the
        whole log in thread scope, the thread's own sections in resource scope (the same words about
        another thread are another fact)."""
        if rec.scope != "resource":
            return text
        label = re.escape(html.escape(thread_label(om, thread_id), quote=True))
        return "\n".join(re.findall(rf'<thread id="{label}">\n(.*?)\n</thread>', text, re.S))

    def _wrap(
        self,
        om: ObservationalMemoryOptions,
        rec: ObservationRecord,
        thread_id: str,
        text: str,
        messages: Sequence[Message],
    ) -> str:
        """Retrieval groups and resource-scope thread sections around newly observed text (spec §2.9.4
        step 7, §2.9.8); nothing around nothing (an Observer that found nothing new)."""
        if not text.strip():
            return ""
        if om.retrieval.enabled and messages:
            first, last = messages[0].id, messages[-1].id
            anchor = hashlib.sha256(f"{thread_id}:{first}:{last}".encode()).hexdigest()[:12]
            span = html.escape(f"{first}:{last}", quote=True)
            text = f'<observation-group id="{anchor}" range="{span}">\n{text}\n</observation-group>'
        if rec.scope == "resource":
            # the section's own tags are the only ones in it: a model that writes "</thread>" (quoting
            # the user, or told to by them) must not end the section early, or a delete would miss the rest
            text = _THREAD_TAG.sub(lambda m: html.escape(m.group(0)), text)
            text = f'<thread id="{html.escape(thread_label(om, thread_id), quote=True)}">\n{text}\n</thread>'
        return text

    def _reflection_group(
        self, om: ObservationalMemoryOptions, rec: ObservationRecord, source: str, text: str
    ) -> str:
        """With retrieval on (thread scope), a reflection keeps pointing at its messages: it is wrapped as
        one ``kind="reflection"`` group whose range runs from the first reflected group's first message to
        the last one's last message (spec §2.9.8 "reflection reconciles and merges ranges")."""
        from memstack.observation.parsing import strip_group_tags

        text = strip_group_tags(text).strip()
        ranges = _RANGE_RE.findall(source)
        if not om.retrieval.enabled or rec.scope != "thread" or not ranges:
            return text
        start, end = split_range(ranges[0])[0], split_range(ranges[-1])[1]
        anchor = hashlib.sha256(f"reflection:{start}:{end}".encode()).hexdigest()[:12]
        span = html.escape(f"{start}:{end}", quote=True)
        head = f'<observation-group id="{anchor}" kind="reflection" range="{span}">'
        return f"{head}\n{text}\n</observation-group>"

    def _apply_side_outputs(
        self,
        om: ObservationalMemoryOptions,
        rec: ObservationRecord,
        thread_id: str,
        outputs: list[ObserverOutput],
        batch: Sequence[Message],
    ) -> None:
        """Apply the Observer's ``<working-memory>`` (``manage_working_memory``), checked first: nothing is
        written when the batch gave no new observation, nor when a markdown rewrite drops or changes a
        filled field the observed messages did not touch (``working_memory.rewrite``); JSON documents
        are merged by the writer, so a key the Observer left out stays."""
        wm = next((o.working_memory for o in reversed(outputs) if o.working_memory), None)
        if not wm or not om.observation.manage_working_memory or self._write_working_memory is None:
            return
        options = MemoryOptions(observational_memory=om)
        refused = self._working_memory_refusal(options, rec, thread_id, outputs, wm, batch)
        if refused is not None:
            logger.info(
                "observer working-memory rewrite not applied (%s) for thread %s",
                refused,
                thread_id,
                extra={"thread_id": thread_id, "reason": refused},
            )
            return
        try:
            self._write_working_memory(options, rec.resource_id, thread_id, wm)
        except MemstackError as exc:
            logger.warning(
                "observer working-memory update refused (%s) for thread %s",
                exc.code,
                thread_id,
                extra={"thread_id": thread_id, "error": exc.code},
            )

    def _working_memory_refusal(
        self,
        options: MemoryOptions,
        rec: ObservationRecord,
        thread_id: str,
        outputs: list[ObserverOutput],
        wm: str,
        batch: Sequence[Message],
    ) -> str | None:
        """Why the Observer's document must not be written (a short reason, no content), or ``None``."""
        from memstack.working_memory.rewrite import untouched_changes

        if not any(o.observations.strip() for o in outputs):
            return "no new information"
        current = (
            self._read_working_memory(options, rec.resource_id, thread_id)
            if self._read_working_memory is not None
            else None
        )
        if not current or not current.strip() or current.lstrip().startswith("{"):
            return None  # nothing to lose, or JSON (merged)
        dropped = untouched_changes(current, wm, "\n".join(m.text for m in batch))
        return f"would drop or change {len(dropped)} untouched field(s)" if dropped else None

    # model calls ---------------------------------------------------------------------------------

    def _chat(self, om: ObservationalMemoryOptions | None = None, agent: str = "") -> ChatModel:
        """The configured chat model, or — when the options name another model for this agent
        (``model``, ``observation.model``, ``reflection.model``; spec §2.9.1 resolution) and the adapter
        can switch models (``with_model``) — the same endpoint with that model."""
        chat = self.chat_model
        if chat is None:
            raise missing_chat_model()
        current = str(getattr(chat, "model", chat.model_id))
        if om is None or agent not in ("observer", "reflector"):
            return chat
        observer, reflector = om.models(current)
        wanted = observer if agent == "observer" else reflector
        switch = getattr(chat, "with_model", None)
        if wanted == current or switch is None:
            return chat
        key = (id(chat), wanted)
        model = self._models.get(key)
        if model is None:
            model = self._models[key] = switch(wanted)
        return model

    def _observe(
        self, opts: MemoryOptions, v: _View, messages: list[Message], *, buffering: bool
    ) -> tuple[list[ObserverOutput], Message | None]:
        """Run the Observer over ``messages`` in batches under ``message_tokens`` (a huge message is
        split into parts), each batch seeing the observations made so far.

        Returns:
            The parsed outputs and the last message observed (``None`` when there was nothing to observe).
        """
        from memstack.observation import prompts

        om = opts.observational_memory
        if not messages:
            return [], None
        chat = MeteredChat(
            self._chat(om, "observer"), self.usage, (v.record.resource_id, v.record.thread_id), "observer"
        )
        cap = self._cap(om)
        batches = transcript_batches(messages, tokenizer=self.tokenizer, max_tokens=cap)
        previous = "\n\n".join([v.record.active_observations, *(c.observations for c in v.chunks)]).strip()
        hints = v.chunks[-1] if v.chunks else v.record
        outputs: list[ObserverOutput] = []
        system = prompts.observer_system_prompt(
            multi_thread=False,
            instruction=om.observation.instruction,
            thread_title=om.observation.thread_title,
            current_task=om.observation.continuation_hints.current_task and not buffering,
            suggested_response=om.observation.continuation_hints.suggested_response and not buffering,
            manage_working_memory=om.observation.manage_working_memory,
        )
        current_wm = (
            self._read_working_memory(opts, v.record.resource_id, v.thread_id)
            if om.observation.manage_working_memory and self._read_working_memory is not None
            else None
        )
        for batch in batches:
            if not batch.text.strip():
                continue  # nothing to show (e.g. only reasoning): observed without a model call
            shown, truncated = self._previous(om, previous)
            task = prompts.observer_task_prompt(
                previous=shown,
                truncated=truncated,
                prior_current_task=hints.current_task,
                prior_suggested_response=hints.suggested_response,
                prior_thread_title=hints.thread_title,
                buffering=buffering,
                working_memory=current_wm,
            )
            # instructions in the system role; the transcript alone as data, in a delimited block
            request = [
                {"role": "system", "content": f"{system}\n\n{task}"},
                {"role": "user", "content": prompts.observer_history_message(batch.text)},
            ]
            instructions = prompts.observer_instructions(system, buffering=buffering)
            parsed = self._bounded(
                om, v.record, self._call_observer(chat, om, request, v.thread_id, instructions)
            )
            outputs.append(parsed)
            if parsed.observations.strip():
                previous = f"{previous}\n\n{parsed.observations}".strip()
        logger.info(
            "observed messages",
            extra={
                "thread_id": v.thread_id,
                "messages": len(messages),
                "batches": len(batches),
                "buffering": buffering,
            },
        )
        return outputs, messages[-1]

    def _bounded(
        self, om: ObservationalMemoryOptions, rec: ObservationRecord, parsed: ObserverOutput
    ) -> ObserverOutput:
        """One Observer answer kept within the reflection threshold (``observation_tokens``) and
        ``TRUNCATE_AT_BYTES``: a larger answer is cut to ``TRUNCATE_TO_SHARE`` of the threshold, 🔴 lines
        first (``_cut``), so no single answer can fill the record."""
        text = parsed.observations
        bound = self.thresholds(om, rec).observation_tokens
        if len(text.encode("utf-8")) <= TRUNCATE_AT_BYTES and self.tokenizer.count(text) <= bound:
            return parsed
        cut = self._cut(om, rec, text)
        logger.warning(
            "observer answer over its bound was cut",
            extra={"thread_id": rec.thread_id, "chars_before": len(text), "chars_after": len(cut)},
        )
        return replace(parsed, observations=cut)

    def _previous(self, om: ObservationalMemoryOptions, previous: str) -> tuple[str, bool]:
        from memstack.observation.parsing import truncate_observations

        budget = om.observation.previous_observer_tokens
        if budget is False:
            return previous, False
        return truncate_observations(previous, int(budget), self.tokenizer)

    def _call_observer(
        self,
        chat: ChatModel,
        om: ObservationalMemoryOptions,
        request: list[dict[str, Any]],
        thread_id: str,
        instructions: str,
    ) -> ObserverOutput:
        """One Observer call, retried once on degenerate or unusable output (spec §2.9.5).

        An answer that says, validly, that there is nothing new (an empty ``<observations>`` block, or
        only a "no new observations" line: ``parsing.says_nothing_new``) is a result, not a failure: its
        batch is committed with no new text and the cursor moves past it, so small talk is not sent to
        the model again on every save. An empty or degenerate answer is a failure and moves nothing, and
        so is an answer with nothing left once the lines it took from ``instructions`` (the prompt's
        examples and templates, ``parsing.without_prompt_text``) are removed: a model that repeats its
        prompt must not commit the example as facts about this user. So is an answer whose tags are too
        broken to read every observation line inside them (``parsing.unread_lines``): committing it would
        move the cursor past messages whose observations were silently dropped.
        """
        from memstack.observation.parsing import (
            is_degenerate,
            parse_observer_output,
            says_nothing_new,
            unread_lines,
            without_prompt_text,
        )

        settings = om.observation.model_settings
        for attempt in (1, 2):
            text = _complete(chat, request, settings.max_output_tokens, settings.temperature, "Observer")
            if is_degenerate(text) or unread_lines(text):
                parsed = None
            elif says_nothing_new(text):
                return replace(parse_observer_output(text), observations="")
            else:
                parsed = without_prompt_text(parse_observer_output(text), instructions)
            if parsed is not None and parsed.observations.strip():
                return _unforged(parsed)
            logger.warning(
                "observer output unusable (attempt %d) for thread %s",
                attempt,
                thread_id,
                extra={"thread_id": thread_id, "attempt": attempt, "chars": len(text)},
            )
        raise ObservationFailed(
            f"the Observer's answer for thread {thread_id} was empty or degenerate twice; nothing was committed"
        )

    # reflection ----------------------------------------------------------------------------------

    def reflect(self, opts: MemoryOptions, resource_id: str, thread_id: str) -> ReflectResult:
        """Reflect if due (``reflection_due``): activate a buffered reflection at the threshold, reflect
        synchronously at the threshold without one, or buffer a reflection at the buffered-reflection
        point (spec §2.9.4 step 8). The compression ladder starts at level 1 and goes to 4, retried until
        the result is under ``observation_tokens``; the smallest good attempt is committed. An empty or
        degenerate attempt is never committed.

        Raises:
            InvalidInput: disabled or no chat model. ObservationFailed: no attempt was usable (the old
            observations stay). Unavailable: model or store failure. Conflict: lost every write race.
        """
        om = opts.observational_memory
        if not om.enabled:
            raise InvalidInput("observational memory is disabled", field="observational_memory.enabled")
        for _ in range(MAX_WRITE_ATTEMPTS):
            rec = self.get_record(om, resource_id, thread_id)
            truncated = self._stuck_cut(om, rec) if rec is not None else None
            if rec is not None and truncated is not None:
                if self.write(om, rec, truncated):
                    return replace(self._reflected(rec, truncated, 0), truncated=True)
                continue
            if rec is None or not self.reflection_due(om, rec):
                return ReflectResult(
                    tokens_before=rec.observation_tokens if rec else 0,
                    tokens_after=rec.observation_tokens if rec else 0,
                    generation_count=rec.generation_count if rec else 0,
                )
            t = self.thresholds(om, rec)
            at_threshold = rec.observation_tokens >= t.observation_tokens
            if at_threshold and rec.buffered_reflection is not None:
                swapped = self._swap_buffered(rec)
                if swapped.observation_tokens < t.observation_tokens:
                    if self.write(om, rec, swapped):
                        return self._reflected(rec, swapped, 0)
                    continue
            lines = rec.active_observations.splitlines()
            try:
                text, level = self._run_reflector(opts, rec, thread_id, t)
            except ReflectionFailed as exc:
                truncated = self._cut_after_failure(om, rec, exc, at_threshold=at_threshold)
                if self.write(om, rec, truncated):
                    return replace(self._reflected(rec, truncated, 0), truncated=True)
                continue
            text = self._reflection_group(om, rec, rec.active_observations, text)
            if at_threshold:
                new = self._committed(rec, text)
            else:
                new = rec.model_copy(
                    update={
                        "buffered_reflection": text,
                        "buffered_reflection_tokens": self.tokenizer.count(text),
                        "reflected_line_count": len(lines),
                    }
                )
            if self.write(om, rec, new):
                return self._reflected(rec, new, level, buffered=not at_threshold)
            latest = self.get_record(om, resource_id, thread_id)
            if (
                latest is not None
                and at_threshold
                and latest.active_observations.startswith(rec.active_observations)
            ):
                # observations were appended meanwhile: keep them after the reflection
                added = latest.active_observations[len(rec.active_observations) :].strip()
                merged = self._committed(latest, f"{text}\n\n{added}" if added else text)
                if self.write(om, latest, merged):
                    return self._reflected(rec, merged, level)
        raise Conflict(
            f"reflection of thread {thread_id} lost the write race {MAX_WRITE_ATTEMPTS} times; retry"
        )

    def _bound_log(
        self, opts: MemoryOptions, v: _View, t: Thresholds, *, reflected: bool
    ) -> tuple[bool, bool, int]:
        """Before a synchronous batch: when the log is over the reflection threshold, reflect first (once
        per batch), so a backlog observed in many batches never grows the record towards its byte cap;
        when that reflection could not bring a log past its hard point down, cut it (no model call).

        Returns:
            ``(acted, reflected, lost writes)``: whether the step must read the record again before
            observing, whether a reflection was tried for this batch, and 1 if the cut lost its race.
        """
        om = opts.observational_memory
        if v.record.observation_tokens < t.observation_tokens:
            return False, reflected, 0
        if not reflected:
            self._reflect_before_observing(opts, v.record.resource_id, v.thread_id)
            return True, True, 0
        if not self._past_hard_point(om, v.record):
            return False, reflected, 0
        return True, reflected, 0 if self.write(om, v.record, self._truncated(om, v.record)) else 1

    def _reflect_before_observing(self, opts: MemoryOptions, resource_id: str, thread_id: str) -> None:
        """Reflect now (the step found the log over its threshold). A failed reflection of any kind (an
        unusable answer, the Reflector's endpoint failing or throttling) is recorded as
        ``ReflectionFailed`` (its backoff starts) and the step goes on observing: ``reflect`` has already
        truncated the log if it was past the point where it must not grow, and the step cuts it there
        otherwise (``_bound_log``)."""
        try:
            self.reflect(opts, resource_id, thread_id)
        except NotFound:
            raise
        except MemstackError as exc:
            failed = reflection_failure(exc)
            logger.warning(
                "reflection before observing failed for thread %s (%s)",
                thread_id,
                type(exc).__name__,
                extra={"thread_id": thread_id, "error": exc.code},
            )
            self.record_failure(
                opts, resource_id, thread_id, failure_text(failed), retry_after=failed.retry_after
            )

    def _cut_after_failure(
        self,
        om: ObservationalMemoryOptions,
        rec: ObservationRecord,
        exc: ReflectionFailed,
        *,
        at_threshold: bool,
    ) -> ObservationRecord:
        """The record truncated after the failed reflection ``exc`` when ``_needs_truncation`` says the
        log must not stay as it is; otherwise ``exc`` is raised again (the old log stays)."""
        if not (at_threshold and self._needs_truncation(om, rec)):
            raise exc
        truncated = self._truncated(om, rec, error=f"{type(exc).__name__}: {exc.message}")
        logger.warning(
            "reflection failed; observations truncated to their high-priority lines and tail",
            extra={
                "thread_id": rec.thread_id,
                "tokens_before": rec.observation_tokens,
                "tokens_after": truncated.observation_tokens,
            },
        )
        return truncated

    def _stuck_cut(self, om: ObservationalMemoryOptions, rec: ObservationRecord) -> ObservationRecord | None:
        """The record truncated (``_truncated``) when the Reflector keeps failing — backing off after
        ``TRUNCATE_AFTER_FAILURES`` failures — and the log is past its hard point, so it must not grow
        further; ``None`` otherwise."""
        stuck = self._reflection_backing_off(rec) and rec.failure_count >= TRUNCATE_AFTER_FAILURES
        return self._truncated(om, rec) if stuck and self._past_hard_point(om, rec) else None

    def _past_hard_point(self, om: ObservationalMemoryOptions, rec: ObservationRecord) -> bool:
        """Whether the log is over the reflection's ``block_after`` (``context()`` would carry it whole)
        or past ``TRUNCATE_AT_BYTES`` (the record would soon refuse writes)."""
        if len(rec.active_observations.encode("utf-8")) > TRUNCATE_AT_BYTES:
            return True
        return rec.observation_tokens > self.thresholds(om, rec).reflection_block_after

    def _needs_truncation(self, om: ObservationalMemoryOptions, rec: ObservationRecord) -> bool:
        """Whether a log the Reflector just failed to shrink must be cut now: reflection has failed
        ``TRUNCATE_AFTER_FAILURES`` times in a row (this one included) and the log is past its hard
        point, or the log is past ``TRUNCATE_AT_BYTES``."""
        if len(rec.active_observations.encode("utf-8")) > TRUNCATE_AT_BYTES:
            return True
        failures = rec.failure_count if self._failed_reflecting(rec) else 0
        return self._past_hard_point(om, rec) and failures + 1 >= TRUNCATE_AFTER_FAILURES

    @staticmethod
    def _failed_reflecting(rec: ObservationRecord) -> bool:
        return bool(rec.failure_count) and (rec.last_error or "").startswith(REFLECTION_ERRORS)

    def _truncated(
        self, om: ObservationalMemoryOptions, rec: ObservationRecord, *, error: str | None = None
    ) -> ObservationRecord:
        """The record with its log cut (``_cut``): the 🔴 lines first (up to half the budget), then the
        newest lines. Deterministic: no model is asked. With ``error`` (the
        reflection that failed) the failure is recorded on the record, so its backoff runs and the
        sweep reflects properly later."""
        text = self._cut(om, rec, rec.active_observations)
        done = self._committed(rec, text)
        if error is None:
            return done.model_copy(
                update={
                    "failure_count": rec.failure_count,
                    "last_error": rec.last_error,
                    "pending_since": rec.pending_since,
                    "retry_at": rec.retry_at,
                }
            )
        return done.model_copy(
            update={
                "failure_count": rec.failure_count + 1,
                "last_error": f"{error} (the log was truncated instead)"[:MAX_ERROR_CHARS],
                "pending_since": self.clock.now(),
                "retry_at": self._retry_at(rec.failure_count + 1, None),
            }
        )

    def _cut(self, om: ObservationalMemoryOptions, rec: ObservationRecord, text: str) -> str:
        """``text`` cut to ``TRUNCATE_TO_SHARE`` of the reflection threshold and under
        ``TRUNCATE_AT_BYTES``, 🔴 lines first (``capacity.cut_log``)."""
        return cut_log(text, self._cut_budget(self.thresholds(om, rec)), self.tokenizer)

    def _reflected(
        self, before: ObservationRecord, after: ObservationRecord, level: int, *, buffered: bool = False
    ) -> ReflectResult:
        logger.info(
            "reflected observations",
            extra={
                "resource_id": before.resource_id,
                "thread_id": before.thread_id,
                "tokens_before": before.observation_tokens,
                "tokens_after": after.observation_tokens,
                "level": level,
                "buffered": buffered,
            },
        )
        return ReflectResult(
            reflected=True,
            level=level,
            tokens_before=before.observation_tokens,
            tokens_after=after.buffered_reflection_tokens if buffered else after.observation_tokens,
            generation_count=after.generation_count,
            buffered=buffered,
        )

    def _committed(self, rec: ObservationRecord, text: str) -> ObservationRecord:
        """``rec`` with ``text`` as its active observations, produced by a reflection. In resource scope the
        threads observed so far are noted as merged into it (``reflected_threads``)."""
        merged = rec.reflected_threads
        if rec.scope == "resource":
            merged = tuple(sorted({*merged, *(t for t, seq in rec.cursor.items() if seq > 0)}))
        return rec.model_copy(
            update={
                "reflected_threads": merged,
                "active_observations": text,
                "observation_tokens": self.tokenizer.count(text),
                "origin_type": "reflection",
                "generation_count": rec.generation_count + 1,
                "buffered_reflection": None,
                "buffered_reflection_tokens": 0,
                "reflected_line_count": 0,
                "failure_count": 0,
                "last_error": None,
                "pending_since": None,
                "retry_at": None,
            }
        )

    def _swap_buffered(self, rec: ObservationRecord) -> ObservationRecord:
        """The buffered reflection replaces the lines it covered; lines appended since are kept."""
        assert rec.buffered_reflection is not None
        kept = "\n".join(rec.active_observations.splitlines()[rec.reflected_line_count :]).strip()
        text = f"{rec.buffered_reflection}\n\n{kept}" if kept else rec.buffered_reflection
        return self._committed(rec, text)

    def _run_reflector(
        self, opts: MemoryOptions, rec: ObservationRecord, thread_id: str, t: Thresholds
    ) -> tuple[str, int]:
        from memstack.observation import prompts
        from memstack.observation.parsing import parse_reflector_output, without_prompt_text

        om = opts.observational_memory
        chat = MeteredChat(
            self._chat(om, "reflector"), self.usage, (rec.resource_id, rec.thread_id), "reflector"
        )
        system = prompts.reflector_system_prompt(
            multi_thread=rec.scope == "resource",
            instruction=om.reflection.instruction,
            current_task=om.reflection.continuation_hints.current_task,
            suggested_response=om.reflection.continuation_hints.suggested_response,
        )
        settings = om.reflection.model_settings
        best: tuple[int, str, int] | None = None
        failures: list[str] = []
        for level in range(1, prompts.MAX_COMPRESSION_LEVEL + 1):
            if turn_deadline.expired():
                break  # the turn cannot wait for another level; the background reflects later
            request = [
                {"role": "system", "content": system},
                {
                    "role": "user",
                    "content": prompts.reflector_task_prompt(rec.active_observations, level=level),
                },
            ]
            try:
                raw = _complete(chat, request, settings.max_output_tokens, settings.temperature, "Reflector")
            except ReflectorUnavailable:
                raise
            except Unavailable as exc:
                raise ReflectorUnavailable(exc.message, retry_after=exc.retry_after) from exc
            # the prompt's examples are not a reflection; the observations it carries may be repeated
            instructions = f"{system}\n\n{prompts.reflector_task_prompt('', level=level)}"
            text = without_prompt_text(parse_reflector_output(raw), instructions).observations
            text = model_text(text, thread_sections=rec.scope == "resource").strip()
            problem = reflection_problem(rec.active_observations, raw, text, self.tokenizer)
            if problem is not None:
                failures.append(problem)
                logger.warning(
                    "reflector output refused at level %d for thread %s: %s",
                    level,
                    thread_id,
                    problem,
                    extra={"thread_id": thread_id, "level": level, "chars": len(raw), "problem": problem},
                )
                continue
            tokens = self.tokenizer.count(text)
            if best is None or tokens < best[0]:
                best = (tokens, text, level)
            if tokens < t.observation_tokens:
                break
        if best is None and turn_deadline.expired():
            raise Unavailable(f"reflection of thread {thread_id} passed the turn's deadline; retry later")
        if best is None:
            raise ReflectionFailed(
                f"no Reflector answer for thread {thread_id} could replace the observations "
                f"({len(failures)} attempts: {'; '.join(dict.fromkeys(failures))}); the observations are unchanged"
            )
        return best[1], best[2]

    # failures and the sweep ----------------------------------------------------------------------

    def record_failure(
        self,
        opts: MemoryOptions,
        resource_id: str,
        thread_id: str,
        error: str,
        *,
        retry_after: float | None = None,
    ) -> None:
        """Note a failed background run on the record (``failure_count``, ``last_error``, ``retry_at``:
        the end of its backoff, ``REFLECTION_BACKOFF``) and mark it due, so the sweep retries it (the Step
        Functions Catch path). The record's ``pending_message_tokens`` is recounted (the unobserved
        messages of ``thread_id``), so a record that cannot observe still shows what waits. Touches the
        observations only as every write does (``write``): a failed reflection of a log past its hard
        point cuts it back there.

        Args:
            error: ``"<ErrorClass>: <message>"`` (``failure_text``); ``ReflectionFailed…`` marks a
                failed reflection, anything else a failed observation.
            retry_after: seconds the model asked to wait (``Unavailable.retry_after``): the backoff lasts
                at least that long.

        Raises:
            NotFound: thread scope and the thread is gone (nothing to retry). Unavailable: store failure.
        """
        om = opts.observational_memory
        for _ in range(MAX_WRITE_ATTEMPTS):
            rec, _, pending = self.view(om, resource_id, thread_id)
            new = rec.model_copy(
                update={
                    "failure_count": rec.failure_count + 1,
                    "last_error": error[:MAX_ERROR_CHARS],
                    "pending_since": self.clock.now(),  # the last failure: backoffs and the sweep count from it
                    "retry_at": self._retry_at(rec.failure_count + 1, retry_after),
                    "pending_message_tokens": pending,
                }
            )
            if self.write(om, rec, new):
                return
        raise Conflict(f"recording the failure of thread {thread_id} lost the write race; retry")

    def forget_messages(self, resource_id: str, messages: Sequence[Message]) -> None:
        """After ``messages`` were deleted from the store: rewrite every observation record that may be
        observing them — each thread's own record and the resource's — so a run that read a record
        before the delete loses its compare-and-set; its retry then finds a message of its batch gone
        and drops its result (``_write_observed``, ``_write_buffered``): the rest is observed again.
        A run that reads after the store delete never sees the messages. Buffered chunks that cover a
        deleted message are dropped with every later chunk of their thread (chunks must follow the
        cursor without a gap), and buffering starts over for that thread.

        Observations already active stay: they are summaries, not the messages.

        Raises:
            Conflict: lost the write race ``MAX_WRITE_ATTEMPTS`` times on one record (delete again).
            Unavailable: store failure.
        """
        gone: dict[str, set[int]] = {}
        for m in messages:
            gone.setdefault(m.thread_id, set()).add(m.seq)
        owners: list[str | None] = [*gone, None]
        for owner in owners:
            for _ in range(MAX_WRITE_ATTEMPTS):
                rec = self.store.get_observation_record(resource_id, owner)
                if rec is None:
                    break
                try:
                    if self.write(None, rec, _without_chunks_over(rec, gone)):
                        break
                except NotFound:  # the thread went meanwhile, and its record with it
                    break
            else:
                raise Conflict(
                    f"observation record of resource {resource_id} kept changing while messages were "
                    "deleted; delete again"
                )

    def mark_due(self, opts: MemoryOptions, resource_id: str, thread_id: str) -> bool:
        """Mark the record due (``pending_since``) unless it already is, so the sweep
        (``list_observation_work``) finds work a closing process could not finish. No model call.

        Returns:
            Whether a record was written (``False``: already marked, or nothing is unobserved).

        Raises:
            NotFound: thread scope and the thread is gone. Unavailable: store failure.
        """
        om = opts.observational_memory
        for _ in range(MAX_WRITE_ATTEMPTS):
            rec, tail, pending = self.view(om, resource_id, thread_id)
            if rec.pending_since is not None or not (tail or rec.buffered_chunks):
                return False
            new = rec.model_copy(
                update={"pending_since": self.clock.now(), "pending_message_tokens": pending}
            )
            if self.write(om, rec, new):
                return True
        return False

    def flush_usage(
        self, om: ObservationalMemoryOptions, resource_id: str, thread_id: str, *, force: bool = False
    ) -> bool:
        """Write the usage pending for the thread onto its record (its resource's in resource scope) as
        the write's only change, when ``force`` or once ``FLUSH_CALLS`` calls are pending for the thread;
        otherwise leave it for the record's next write. A record that does not exist yet is created
        holding only its usage: that is where a thread's title and embedding costs live when
        observational memory is off (or before its first observation).

        Returns:
            Whether a record was written.

        Raises:
            Unavailable: store failure (the totals are kept for the next write).
        """
        key = (resource_id, self.owner(om, thread_id))
        if not force and self.usage.pending_calls(key) < FLUSH_CALLS:
            return False
        for _ in range(MAX_WRITE_ATTEMPTS):
            if self.usage.pending_calls(key) == 0:
                return False
            rec = self.get_record(om, resource_id, thread_id)
            if rec is None:
                if self.store.get_thread(resource_id, thread_id) is None:
                    # gone (deleted, or its resource erased) after a call was counted: so is what it cost,
                    # and no record — a resource-scope one included — is made anew for it
                    self.usage.discard(resource_id, thread_id)
                    return False
                rec = self._fresh(om, resource_id, thread_id)
            try:
                if self.write(om, rec, rec):
                    return True
            except NotFound:  # the thread is gone: so is what it cost
                self.usage.discard(resource_id, thread_id)
                return False
        return False

    def work(self, opts: MemoryOptions, *, idle_seconds: int, limit: int) -> list[ObservationJob]:
        """Jobs for records due at least ``idle_seconds`` ago (``MemoryStore.list_observation_work``)."""
        due = self.clock.now() - timedelta(seconds=idle_seconds)
        jobs: list[ObservationJob] = []
        for resource_id, owner in self.store.list_observation_work(due_before=due, limit=limit):
            rec = self.store.get_observation_record(resource_id, owner)
            if rec is None or self._sweep_backing_off(rec, idle_seconds):
                continue
            thread_id = owner or _last_thread(rec)
            if thread_id is None:
                continue
            # an unchanged record must still be retried by a later sweep: the key carries the sweep's minute
            bucket = str(int(self.clock.now().timestamp()) // 60)
            jobs.append(self.job(rec, thread_id, rec.observed_seq(thread_id), "sweep", salt=bucket))
        return jobs

    # titles --------------------------------------------------------------------------------------

    def title_due(self, opts: MemoryOptions, thread: Thread | None) -> bool:
        """``generate_title`` is on and the thread is untitled (spec §2.6: never overwrite a title)."""
        return bool(opts.generate_title.enabled and thread is not None and thread.title == "")

    def generate_title(self, opts: MemoryOptions, thread: Thread) -> str | None:
        """Title an untitled thread from its first messages once it has a user message (spec §2.6).

        Returns the title set, or ``None`` (not due, no user message yet, or the title was set meanwhile:
        the write is a compare-and-set on the title — set only while it is still ``""`` — so a title a user
        set wins, and an unrelated write meanwhile, such as working memory, does not drop it). The write also
        requires the thread as read (``created_at``) and every message the title was made from: a title
        computed from messages deleted meanwhile (``delete_messages``, ``delete_thread``, an erasure) is never
        set, on this thread or on a new one made under the same id.

        Raises:
            InvalidInput: no chat model. Unavailable: the model failed or returned no title.
        """
        from memstack.observation.titles import generate_title

        if not self.title_due(opts, thread):
            return None
        messages = self.store.list_messages(thread.resource_id, thread.id, limit=20)
        if (
            sum(1 for m in messages if m.role == "user") < 1
            or len(messages) < opts.generate_title.min_messages
        ):
            return None
        chat = MeteredChat(self._chat(), self.usage, (thread.resource_id, thread.id), "title")
        title = generate_title(chat, messages, instructions=opts.generate_title.instructions)
        try:
            self.store.update_thread(
                thread.resource_id,
                thread.id,
                title=title,
                updated_at=self.clock.now(),
                expected_title="",
                expected_created_at=thread.created_at,
                expected_messages={m.id: m.seq for m in messages},
            )
        except (Conflict, NotFound):
            return None
        return title


def _lost_any(messages: Sequence[Message], tail: Sequence[Message]) -> bool:
    """Whether one of ``messages`` (a batch read after the cursor) is missing from ``tail`` (the
    unobserved messages as read again): it was deleted meanwhile."""
    present = {m.id for m in tail}
    return any(m.id not in present for m in messages)


def _without_chunks_over(rec: ObservationRecord, gone: Mapping[str, set[int]]) -> ObservationRecord:
    """``rec`` without the buffered chunks that cover a deleted ``seq`` of their thread, nor any later
    chunk of that thread; the same record (to be written again, for its new version) when none does."""
    first_bad: dict[str, int] = {}
    for chunk in rec.buffered_chunks:
        seqs = gone.get(chunk.thread_id)
        if seqs and any(chunk.from_seq <= s <= chunk.to_seq for s in seqs):
            first_bad[chunk.thread_id] = min(first_bad.get(chunk.thread_id, chunk.from_seq), chunk.from_seq)
    if not first_bad:
        return rec
    kept = tuple(
        c for c in rec.buffered_chunks if c.thread_id not in first_bad or c.from_seq < first_bad[c.thread_id]
    )
    return rec.model_copy(update={"buffered_chunks": kept, "last_buffered_at_tokens": 0})


def thread_label(om: ObservationalMemoryOptions, thread_id: str) -> str:
    """The thread id as shown in resource-scope observations: hashed when ``obscure_thread_ids``."""
    if om.effective_obscure_thread_ids:
        return _hashed_label(thread_id)
    return thread_id


def thread_labels(thread_id: str) -> tuple[str, str]:
    """Every label the thread may be shown with (the options may have changed since it was observed)."""
    return (thread_id, _hashed_label(thread_id))


def _hashed_label(thread_id: str) -> str:
    return hashlib.sha256(thread_id.encode()).hexdigest()[:8]


def _unforged(parsed: ObserverOutput) -> ObserverOutput:
    """An Observer answer's text as it may enter the record: no structural mark of the log in its
    observations or the hints context assembly shows (``log_format.model_text``)."""
    return replace(
        parsed,
        observations=model_text(parsed.observations).strip(),
        current_task=model_text(parsed.current_task).strip() or None if parsed.current_task else None,
        suggested_response=(
            model_text(parsed.suggested_response).strip() or None if parsed.suggested_response else None
        ),
    )


def _backoff(failures: int) -> timedelta:
    """``REFLECTION_BACKOFF × 2^(failures − 1)``, at most ``MAX_REFLECTION_BACKOFF``."""
    wait: timedelta = min(REFLECTION_BACKOFF * 2 ** min(max(failures, 1) - 1, 10), MAX_REFLECTION_BACKOFF)
    return wait


def _append(text: str, new: str, at: datetime) -> str:
    new = new.strip()
    if not new:
        return text
    if not text.strip():
        return new
    return f"{text}\n\n{BOUNDARY.format(at=at.strftime('%Y-%m-%dT%H:%M:%SZ'))}\n\n{new}"


def _last_thread(rec: ObservationRecord) -> str | None:
    if rec.thread_id is not None:
        return rec.thread_id
    return next(iter(rec.cursor), None)
