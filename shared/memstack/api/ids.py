"""Which thread ids the HTTP API can address in a path (docs/api.md "Thread ids over HTTP").

A route such as ``/v1/threads/<thread_id>`` matches the (percent-decoded) path segment with the pattern
Powertools builds for every ``<name>`` in a rule: ``[{_SAFE_URI}{_UNSAFE_URI}\\w]+`` (see
``aws_lambda_powertools.event_handler.api_gateway._SAFE_URI``/``_UNSAFE_URI``/
``_NAMED_GROUP_BOUNDARY_PATTERN``). A thread whose id has any other character (``/``, ``#``, ``?``, ``"``,
``\\``, a backtick, ``€``, an emoji, a zero-width space, a control character …) could be created but never
reached again, so the API refuses such ids where they enter through a body. The character classes are
imported from Powertools, so the two cannot drift. ``.`` and ``..`` are refused too: HTTP clients collapse
them as dot segments. The library (``Memory``) accepts any id; this rule is the HTTP API's only.
"""

from __future__ import annotations

import re

# Private to Powertools, but the very pattern its resolver matches path parameters with (pinned >= 3).
from aws_lambda_powertools.event_handler.api_gateway import _SAFE_URI, _UNSAFE_URI

ROUTABLE_ID = re.compile(rf"[{_SAFE_URI}{_UNSAFE_URI}\w]+")
"""A path parameter Powertools can match (``fullmatch``); ``\\w`` is Unicode (letters, digits, ``_``)."""

ROUTABLE_SPECIALS = _SAFE_URI + _UNSAFE_URI.replace("\\", "")
"""The characters besides letters, digits and ``_`` allowed in a routable id:
``-._~()'!*:@,;=+&$%<> []{}|^`` (space included)."""

DOT_SEGMENTS = frozenset({".", ".."})

RULE = (
    "may only hold letters, digits, '_' and the characters "
    f"{ROUTABLE_SPECIALS!r}, and may not be '.' or '..' (the HTTP API must be able to route it)"
)
"""The rule, as error messages state it."""


def is_routable(thread_id: str) -> bool:
    """Whether ``thread_id`` can be addressed as a path segment of the HTTP API."""
    return thread_id not in DOT_SEGMENTS and ROUTABLE_ID.fullmatch(thread_id) is not None
