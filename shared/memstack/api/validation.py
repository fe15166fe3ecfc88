"""Request validation and response serialisation of the routes, with each route's own pydantic models.

A route declares its inputs in its signature, in Powertools' terms (docs "Data validation"): ``str`` path
parameters named as in the rule, one query model (``Annotated[ResourceQuery, Query()]``), headers
(``Annotated[str | None, Header(alias="If-Match")]``; the markers of ``memstack.api.params``, or
Powertools' own), one body model, and the return type (a model, or ``Response[Model]``). ``route_plan`` reads that signature once per route function, on the route's first
request, and ``RoutePlan`` then validates each request by calling the models' own validators — instead of
Powertools' OpenAPI validation middleware, which wraps every parameter in a ``TypeAdapter`` of its own,
imports its field machinery with the resolver, and costs the API a middleware frame per side per request.

The answers are the ones Powertools' validation gave (``tests/integration/test_api_validation.py``): the
same sources in the same order (path, query, headers, then the body), the same pydantic errors with the
same locations (``("query", <param>, <field>…)``, ``("body", <field>…)``), raised as Powertools'
``RequestValidationError``, which ``memstack.api.errors`` turns into the 400 naming the first error's field;
a body that is not JSON raises at once (``json_invalid`` at ``("body", <offset>)``), as Powertools did. One
difference, on purpose: a JSON array is not a body object. Powertools took the first element of an array
sent to a route whose body is an object (its normalisation of repeated form fields); here it is refused,
400 ``body``.

The OpenAPI document still comes from Powertools (``memstack.api.openapi``), from the same signatures.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin, get_type_hints
from urllib.parse import parse_qs

from aws_lambda_powertools.event_handler.api_gateway import Response
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
    ResponseValidationError,
)
from pydantic import BaseModel, TypeAdapter, ValidationError

from memstack.api import ids
from memstack.api.params import Header, Query

__all__ = ["RoutePlan", "route_plan"]

_SEQUENCES = (list, tuple, set, frozenset)

_JSON = "application/json"
_FORM = "application/x-www-form-urlencoded"
_MULTIPART = "multipart/form-data"


def _is_multi(annotation: Any) -> bool:
    """Whether a query field takes several values (a list, tuple or set, possibly optional)."""
    if get_origin(annotation) in _SEQUENCES:
        return True
    return any(get_origin(a) in _SEQUENCES for a in get_args(annotation))


def _location(metadata: tuple[Any, ...]) -> tuple[str, str | None] | None:
    """The parameter marker among ``Annotated`` metadata — ours (``memstack.api.params``) or Powertools'
    (``Query()``, ``Header()``, ``Body()``) — as (``query``/``header``/``body``/…, alias)."""
    for marker in metadata:
        if isinstance(marker, Query):
            return "query", marker.alias
        if isinstance(marker, Header):
            return "header", marker.alias
        where = getattr(getattr(marker, "in_", None), "value", None)
        if isinstance(where, str):
            return where, getattr(marker, "alias", None)
    return None


@dataclass(frozen=True)
class _Param:
    """A query parameter or a header that is one value (not a model): validated by its own type."""

    name: str
    alias: str
    adapter: TypeAdapter[Any]
    default: Any
    required: bool
    multi: bool = False


@dataclass(frozen=True)
class RoutePlan:
    """How one route's requests are validated and its answers serialised.

    Attributes:
        query: the query model parameter, as (parameter name, model), or ``None``.
        query_params: query parameters that are one value each (not a model).
        query_names: each query parameter the route takes, by its name in the URL, with whether it takes
            several values: what ``MemstackResolver`` checks a request's query against.
        headers: the header parameters.
        body: the body parameter, as (parameter name, model, required), or ``None``.
        returns: how the answer's body is checked and written: a model (``Response[X]`` → ``X``), a
            ``TypeAdapter`` of another type, ``None`` for ``Response[None]``, or ``UNCHECKED`` when the
            route declares no return type (the resolver's serializer writes it).
    """

    query: tuple[str, type[BaseModel]] | None
    query_params: tuple[_Param, ...]
    query_names: Mapping[str, bool]
    headers: tuple[_Param, ...]
    body: tuple[str, type[BaseModel], bool] | None
    returns: type[BaseModel] | TypeAdapter[Any] | None | object

    def arguments(self, event: Any, path_values: Mapping[str, str]) -> dict[str, Any]:
        """The route function's keyword arguments for a request: the path values as routed (a thread or
        resource id the routable rule refuses is an error: ``memstack.api.ids``), then the query model, the
        headers and the body, each validated by its model.

        Args:
            event: the request (Powertools' ``APIGatewayProxyEvent``: ``get``, ``headers``, ``json_body``).
            path_values: the values the route's rule matched, by parameter name.

        Raises:
            RequestValidationError: any source is invalid (every error, in source order), or the body is not
                JSON (at once, ``json_invalid``).
            RequestUnsupportedContentType: the route takes a body and the media type is not JSON or a form.
            InvalidInput: the body is JSON that the parser cannot hold (``memstack.api.app.load_json_body``).
        """
        values: dict[str, Any] = dict(path_values)
        errors: list[dict[str, Any]] = []
        for name in ids.PATH_IDS:
            value = values.get(name)
            if isinstance(value, str) and not ids.is_routable(value):
                # the routes' pattern matches '.', '..' and '%' (decoded once): the rule refuses them here,
                # on every route, whichever ids the ``Memory`` method behind it takes (removals take any)
                errors.append(
                    {"type": ids.NOT_ROUTABLE, "loc": ("path", name), "msg": ids.RULE, "input": value}
                )
        if self.query is not None or self.query_params:
            query = self._query_values(event)
            if self.query is not None:
                name, model = self.query
                _validate(model, query, ("query", name), values, name, errors)
            for param in self.query_params:
                _one(param, query.get(param.alias), ("query", param.alias), values, errors)
        if self.headers:
            multi = event.get("multiValueHeaders")
            given = multi if multi else event.get("headers") or {}
            found = {str(k).lower(): v for k, v in given.items()}  # header names are case-insensitive
            for header in self.headers:
                value = found.get(header.alias.lower())
                if isinstance(value, list) and len(value) == 1:
                    value = value[0]
                _one(header, value, ("header", header.alias), values, errors)
        if self.body is not None:
            name, model, required = self.body
            received = _body(event)
            if received is None:
                if required:
                    errors.append(_missing(("body",)))
                else:
                    values[name] = None
            else:
                _validate(model, received, ("body",), values, name, errors)
        if errors:
            raise RequestValidationError(errors)
        return values

    def _query_values(self, event: Any) -> dict[str, Any]:
        """The query as the model's input: a repeated name's first value (a repeated single-valued name is
        refused before: ``memstack.api.app``), a multi-valued name's values."""
        multi = event.get("multiValueQueryStringParameters") or {}
        single = event.get("queryStringParameters") or {}
        data: dict[str, Any] = {}
        for name, is_multi in self.query_names.items():
            if name in multi:
                value = multi[name]
            elif name in single:
                value = single[name]
                if is_multi and isinstance(value, str):
                    value = value.split(",")
            else:
                continue
            if value is None:
                continue
            if not is_multi and isinstance(value, list) and value:
                value = value[0]
            data[name] = value
        return data

    def serialise(self, response: Response[Any]) -> None:
        """Check the route's answer against its return type and write its body as JSON text (compact,
        non-ASCII escaped: ``memstack.api.app.dump_json_text``'s spelling), in place.

        Raises:
            ResponseValidationError: the body is not what the route declares (the resolver answers 500).
        """
        returns = self.returns
        if returns is UNCHECKED:
            return
        if returns is None:
            if response.body not in (None, ""):
                raise ResponseValidationError(
                    [{"type": "none_required", "loc": ("response",), "msg": "Input should be None"}]
                )
            response.body = None
            return
        try:
            if isinstance(returns, TypeAdapter):
                value = returns.validate_python(response.body, from_attributes=True)
                text = returns.dump_json(value, by_alias=True, ensure_ascii=True)
            else:
                model: type[BaseModel] = returns  # type: ignore[assignment]
                value = model.model_validate(response.body, from_attributes=True)
                text = model.__pydantic_serializer__.to_json(value, by_alias=True, ensure_ascii=True)
        except ValidationError as exc:
            raise ResponseValidationError(_located(exc, ("response",)), body=response.body) from None
        response.body = text.decode()


UNCHECKED = object()
"""``RoutePlan.returns`` of a route without a return type: its answer is written as it is."""


def _one(
    param: _Param, value: Any, loc: tuple[Any, ...], values: dict[str, Any], errors: list[dict[str, Any]]
) -> None:
    if value is None:
        if param.required:
            errors.append(_missing(loc))
        else:
            values[param.name] = param.default
        return
    try:
        values[param.name] = param.adapter.validate_python(value, from_attributes=True)
    except ValidationError as exc:
        errors.extend(_located(exc, loc))


def _validate(
    model: type[BaseModel],
    data: Any,
    prefix: tuple[Any, ...],
    values: dict[str, Any],
    name: str,
    errors: list[dict[str, Any]],
) -> None:
    try:
        # from_attributes, as Powertools validated: it words a non-object's error ("a valid dictionary or
        # object to extract fields from") and the API's error messages quote that wording
        values[name] = model.model_validate(data, from_attributes=True)
    except ValidationError as exc:
        errors.extend(_located(exc, prefix))


def _located(exc: ValidationError, prefix: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [{**error, "loc": prefix + tuple(error["loc"])} for error in exc.errors()]


def _missing(loc: tuple[Any, ...]) -> dict[str, Any]:
    return {"type": "missing", "loc": loc, "msg": "Field required", "input": None}


def _body(event: Any) -> Any:
    """The request body as the model's input, by media type: JSON (or none given) parsed; an empty form
    is an empty object (a form with a body never gets here: ``memstack.api.app`` answers 415 first).

    Raises:
        RequestValidationError: the body is not JSON (``json_invalid``, at the parser's offset).
        RequestUnsupportedContentType: another media type, or a multipart type without its boundary.
    """
    import json

    content_type = str(event.headers.get("content-type", "")).strip()
    if not content_type or content_type.startswith(_JSON):
        try:
            return event.json_body
        except json.JSONDecodeError as exc:
            raise RequestValidationError(
                [{"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error", "input": {}}],
                body=exc.doc,
            ) from exc
    if content_type.startswith(_FORM):
        return parse_qs(event.decoded_body or "", keep_blank_values=True)
    if content_type.startswith(_MULTIPART) and "boundary=" in content_type and not event.decoded_body:
        return {}
    raise RequestUnsupportedContentType(
        "Unsupported content type",
        errors=[{"type": "unsupported_content_type", "loc": ("body",), "msg": content_type}],
    )


_plans: dict[tuple[Callable[..., Any], str], RoutePlan] = {}
_lock = threading.Lock()


def route_plan(func: Callable[..., Any], path: str) -> RoutePlan:
    """The plan of the route function ``func`` served at ``path`` (OpenAPI form: ``/v1/threads/{thread_id}``),
    read from its signature on first use and kept.

    Parameters are read as Powertools reads them: a name in the path is a path parameter (``str``); a
    parameter marked ``Query()`` or ``Header()`` comes from there; an unmarked pydantic model is the body;
    any other unmarked parameter is a query parameter.

    Raises:
        TypeError: the signature has a parameter the API cannot fill (a path parameter that is not ``str``,
            two bodies or two query models, a parameter without a type).
    """
    key = (func, path)
    plan = _plans.get(key)
    if plan is None:
        with _lock:
            plan = _plans.get(key)
            if plan is None:
                plan = _plans[key] = _read_plan(func, frozenset(re.findall(r"{(\w+)}", path)))
    return plan


def _read_plan(func: Callable[..., Any], path_names: frozenset[str]) -> RoutePlan:
    hints = get_type_hints(func, include_extras=True)
    query: tuple[str, type[BaseModel]] | None = None
    names: dict[str, bool] = {}
    query_params: list[_Param] = []
    headers: list[_Param] = []
    body: tuple[str, type[BaseModel], bool] | None = None
    for param in inspect.signature(func).parameters.values():
        if param.name not in hints:
            raise TypeError(f"route {func.__name__}: parameter {param.name} has no type")
        annotation, where = _unwrap(hints[param.name])
        required = param.default is inspect.Parameter.empty
        default = None if required else param.default
        if param.name in path_names:
            if annotation is not str:
                raise TypeError(f"route {func.__name__}: path parameter {param.name} must be str")
        elif _is_model(annotation) and (where is None or where[0] == "body"):
            if body is not None:
                raise TypeError(f"route {func.__name__}: one body model per route")
            body = (param.name, annotation, required)
        elif where is not None and where[0] == "header":
            alias = where[1] or param.name.replace("_", "-")
            headers.append(_Param(param.name, alias, TypeAdapter(annotation), default, required))
        elif _is_model(annotation):
            if query is not None:
                raise TypeError(f"route {func.__name__}: one query model per route")
            query = (param.name, annotation)
            names.update(
                (info.alias or field, _is_multi(info.annotation))
                for field, info in annotation.model_fields.items()
            )
        else:
            alias = (where[1] if where is not None else None) or param.name
            multi = _is_multi(annotation)
            query_params.append(_Param(param.name, alias, TypeAdapter(annotation), default, required, multi))
            names[alias] = multi
    return RoutePlan(query, tuple(query_params), names, tuple(headers), body, _returns(hints))


def _unwrap(annotation: Any) -> tuple[Any, tuple[str, str | None] | None]:
    """The type of an annotation and its Powertools marker's location, if any."""
    if get_origin(annotation) is Annotated:
        inner, *metadata = get_args(annotation)
        return inner, _location(tuple(metadata))
    return annotation, None


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _returns(hints: Mapping[str, Any]) -> type[BaseModel] | TypeAdapter[Any] | None | object:
    if "return" not in hints:
        return UNCHECKED
    returned = hints["return"]
    if get_origin(returned) is Response:
        (returned,) = get_args(returned)
    if returned is None or returned is type(None):
        return None
    return returned if _is_model(returned) else TypeAdapter(returned)
