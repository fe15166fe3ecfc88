"""The OpenAPI 3 document of the HTTP API, generated from the resolver (committed as docs/openapi.json).

    python -m memstack.api.openapi > docs/openapi.json

Powertools documents its own validation error (422); this API answers every error with ``ErrorOut``
(docs/api.md), so the document is rewritten to say so, and gains the SigV4 security scheme of API Gateway.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic import BaseModel

from memstack.api import ids, schemas
from memstack.api.params import with_powertools_markers
from memstack.model import MAX_ID_LENGTH

TITLE = "Memstack API"
DESCRIPTION = (
    "Agent memory: threads, messages, context assembly, working memory, semantic recall and observational "
    "memory. Every route but /v1/health acts for one resource, named by the `resource_id` query parameter "
    "(the erasure route, DELETE /v1/resources/{resource_id}, names it in its path). "
    "Auth: IAM (SigV4, "
    "default) or, with MEMSTACK_AUTH=jwt, a JWT authorizer whose claim (MEMSTACK_JWT_RESOURCE_CLAIM, "
    'default `sub`) must equal `resource_id`. Errors: {"error": {"code", "message", "field"?}}. '
    "See docs/api.md."
)

ERROR_RESPONSES = {
    "400": "invalid_input: the request is malformed, or names an unknown or repeated query parameter "
    "(field names the offending part)",
    "403": "forbidden: resource_id differs from the token's claim (JWT mode)",
    "404": "not_found: no such thread for this resource, or no such route",
    "405": "method_not_allowed: the path exists for other methods (listed in the Allow header)",
    "409": "conflict: the id exists, or a concurrent write won every retry",
    "413": "payload_too_large: a body, count or size limit",
    "415": "unsupported_media_type: the body is not application/json (field content-type)",
    "429": "throttled: a backend throttled the request; retry with backoff",
    "500": "internal: an unexpected error (no details)",
    "502": "observation_failed, reflection_failed: the Observer or Reflector answered with nothing usable",
    "503": "unavailable: a backend failed; retry later",
}

_QUERY_MODELS: tuple[type[BaseModel], ...] = (
    schemas.ListThreadsQuery,
    schemas.ListMessagesQuery,
    schemas.IndexHealthQuery,
    schemas.OptionsQuery,
    schemas.ResourceQuery,
)


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3 document of every route (``create_app`` with all routes), as a dict."""
    from memstack.api.app import create_app
    from memstack.api.auth import AuthConfig
    from memstack.api.routes.health import _version

    app = create_app(_no_memory, auth=AuthConfig())
    for route in app._routes():  # this resolver only documents: Powertools reads its own markers
        route.func = with_powertools_markers(route.func)
    doc: dict[str, Any] = json.loads(
        app.get_openapi_json_schema(title=TITLE, version=_version(), description=DESCRIPTION)
    )
    components = doc.setdefault("components", {})
    found = components.setdefault("schemas", {})
    by_fields = {frozenset(m.model_fields): _query_parameters(m, found) for m in _QUERY_MODELS}
    error_ref = {"$ref": "#/components/schemas/ErrorOut"}
    for methods in doc["paths"].values():
        for operation in methods.values():
            responses = operation["responses"]
            responses.pop("422", None)
            responses.pop("500", None)
            if "204" in responses:
                responses["204"] = {"description": "No Content"}
            for status, text in ERROR_RESPONSES.items():
                responses[status] = {
                    "description": text,
                    "content": {"application/json": {"schema": error_ref}},
                }
            params = operation.get("parameters", [])
            query = by_fields.get(frozenset(p["name"] for p in params if p.get("in") == "query"), {})
            for param in params:
                if param.get("in") == "path":
                    param["schema"] = dict(ROUTABLE_ID_SCHEMA)
                    param["description"] = PATH_DESCRIPTIONS.get(param["name"], "")
                elif param.get("in") == "query" and param["name"] in query:
                    param.pop("schema", None)
                    param.update(query[param["name"]])
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        found.pop(name, None)
    error_schema = schemas.ErrorOut.model_json_schema(ref_template="#/components/schemas/{model}")
    found.update(error_schema.pop("$defs", {}))
    found["ErrorOut"] = error_schema
    components["schemas"] = dict(sorted(found.items()))
    components["securitySchemes"] = {
        "sigv4": {
            "type": "apiKey",
            "name": "Authorization",
            "in": "header",
            "description": "AWS Signature Version 4 (IAM auth, the default).",
            "x-amazon-apigateway-authtype": "awsSigv4",
        }
    }
    doc["security"] = [{"sigv4": []}]
    return doc


ID_PATTERN = "^[^\\x00-\\x1f\\x7f]*[^\\s\\x00-\\x1f\\x7f][^\\x00-\\x1f\\x7f]*$"
"""An id (``memstack.model.check_id``): no control characters, not only whitespace."""

ROUTABLE_ID_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_ID_LENGTH,
    "pattern": f"^(?!\\.\\.?$)(?! +$){ids.ROUTABLE_ID.pattern}$",
}
"""A path id the resolver can route (``memstack.api.ids``; ``\\w`` is Unicode): not ``.`` or ``..``, not only
spaces."""

PATH_DESCRIPTIONS = {
    "thread_id": f"The thread. A routable id: it {ids.RULE}.",
    "resource_id": f"The resource (owner) the call acts for. A routable id: it {ids.RULE}.",
}


def _query_parameters(model: type[BaseModel], components: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each query parameter's OpenAPI fields from a pydantic query model: the real bounds, lengths and
    enums (Powertools writes only the type), and JSON-typed parameters as ``content: application/json``
    with their schema. Referenced models are added to ``components``."""
    out: dict[str, dict[str, Any]] = {}
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(schema.get("$defs", {}))
    for name, prop in schema["properties"].items():
        info = model.model_fields[name]
        field: dict[str, Any] = {"required": info.is_required()}
        if info.description:
            field["description"] = info.description
        branch = next((b for b in prop.get("anyOf", [prop]) if b.get("type") != "null"), prop)
        branch = {k: v for k, v in branch.items() if k not in ("title", "description", "default")}
        if branch.get("contentMediaType") == "application/json":
            field["content"] = {"application/json": {"schema": branch["contentSchema"]}}
        else:
            if prop.get("default") is not None:
                branch["default"] = prop["default"]
            if name == "resource_id":
                branch["pattern"] = ID_PATTERN
            field["schema"] = branch
        out[name] = field
    return out


def _no_memory() -> Any:  # the document never calls a route
    raise RuntimeError("no Memory: this resolver only documents the routes")


def render() -> str:
    """The document as committed: indented JSON, keys in generation order, one trailing newline."""
    return json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    """Print the document to stdout."""
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
