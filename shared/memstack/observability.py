"""Observability in one place: the Powertools ``Logger``, ``Tracer`` and ``Metrics`` of a Lambda function,
a span per use case, and the business metrics (STYLE.md, "Observability").

Everything is built on first use, never at import: importing this module imports no Powertools module and
no ``aws_xray_sdk`` (cold starts are measured by ``benchmarks/cold_start.py``).

* **Logs**: every module logs through ``logging.getLogger(__name__)``; the library's root logger
  ``memstack`` has only a ``NullHandler``, so library use and ``memstack serve`` print nothing of Powertools.
  In a Lambda function, ``lambda_handler`` gives the ``memstack`` loggers the Powertools JSON handler
  (``copy_config_to_registered_loggers``: one JSON line per record on stdout, with the request and
  correlation ids) — ids, counts and token totals only, never message or working-memory text at INFO.
* **Traces**: ``use_case(name)`` opens a subsegment ``## name`` when tracing is on (in Lambda with active
  tracing, unless ``POWERTOOLS_TRACE_DISABLED``); elsewhere it costs one cached check. Spans carry their
  name only: no arguments, no results (``capture_response=False`` on the handler's segment).
* **Metrics**: ``add_metric`` records a business metric (``TURNS``, ``SAVES``, ``RECALLED``, ``OBSERVED``,
  …) only inside an invocation wrapped by ``lambda_handler``, whose Powertools ``log_metrics`` flushes them
  as one CloudWatch EMF line at the end of the invocation; elsewhere it does nothing.

The service name and the metrics namespace come from ``SERVICE_ENV`` and ``NAMESPACE_ENV`` (constants that
``infra/environment.py`` imports to build each function's environment).
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable
from contextlib import ContextDecorator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from types import TracebackType

    from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE_ENV = "POWERTOOLS_SERVICE_NAME"
"""The service name of logs, traces and the metrics' ``service`` dimension (``memstack-api``, …)."""
LOG_LEVEL_ENV = "POWERTOOLS_LOG_LEVEL"
NAMESPACE_ENV = "POWERTOOLS_METRICS_NAMESPACE"
"""The CloudWatch namespace of the business metrics."""
TRACE_DISABLED_ENV = "POWERTOOLS_TRACE_DISABLED"
LAMBDA_TASK_ROOT_ENV = "LAMBDA_TASK_ROOT"
"""Set by the Lambda runtime; Powertools' tracer stays off without it."""
ENV_NAMES = frozenset({SERVICE_ENV, LOG_LEVEL_ENV, NAMESPACE_ENV})
"""The variables each function's environment sets for this module (infra/environment.py)."""

API_GATEWAY_REQUEST_ID = "requestContext.requestId"
"""Where an API Gateway REST proxy event holds its request id (Powertools' ``correlation_paths``)."""

DEFAULT_SERVICE = "memstack"
DEFAULT_NAMESPACE = "Memstack"
LIBRARY_LOGGER = "memstack"
"""The parent of every ``memstack.*`` module logger."""

TURNS = "Turns"
"""Contexts assembled (``POST .../context``): one per turn."""
SAVES = "Saves"
"""Messages saved (``POST .../messages``): the batch's size."""
RECALLED = "Recalled"
"""Recall hits returned (``POST .../recall``)."""
OBSERVED = "Observed"
"""Messages the Observer made active (the ``observe`` function)."""
REFLECTIONS = "Reflections"
"""Reflection steps that rewrote the observations (the ``reflect`` function)."""
INDEXED = "Indexed"
"""Messages embedded and indexed (the ``indexer`` function)."""
MESSAGES_DELETED = "MessagesDeleted"
"""Messages deleted by id (``POST /v1/messages/delete``)."""
THREADS_CREATED = "ThreadsCreated"
THREADS_UPDATED = "ThreadsUpdated"
THREADS_DELETED = "ThreadsDeleted"
THREADS_CLONED = "ThreadsCloned"
WORKING_MEMORY_UPDATES = "WorkingMemoryUpdates"
"""Working-memory documents replaced or merged through ``PUT`` (resource or thread scope)."""
RESOURCES_ERASED = "ResourcesErased"
"""Erasures of everything a resource owns (``DELETE /v1/resources/{resource_id}``)."""
TOOL_CALLS = "ToolCalls"
"""The model's tool calls applied (``updateWorkingMemory``, ``recall``)."""

F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.Lock()
_logger: Logger | None = None
_metrics: Metrics | None = None
_tracer: Tracer | None = None
_tracing: bool | None = None  # None: not decided yet
_recording: ContextVar[bool] = ContextVar("memstack_metrics_recording", default=False)
_generation = 0  # bumped by reset(): wrapped handlers rebuild their instruments


def service_name() -> str:
    """The service name: ``POWERTOOLS_SERVICE_NAME``, else ``memstack``."""
    return os.environ.get(SERVICE_ENV) or DEFAULT_SERVICE


def logger() -> Logger:
    """The function's Powertools ``Logger`` (service ``service_name()``), built on first use.

    Only ``lambda_handler`` and the functions' own modules call it: it writes JSON lines to stdout, which a
    library user does not want.
    """
    global _logger
    with _lock:
        if _logger is None:
            from aws_lambda_powertools import Logger

            _logger = Logger(service=service_name(), name="%(name)s")  # the module logger's name per line
        return _logger


def metrics() -> Metrics:
    """The function's Powertools ``Metrics`` (namespace ``POWERTOOLS_METRICS_NAMESPACE`` else ``Memstack``,
    dimension ``service``), built on first use."""
    global _metrics
    with _lock:
        if _metrics is None:
            from aws_lambda_powertools import Metrics

            namespace = os.environ.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE
            _metrics = Metrics(namespace=namespace, service=service_name())
        return _metrics


def tracer() -> Tracer | None:
    """The Powertools ``Tracer`` when tracing is on, else ``None`` (decided once per process by Powertools'
    rule: inside Lambda, not under SAM local, and ``POWERTOOLS_TRACE_DISABLED`` unset; the X-Ray SDK is
    imported only when it is on)."""
    global _tracer, _tracing
    if _tracing is False:
        return None
    with _lock:
        if _tracing is None and not os.environ.get(LAMBDA_TASK_ROOT_ENV):
            _tracing = False  # outside Lambda Powertools never traces: decided without importing it
        if _tracing is None:
            from aws_lambda_powertools.tracing.tracer import Tracer

            _tracing = not Tracer._is_tracer_disabled()
            if _tracing:
                _tracer = Tracer(service=service_name())
        return _tracer


def configure(*, tracer: Tracer | None = None, metrics: Metrics | None = None) -> None:
    """Use these instruments instead of building them from the environment (tests: a ``Tracer`` with
    ``disabled=False`` on a stub provider; an embedder's own ``Metrics``).

    Args:
        tracer: turns tracing on with this tracer.
        metrics: the ``Metrics`` that ``add_metric`` records into and ``lambda_handler`` flushes.
    """
    global _tracer, _tracing, _metrics
    with _lock:
        if tracer is not None:
            _tracer, _tracing = tracer, True
        if metrics is not None:
            _metrics = metrics


def reset() -> None:
    """Forget the instruments and give the ``memstack`` logger back to the host (a ``NullHandler``,
    propagating), as in a fresh process. Tests call it between cases."""
    global _logger, _metrics, _tracer, _tracing, _generation
    with _lock:
        if _metrics is not None:
            _metrics.clear_metrics()
        _logger = _metrics = _tracer = None
        _tracing = None
        _generation += 1
    tracing = sys.modules.get("aws_lambda_powertools.tracing.tracer")
    if tracing is not None:
        tracing.Tracer._reset_config()  # Powertools keeps the first tracer's provider class-wide
    for existing in list(logging.root.manager.loggerDict.values()):
        if isinstance(existing, logging.Logger) and getattr(existing, "powertools_handler", None):
            existing.handlers = []  # a new Logger of that service configures itself afresh (new stdout)
            for attribute in ("init", "powertools_handler"):
                delattr(existing, attribute)
    library = logging.getLogger(LIBRARY_LOGGER)
    library.handlers = [logging.NullHandler()]
    library.propagate = True
    library.setLevel(logging.NOTSET)


def add_metric(name: str, value: float = 1, unit: str = "Count") -> None:
    """Record a business metric for this invocation (flushed by ``lambda_handler``); outside an invocation
    (library use, ``memstack serve``) it does nothing.

    Args:
        name: one of this module's metric names (``TURNS``, ``SAVES``, ...).
        value: the amount (a count unless ``unit`` says otherwise).
        unit: a CloudWatch unit name (``Count``, ``Milliseconds``, ...).
    """
    if not _recording.get():
        return
    metrics().add_metric(name=name, unit=unit, value=value)


class use_case(ContextDecorator):  # noqa: N801 - reads as a function: ``with use_case("context"):``
    """A tracing span (X-Ray subsegment ``## name``) around a use case, as a context manager or a
    decorator. Tracing off: no span and no cost beyond one check. The span records its name only (never
    arguments, message text or results); an exception is recorded by the provider with its class and
    message (``MemstackError`` messages never hold message text).

    Args:
        name: the use case, e.g. ``"context"``, ``"save_messages"``.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._span: Any = None

    def _recreate_cm(self) -> use_case:
        return use_case(self.name)  # a fresh span per call: one decorated function, many threads

    def __enter__(self) -> use_case:
        active = tracer()
        if active is not None:
            self._span = active.provider.in_subsegment(name=f"## {self.name}")
            self._span.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        span, self._span = self._span, None
        if span is not None:
            span.__exit__(exc_type, exc, traceback)


C = TypeVar("C", bound=type)


def traced(cls: C) -> C:
    """Class decorator: every public method defined on ``cls`` runs inside ``use_case(<method name>)`` (a
    facade's methods are its use cases). Properties, class and static methods are left as they are."""
    for name, value in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(value):
            setattr(cls, name, functools.wraps(value)(use_case(name)(value)))
    return cls


def lambda_handler(handler: F, *, correlation_id_path: str | None = None) -> F:
    """Wrap a Lambda handler with the instruments, built on the first invocation (not at import):

    * the Powertools logger's Lambda context (cold start, request id, and the correlation id found at
      ``correlation_id_path`` in the event, e.g. ``API_GATEWAY_REQUEST_ID``), its JSON handler given to
      the ``memstack`` loggers;
    * the handler's trace segment (``capture_response=False``: responses hold message text);
    * ``add_metric`` recording, flushed by ``log_metrics`` as one EMF line when the invocation ends.

    A call without a Lambda context object (tests calling ``handler(event, None)``) runs without the
    logger's context fields.
    """
    built: dict[int, Callable[[Any, Any], Any]] = {}

    @functools.wraps(handler)
    def wrapper(event: Any, context: Any) -> Any:
        generation = _generation
        if generation not in built:
            built.clear()
            built[generation] = _instrument(handler, correlation_id_path)
        return built[generation](event, context)

    return wrapper  # type: ignore[return-value]


def emit_json_logs(level: str | int | None = None) -> Logger:
    """Give the ``memstack`` loggers the service logger's JSON handler (stdout), at ``level`` (default:
    ``POWERTOOLS_LOG_LEVEL``, else INFO). For a process that is Memstack's own: a Lambda function
    (``lambda_handler`` calls it) or ``memstack serve``; never called by library use.

    Returns:
        The service logger (``logger()``).
    """
    from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

    log = logger()
    copy_config_to_registered_loggers(source_logger=log, include={LIBRARY_LOGGER}, log_level=level)
    if log.name == LIBRARY_LOGGER:  # the service logger is the library's root: nothing to copy
        library = logging.getLogger(LIBRARY_LOGGER)
        library.handlers = [log.logger_handler]
        if level is not None:
            library.setLevel(level)
    return log


def _instrument(
    handler: Callable[[Any, Any], Any], correlation_id_path: str | None
) -> Callable[[Any, Any], Any]:
    log = emit_json_logs()
    # an invocation without business metrics (health, an error) is normal here, not worth a warning line
    warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)

    def recording(event: Any, context: Any) -> Any:
        token = _recording.set(True)
        try:
            return handler(event, context)
        finally:
            _recording.reset(token)

    measured = metrics().log_metrics(recording)
    active = tracer()
    traced = active.capture_lambda_handler(measured, capture_response=False) if active else measured
    with_context = log.inject_lambda_context(
        traced, correlation_id_path=correlation_id_path, clear_state=True
    )

    def invoke(event: Any, context: Any) -> Any:
        if hasattr(context, "aws_request_id") and hasattr(context, "function_name"):
            return with_context(event, context)
        return traced(event, context)

    return invoke
