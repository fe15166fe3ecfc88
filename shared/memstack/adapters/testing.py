"""Deterministic adapters for tests, simulations and offline runs: no model and no network.

* ``HashEmbedder`` — the feature-hashing ``Embedder`` (``memstack.adapters.hash_embed``, re-exported here).
* ``ScriptedChatModel`` — a ``ChatModel`` that answers from a script, from a function of the request, or
  as a small deterministic Observer/Reflector; it records every call and can raise a given error or sleep.
* ``RecordingScheduler`` — an ``ObservationScheduler`` that records the jobs it is given (each key once)
  instead of running them, and can refuse chosen keys.

These are shipped with the library, not kept in ``tests/``, so that the port conformance suites in
``tests/contract/`` run them beside the real adapters and they cannot drift from the ports' contracts.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from memstack.adapters.hash_embed import HashEmbedder
from memstack.errors import InvalidInput, Unavailable
from memstack.observation.prompts import RequestKind, request_kind
from memstack.ports import ChatResult, ObservationJob

__all__ = [
    "DEGENERATE",
    "ChatCall",
    "HashEmbedder",
    "RecordingScheduler",
    "Reply",
    "RequestKind",
    "ScriptedChatModel",
    "request_kind",
]

# A speaker line of the Observer's transcript (memstack.observation.transcript): the speaker, an optional
# author and time in parentheses, then what was said.
_TRANSCRIPT_LINE = re.compile(
    r"^(?:User|Assistant|System|Tool(?: (?:Call|Result|Error) [^:(]+)?)(?: \([^)]*\))*:\s*(.+)$"
)
_COMPRESSION_LEVELS = ((4, "EXTREME"), (3, "CRITICAL"), (2, "AGGRESSIVE"))

DEGENERATE = "<observations>\n" + ("* 🟡 the same line again and again and again\n" * 400) + "</observations>"
"""An Observer answer stuck in a repetition loop, which ``memstack.observation.parsing.is_degenerate``
rejects: script it to test the retry and failure paths."""


@dataclass(frozen=True, slots=True)
class ChatCall:
    """One request a ``ScriptedChatModel`` received.

    Attributes:
        kind: ``request_kind`` of the messages.
        model: the model name the request went to (``with_model`` twins record their own).
        messages: the messages, as a list.
        tools: the tool definitions, or ``None``.
        max_output_tokens: the output cap asked for, or ``None``.
        temperature: the temperature asked for, or ``None``.
    """

    kind: RequestKind
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None

    @property
    def last_content(self) -> str:
        """The content of the last message as text (the Observer's history, the Reflector's task)."""
        return str(self.messages[-1].get("content", "")) if self.messages else ""


Reply = str | ChatResult | BaseException | Callable[[ChatCall], "str | ChatResult"]
"""A scripted answer: a text, a whole ``ChatResult``, an exception to raise, or a function of the call."""


@dataclass
class _Script:
    """What a model and its ``with_model`` twins share: the queue of replies and the call log."""

    replies: list[Reply]
    calls: list[ChatCall] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ScriptedChatModel:
    """A deterministic ``ChatModel`` (``memstack.ports.ChatModel``).

    Each call is recorded (``calls``), passed to ``on_call`` if given, then answered by the first rule that
    applies:

    1. the next reply of ``script`` (consumed): an exception is raised, a function is called with the
       ``ChatCall``, a text or ``ChatResult`` is returned;
    2. ``error``, raised on every call once the script is used up;
    3. ``respond(call)``;
    4. the built-in agents: an Observer that writes one observation per transcript line it is shown
       (its first ``words`` words; 🔴 for a question, 🟡 otherwise) with a current task and a suggested
       response; a Reflector that keeps every 🔴 line and date and one in ``level + 1`` of the other lines
       at compression level ``level`` (so a higher level gives a shorter log); ``"Scripted title"`` for
       any other request.

    A text answer reports no token usage; script a ``ChatResult`` to report some.

    Args:
        script: replies used first, in order.
        respond: the answer to a call when the script is used up.
        error: raised on every call when the script is used up (it wins over ``respond``).
        delay: seconds to sleep before answering each call (timeouts, time budgets, races).
        on_call: runs with each recorded call before it is answered (hold it at a barrier, change the
            store underneath it); what it raises is raised by ``complete``.
        model: the model's name; ``model_id`` is ``"scripted/<model>"``.
        words: words kept per observation by the built-in Observer.
    """

    def __init__(
        self,
        script: Sequence[Reply] = (),
        *,
        respond: Callable[[ChatCall], str | ChatResult] | None = None,
        error: BaseException | None = None,
        delay: float = 0.0,
        on_call: Callable[[ChatCall], object] | None = None,
        model: str = "observer",
        words: int = 8,
    ) -> None:
        self._script = _Script(list(script))
        self.on_call = on_call
        self.respond = respond
        self.error = error
        self.delay = delay
        self.model = model
        self.model_id = f"scripted/{model}"
        self.words = words

    @property
    def calls(self) -> list[ChatCall]:
        """Every call so far, in arrival order (shared with ``with_model`` twins)."""
        return self._script.calls

    def enqueue(self, *replies: Reply) -> None:
        """Append ``replies`` to the script (they answer the next calls once the earlier ones are used)."""
        with self._script.lock:
            self._script.replies.extend(replies)

    def count(self, kind: RequestKind) -> int:
        """How many calls of one ``kind`` were made so far."""
        return sum(1 for call in self.calls if call.kind == kind)

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        """Record the request and answer it (see the class docstring for the rules).

        Raises:
            InvalidInput: the messages hold text no endpoint can receive (a lone surrogate is not UTF-8).
            BaseException: the scripted exception or ``error``, as given.
        """
        try:
            json.dumps(list(messages), ensure_ascii=False, default=str).encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                "the messages are not valid text (a lone surrogate)", field="messages"
            ) from None
        call = ChatCall(
            kind=request_kind(messages),
            model=self.model,
            messages=list(messages),
            tools=list(tools) if tools is not None else None,
            max_output_tokens=max_output_tokens,
            temperature=temperature,
        )
        with self._script.lock:
            self._script.calls.append(call)
            reply: Reply | None = self._script.replies.pop(0) if self._script.replies else None
        if self.on_call is not None:
            self.on_call(call)
        if self.delay > 0:
            time.sleep(self.delay)
        if reply is None:
            reply = self._fallback(call)
        if isinstance(reply, BaseException):
            raise reply
        answer = reply(call) if callable(reply) else reply
        if isinstance(answer, ChatResult):
            return answer
        return ChatResult(text=answer)

    def with_model(self, model: str) -> ScriptedChatModel:
        """A twin that answers as ``model`` (the Observer's and Reflector's own ``model`` options) and
        shares this model's script and call log. Raises ``InvalidInput`` for an empty name."""
        if not model:
            raise InvalidInput("model must be a non-empty string", field="model")
        twin = ScriptedChatModel(
            respond=self.respond,
            error=self.error,
            delay=self.delay,
            on_call=self.on_call,
            model=model,
            words=self.words,
        )
        twin._script = self._script
        return twin

    def _fallback(self, call: ChatCall) -> Reply:
        if self.error is not None:
            return self.error
        if self.respond is not None:
            return self.respond
        if call.kind == "observer":
            return self.observe(call.last_content)
        if call.kind == "reflector":
            return self.reflect(call.last_content)
        return "Scripted title"

    def observe(self, history: str) -> str:
        """The built-in Observer's answer to the transcript ``history``."""
        lines = []
        for raw in history.splitlines():
            match = _TRANSCRIPT_LINE.match(raw.strip())
            if match:
                said = match.group(1)
                mark = "🔴" if "?" in said else "🟡"
                lines.append(f"* {mark} (12:00) {' '.join(said.split()[: self.words])}")
        body = "\n".join(lines) or "* 🟢 (12:00) nothing new"
        return (
            f"<observations>\nDate: May 8, 2023\n{body}\n</observations>\n"
            "<current-task>\nPrimary: keep the conversation going\n</current-task>\n"
            "<suggested-response>\nAsk how the week went\n</suggested-response>"
        )

    def reflect(self, task: str) -> str:
        """The built-in Reflector's answer to the Reflector task ``task``."""
        level = next((n for n, word in _COMPRESSION_LEVELS if f"## {word} COMPRESSION REQUIRED" in task), 1)
        body = task.split("## OBSERVATIONS TO REFLECT ON", 1)[-1].split("\n---\n", 1)[0]
        kept: list[str] = []
        others = 0
        for raw in body.splitlines():
            line = raw.strip()
            if "🔴" in line or line.startswith("Date:"):
                if not kept or kept[-1] != line:
                    kept.append(line)
            elif line.startswith("*"):
                others += 1
                if others % (level + 1) == 0:
                    kept.append(line)
        return "<observations>\n" + "\n".join(kept) + "\n</observations>"


class RecordingScheduler:
    """An ``ObservationScheduler`` that records jobs instead of running them.

    Like Step Functions execution names, a key is taken once: a job whose key was submitted before is
    ignored, even after the caller has taken it off ``jobs``. A test runs the recorded jobs itself
    (``Memory.run_observation_job(scheduler.jobs.pop(0))``).

    Args:
        failing: keys whose submit raises ``Unavailable`` (as a throttled ``StartExecution`` would); a
            refused job is not recorded, so submitting it again later is not a repeat.

    Attributes:
        jobs: the accepted jobs not yet taken off by the caller, in submission order.
        submitted: every accepted key, in submission order (never shortened).
    """

    def __init__(self, *, failing: Collection[str] = ()) -> None:
        self.failing = set(failing)
        self.submitted: list[str] = []
        self.jobs: list[ObservationJob] = []
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def submit(self, job: ObservationJob) -> None:
        """Record ``job`` unless its key was recorded before.

        Raises:
            Unavailable: ``job.key`` is one of ``failing``.
        """
        with self._lock:
            if job.key in self.failing:
                raise Unavailable(f"the scheduler refused job {job.key}; retry later")
            if job.key not in self._seen:
                self._seen.add(job.key)
                self.submitted.append(job.key)
                self.jobs.append(job)

    def close(self) -> None:
        """Nothing to release; present so that callers may close every scheduler alike."""
