"""Which thread and resource ids the HTTP API can address in a path (docs/api.md "Ids over HTTP").

A route such as ``/v1/threads/<thread_id>`` matches the (percent-decoded) path segment with the pattern
Powertools builds for every ``<name>`` in a rule: ``[{_SAFE_URI}{_UNSAFE_URI}\\w]+`` (see
``aws_lambda_powertools.event_handler.api_gateway._SAFE_URI``/``_UNSAFE_URI``/
``_NAMED_GROUP_BOUNDARY_PATTERN``). The rule itself lives in the core (``memstack.model.is_routable``,
``check_routable_id``), so ``Memory`` refuses the ids the API could not reach; this module names it for the
API's schemas and OpenAPI document.
"""

from __future__ import annotations

from memstack.model import ROUTABLE_ID, ROUTABLE_RULE, ROUTABLE_SPECIALS, is_routable

RULE = ROUTABLE_RULE
"""The rule, as error messages state it."""

NOT_ROUTABLE = "id_not_routable"
"""The validation error type of an id the rule refuses, in a path, a query or a body."""

PATH_IDS = ("thread_id", "resource_id")
"""The routes' path parameters that hold a thread or resource id."""

__all__ = ["NOT_ROUTABLE", "PATH_IDS", "ROUTABLE_ID", "ROUTABLE_SPECIALS", "RULE", "is_routable"]
