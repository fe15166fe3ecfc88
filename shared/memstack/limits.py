"""``SizeLimit``: a text field's size limit, reported as a size limit (HTTP 413), not as malformed input.

Kept apart from ``model`` and ``config`` (both use it) so that neither imports the other for it; pydantic's
parts are imported when a model using it is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SizeLimit:
    """A text field's size limit, as ``Annotated[str, SizeLimit(256)]`` (JSON Schema ``maxLength``), whose
    excess is a size limit, not a malformed value: pydantic reports it with the error type
    ``payload_too_large``, which ``errors.from_validation`` raises as ``PayloadTooLarge`` (HTTP 413), as
    every other size limit answers (a title, a message, metadata; docs/api.md "Errors"). Ids keep
    ``max_length``: an id too long is not an id (400, docs/api.md "Threads").

    Attributes:
        chars: the most characters the text may have.
    """

    chars: int

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> Any:
        out = handler(schema)
        out["maxLength"] = self.chars
        return out

    def _check(self, value: str) -> str:
        if len(value) > self.chars:
            from pydantic_core import PydanticCustomError

            from memstack.errors import PayloadTooLarge

            raise PydanticCustomError(
                PayloadTooLarge.code, "longer than the limit of {limit} characters", {"limit": self.chars}
            )
        return value
