"""JSON-mode schemas (spec §2.7 "Schema mode"): a JSON Schema dict or a pydantic model class, turned into
the JSON Schema shown to the model and a validator for the merged document.

Dict schemas are validated with ``jsonschema`` (the draft named by ``$schema``, else 2020-12); pydantic
model classes with the model's own validator, so custom validators run too.

A schema is caller input (a per-call option over HTTP), so its ``$ref``s resolve only inside the schema itself
and against the JSON Schema meta-schemas: nothing is ever retrieved. jsonschema's default resolution opens any
URL or ``file://`` path a ``$ref`` names (and echoes what it read in the validation error), which would let a
caller make the service fetch URLs and read its own files. Every ``$ref`` must resolve when the schema is
accepted, so validation never meets an unresolvable one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from memstack.errors import InvalidInput

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from referencing._core import Resolver

MAX_SCHEMA_BYTES = 64 * 1024
"""Largest accepted schema, as JSON: it is shown to the model on every turn."""


def check_json_schema(schema: dict[str, Any]) -> None:
    """Check that ``schema`` is a JSON Schema describing an object.

    Raises:
        ValueError: not a valid schema or not an object schema (pydantic turns it into ``InvalidInput``
            naming ``working_memory.schema``).
        pydantic_core.PydanticCustomError: larger than ``MAX_SCHEMA_BYTES``, of the type
            ``payload_too_large`` (``PayloadTooLarge``, naming ``working_memory.schema``).
    """
    import jsonschema

    try:
        encoded = json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"schema is not JSON: {exc}") from None
    if len(encoded.encode()) > MAX_SCHEMA_BYTES:
        from pydantic_core import PydanticCustomError

        from memstack.errors import PayloadTooLarge

        raise PydanticCustomError(  # a size limit: PayloadTooLarge (errors.from_validation)
            PayloadTooLarge.code, f"schema is larger than the limit of {MAX_SCHEMA_BYTES} bytes as JSON"
        )
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"schema is not a valid JSON Schema: {exc.message}") from None
    if schema.get("type", "object") != "object":
        raise ValueError("schema must describe an object (type 'object')")
    _check_references(schema)


def _no_retrieval(uri: str) -> Any:
    """The registry's retriever: refuses every URI that is neither in the schema nor a meta-schema."""
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs field


def validator_for(schema: dict[str, Any]) -> Validator:
    """A jsonschema validator for ``schema`` whose ``$ref``s resolve only within ``schema`` and the JSON Schema
    meta-schemas (jsonschema adds those to the registry); any other reference is unresolvable, never fetched."""
    import jsonschema
    from referencing import Registry

    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=Registry(retrieve=_no_retrieval))  # type: ignore[call-arg]


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
"""Keywords whose values are instances, not schemas: a ``"$ref"`` key inside them is data."""


def _check_references(schema: dict[str, Any]) -> None:
    """Resolve every ``$ref`` / ``$dynamicRef`` in ``schema`` (from its own base URI, entering each embedded
    resource's ``$id``) without retrieving anything.

    Raises:
        ValueError: a reference that does not resolve inside the schema, naming it.
    """
    from jsonschema_specifications import REGISTRY as SPECIFICATIONS
    from referencing import Registry
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012, specification_with

    dialect = schema.get("$schema")
    specification = (
        specification_with(dialect, default=DRAFT202012) if isinstance(dialect, str) else DRAFT202012
    )
    root = specification.create_resource(schema)
    registry = SPECIFICATIONS.combine(Registry(retrieve=_no_retrieval))  # type: ignore[call-arg]  # attrs alias

    def walk(node: Any, resolver: Resolver[Any], top: bool) -> None:
        if isinstance(node, list):
            for value in node:
                walk(value, resolver, False)
            return
        if not isinstance(node, dict):
            return
        if not top and isinstance(specification.id_of(node), str):
            resolver = resolver.in_subresource(specification.create_resource(node))
        for key in ("$ref", "$dynamicRef"):
            ref = node.get(key)
            if isinstance(ref, str):
                try:
                    resolver.lookup(ref)
                except Unresolvable:
                    raise ValueError(
                        f"schema reference {ref!r} does not resolve inside the schema "
                        "(references to other documents or files are never followed)"
                    ) from None
        for key, value in node.items():
            if key not in _DATA_KEYWORDS:
                walk(value, resolver, False)

    walk(schema, registry.resolver_with_root(root), True)


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
        """Check the merged document: against the JSON Schema, or by the pydantic model in strict mode (JSON
        types as they are; JSON strings still stand for dates, UUIDs and the like, which JSON cannot carry).

        Raises:
            InvalidInput: the first violation, as ``<path>: <reason>`` (field ``working_memory``).
        """
        if self.model is not None:
            try:
                # strict: a value is valid only as the JSON type the model's schema gives it (``"12"`` is
                # not an ``int``), as the JSON Schema mode of the same model decides. Lax validation would
                # pass ``"12"`` while the stored document keeps the string, so the record would hold what
                # the schema does not mean; the model is told instead, and sends the value it meant.
                self.model.model_validate_json(json.dumps(document), strict=True)
            except ValidationError as exc:
                err = exc.errors()[0]
                where = ".".join(str(p) for p in err["loc"]) or "(root)"
                raise InvalidInput(f"{where}: {err['msg']}", field="working_memory") from None
            return
        import jsonschema
        from referencing.exceptions import Unresolvable

        try:
            error = jsonschema.exceptions.best_match(validator_for(self.json).iter_errors(document))
        except Unresolvable as exc:
            raise InvalidInput(
                f"schema reference does not resolve inside the schema: {exc}", field="working_memory.schema"
            ) from None
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
