"""JSON-mode schemas (spec §2.7 "Schema mode"): a JSON Schema dict or a pydantic model class, turned into
the JSON Schema shown to the model and a validator for the merged document.

Dict schemas are validated with ``jsonschema`` (the draft named by ``$schema``, else 2020-12); pydantic
model classes with the model's own validator, so custom validators run too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from memstack.errors import InvalidInput

MAX_SCHEMA_BYTES = 64 * 1024
"""Largest accepted schema, as JSON: it is shown to the model on every turn."""


def check_json_schema(schema: dict[str, Any]) -> None:
    """Check that ``schema`` is a JSON Schema describing an object.

    Raises:
        ValueError: not a valid schema, not an object schema, or larger than ``MAX_SCHEMA_BYTES``
            (pydantic turns it into ``InvalidInput`` naming ``working_memory.schema``).
    """
    import jsonschema

    try:
        encoded = json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"schema is not JSON: {exc}") from None
    if len(encoded.encode()) > MAX_SCHEMA_BYTES:
        raise ValueError(f"schema is larger than the limit of {MAX_SCHEMA_BYTES} bytes as JSON")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"schema is not a valid JSON Schema: {exc.message}") from None
    if schema.get("type", "object") != "object":
        raise ValueError("schema must describe an object (type 'object')")


@dataclass(frozen=True, slots=True)
class MemorySchema:
    """A JSON-mode schema, ready to show and to validate against.

    Attributes:
        json: the JSON Schema (for a model class, its ``model_json_schema()``); ``$defs`` included.
        model: the pydantic model class, when one was given.
    """

    json: dict[str, Any]
    model: type[BaseModel] | None = None

    @classmethod
    def of(cls, schema: dict[str, Any] | type[BaseModel]) -> MemorySchema:
        """Wrap a configured schema (``WorkingMemoryOptions.json_schema``)."""
        if isinstance(schema, dict):
            return cls(json=schema)
        return cls(json=schema.model_json_schema(), model=schema)

    def validate(self, document: dict[str, Any]) -> None:
        """Check the merged document.

        Raises:
            InvalidInput: the first violation, as ``<path>: <reason>`` (field ``working_memory``).
        """
        if self.model is not None:
            try:
                self.model.model_validate_json(json.dumps(document))
            except ValidationError as exc:
                err = exc.errors()[0]
                where = ".".join(str(p) for p in err["loc"]) or "(root)"
                raise InvalidInput(f"{where}: {err['msg']}", field="working_memory") from None
            return
        import jsonschema

        validator = jsonschema.validators.validator_for(self.json)(self.json)
        error = jsonschema.exceptions.best_match(validator.iter_errors(document))
        if error is not None:
            where = ".".join(str(p) for p in error.absolute_path) or "(root)"
            raise InvalidInput(f"{where}: {error.message}", field="working_memory")


def resolve(node: Any, root: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """``node`` with a local ``$ref`` (``#/$defs/...`` or ``#/definitions/...``) followed; ``{}`` when it
    cannot be followed (remote or cyclic past 32 hops)."""
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and depth < 32:
        ref: str = node["$ref"]
        if not ref.startswith("#/"):
            return {}
        target: Any = root
        for key in ref[2:].split("/"):
            target = target.get(key) if isinstance(target, dict) else None
        node, depth = target, depth + 1
    return node if isinstance(node, dict) else {}


def branch_for(value: Any, node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """The branch of a nullable ``anyOf``/``oneOf`` (pydantic's ``X | None``) matching ``value``'s kind
    (object or array); ``node`` itself when there is no single such branch."""
    node = resolve(node, root)
    branches = node.get("anyOf") or node.get("oneOf")
    if not isinstance(branches, list):
        return node
    kind = "array" if isinstance(value, list) else "object"
    matching = [b for b in (resolve(b, root) for b in branches) if b.get("type") == kind]
    return matching[0] if len(matching) == 1 else node
