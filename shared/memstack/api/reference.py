"""The API reference page (``GET /docs`` of ``memstack serve``): one self-contained HTML page rendered on the
server from the OpenAPI document, with the stylesheet shipped in the package (``assets/reference.css``) —
no script, no CDN, so it works offline and shows the same on every browser.

The page lists the operations by tag (method, path, summary, description, parameters, request body and
responses), then every component schema with its properties (type, required, constraints, description).
Every ``$ref`` is a link to its schema. All text from the document is HTML-escaped.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["openapi_json", "reference_html", "render_reference"]

_CONSTRAINTS = (
    ("minLength", "min length"),
    ("maxLength", "max length"),
    ("minimum", "≥"),
    ("exclusiveMinimum", ">"),
    ("maximum", "≤"),
    ("exclusiveMaximum", "<"),
    ("minItems", "min items"),
    ("maxItems", "max items"),
    ("pattern", "pattern"),
    ("default", "default"),
)


@cache
def openapi_json() -> bytes:
    """The OpenAPI document ``memstack serve`` answers at ``/openapi.json``: exactly the committed
    ``docs/openapi.json``, which ``tests/integration/test_api_openapi.py`` keeps equal to what the routes
    generate (``memstack.api.openapi.render``). Generated once per process, so an installed package
    (which does not ship ``docs/``) serves it too."""
    from memstack.api.openapi import render

    return render().encode("utf-8")


@cache
def reference_html() -> bytes:
    """The ``/docs`` page of ``openapi_json()``, rendered once per process."""
    return render_reference(json.loads(openapi_json())).encode("utf-8")


def render_reference(document: Mapping[str, Any]) -> str:
    """The reference page of an OpenAPI 3 ``document``, as a complete HTML page.

    Raises:
        KeyError: the document has no ``info`` or no ``paths``.
    """
    info = document["info"]
    operations = _operations(document["paths"])
    tags = list(dict.fromkeys(tag for tag, *_ in operations))
    schemas: Mapping[str, Any] = document.get("components", {}).get("schemas", {})
    nav = "".join(
        f'<li><a href="#tag-{_slug(tag)}">{_e(tag)}</a><ul>'
        + "".join(
            f'<li><a href="#{op_id}"><span class="method {m}">{m.upper()}</span> {_e(path)}</a></li>'
            for t, m, path, op_id, _ in operations
            if t == tag
        )
        + "</ul></li>"
        for tag in tags
    )
    body = "".join(
        f'<section class="tag" id="tag-{_slug(tag)}"><h2>{_e(tag)}</h2>'
        + "".join(_operation(m, path, op_id, op) for t, m, path, op_id, op in operations if t == tag)
        + "</section>"
        for tag in tags
    )
    schema_part = "".join(_schema_section(name, schema) for name, schema in sorted(schemas.items()))
    title = _e(f"{info.get('title', 'API')} {info.get('version', '')}".strip())
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title} — reference</title><style>{_stylesheet()}</style></head><body>"
        f'<nav><p class="brand">{title}</p><p><a href="/openapi.json">openapi.json</a></p>'
        f'<ul>{nav}<li><a href="#schemas">schemas</a></li></ul></nav>'
        f"<main><header><h1>{title}</h1><p>{_e(info.get('description', ''))}</p>"
        f"<p>OpenAPI {_e(document.get('openapi', ''))} · {len(operations)} operations · "
        f'{len(schemas)} schemas · <a href="/openapi.json">the document</a></p></header>'
        f'{body}<section id="schemas"><h2>schemas</h2>{schema_part}</section></main></body></html>\n'
    )


def _operations(paths: Mapping[str, Any]) -> list[tuple[str, str, str, str, Mapping[str, Any]]]:
    """``(tag, method, path, anchor, operation)`` for every operation, by tag then path then method."""
    order = ("get", "post", "put", "patch", "delete", "head", "options")
    out = []
    for path, methods in paths.items():
        for method, op in methods.items():
            if method not in order:
                continue
            tag = (op.get("tags") or ["other"])[0]
            anchor = "op-" + _slug(op.get("operationId") or f"{method}-{path}")
            out.append((str(tag), method, path, anchor, op))
    return sorted(out, key=lambda o: (o[0], o[2], order.index(o[1])))


def _operation(method: str, path: str, anchor: str, op: Mapping[str, Any]) -> str:
    parts = [
        f'<article class="operation" id="{anchor}"><h3><span class="method {method}">{method.upper()}</span> '
        f'<code>{_e(path)}</code></h3><p class="summary">{_e(op.get("summary", ""))}</p>'
    ]
    if op.get("description"):
        parts.append(f'<p class="description">{_e(op["description"])}</p>')
    params = op.get("parameters") or []
    if params:
        rows = "".join(
            f"<tr><td><code>{_e(p.get('name', ''))}</code></td><td>{_e(p.get('in', ''))}</td>"
            f"<td>{'yes' if p.get('required') else ''}</td><td>{_type(p.get('schema', {}))}</td>"
            f"<td>{_e(p.get('description') or p.get('schema', {}).get('description', ''))}"
            f"{_constraints(p.get('schema', {}))}</td></tr>"
            for p in params
        )
        parts.append(
            "<h4>parameters</h4><table><tr><th>name</th><th>in</th><th>required</th><th>type</th>"
            f"<th>description</th></tr>{rows}</table>"
        )
    body = op.get("requestBody")
    if body:
        content = body.get("content", {})
        rows = "".join(
            f"<tr><td>{_e(kind)}</td><td>{_type(media.get('schema', {}))}</td></tr>"
            for kind, media in content.items()
        )
        required = " (required)" if body.get("required") else ""
        parts.append(f"<h4>request body{required}</h4><table>{rows}</table>")
    rows = "".join(
        f"<tr><td><code>{_e(status)}</code></td><td>{_e(answer.get('description', ''))}</td><td>"
        + ", ".join(_type(m.get("schema", {})) for m in answer.get("content", {}).values())
        + "</td></tr>"
        for status, answer in sorted(op.get("responses", {}).items())
    )
    parts.append(
        f"<h4>responses</h4><table><tr><th>status</th><th>meaning</th><th>body</th></tr>{rows}</table>"
    )
    return "".join(parts) + "</article>"


def _schema_section(name: str, schema: Mapping[str, Any]) -> str:
    head = f'<article class="schema" id="schema-{_slug(name)}"><h3>{_e(name)}</h3>'
    if schema.get("description"):
        head += f'<p class="description">{_e(schema["description"])}</p>'
    properties: Mapping[str, Any] = schema.get("properties", {})
    if not properties:
        return head + f"<p>{_type(schema)}{_constraints(schema)}</p></article>"
    required = set(schema.get("required", []))
    rows = "".join(
        f"<tr><td><code>{_e(prop)}</code></td><td>{'yes' if prop in required else ''}</td>"
        f"<td>{_type(sub)}</td><td>{_e(sub.get('description', ''))}{_constraints(sub)}</td></tr>"
        for prop, sub in properties.items()
    )
    extra = "" if schema.get("additionalProperties", True) else "<p>no other properties</p>"
    return (
        head + "<table><tr><th>property</th><th>required</th><th>type</th><th>description</th></tr>"
        f"{rows}</table>{extra}</article>"
    )


def _type(schema: Mapping[str, Any]) -> str:
    """A schema's type as HTML: links for ``$ref``, ``a | b`` for unions, ``array of x``, enums."""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f'<a href="#schema-{_slug(name)}">{_e(name)}</a>'
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return " | ".join(_type(s) for s in schema[union])
    if "allOf" in schema:
        return " &amp; ".join(_type(s) for s in schema["allOf"])
    if "const" in schema:
        return f"<code>{_e(json.dumps(schema['const']))}</code>"
    if "enum" in schema:
        return " | ".join(f"<code>{_e(json.dumps(v))}</code>" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return "array of " + _type(schema.get("items", {}))
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return "object of " + _type(schema["additionalProperties"])
    if isinstance(kind, list):
        return " | ".join(_e(str(k)) for k in kind)
    return _e(str(kind)) if kind else "any"


def _constraints(schema: Mapping[str, Any]) -> str:
    found = [
        f"{label} {schema[key] if key == 'pattern' else json.dumps(schema[key])}"  # a pattern as written
        for key, label in _CONSTRAINTS
        if key in schema
    ]
    return f' <span class="constraints">({_e("; ".join(found))})</span>' if found else ""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


@cache
def _stylesheet() -> str:
    return resources.files("memstack.api").joinpath("assets/reference.css").read_text(encoding="utf-8")
