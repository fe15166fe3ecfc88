"""Where a route parameter comes from, when not from the path or the body: ``Annotated[ResourceQuery,
Query()]`` (the query string, as one model) and ``Annotated[str | None, Header(alias="If-Match")]``.

Markers of our own rather than Powertools' ``Query``/``Header`` (``event_handler.openapi.params``), which
import its OpenAPI field machinery and build a model at import: serving a request reads these markers
(``memstack.api.validation``); only the OpenAPI document, which is generated off the request path, hands
Powertools its own markers in their place (``powertools_marker``; ``memstack.api.openapi``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin, get_type_hints

__all__ = ["Header", "Query", "powertools_marker", "with_powertools_markers"]


@dataclass(frozen=True, slots=True)
class Query:
    """The query string, validated as the parameter's pydantic model (or one query parameter, by the
    parameter's name or ``alias``)."""

    alias: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class Header:
    """A request header (``alias``: its name; default the parameter's name with ``-`` for ``_``)."""

    alias: str | None = None
    description: str | None = None


def powertools_marker(marker: Any) -> Any:
    """Powertools' own marker for one of ours (for its OpenAPI generator); anything else as it is."""
    if not isinstance(marker, Query | Header):
        return marker
    from aws_lambda_powertools.event_handler.openapi import params

    kind = params.Query if isinstance(marker, Query) else params.Header
    return kind(alias=marker.alias, description=marker.description)


def with_powertools_markers(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` under the same name, its signature's markers replaced by Powertools' own (``Query()``,
    ``Header()``), which Powertools' OpenAPI generator and validation read (``inspect.signature``): for a
    resolver that only documents the routes (``memstack.api.openapi``)."""
    hints = get_type_hints(func, include_extras=True)
    signature = inspect.signature(func)
    parameters = []
    for param in signature.parameters.values():
        annotation = hints.get(param.name, param.annotation)
        if get_origin(annotation) is Annotated:
            inner, *metadata = get_args(annotation)
            annotation = Annotated[(inner, *(powertools_marker(m) for m in metadata))]
        parameters.append(param.replace(annotation=annotation))

    @functools.wraps(func)
    def documented(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    returns = hints.get("return", signature.return_annotation)
    documented.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=parameters, return_annotation=returns
    )
    return documented
