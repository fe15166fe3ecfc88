"""Lambda ``context``: the hot path — ``POST /v1/threads/{thread_id}/context``, the routes of
``memstack.api.app.ROUTE_SETS["context"]`` that infra/api.py sends here — on a
function of its own, so it can be sized and kept warm apart from the other routes.

Wiring only: the same resolver as ``functions/api``, limited to the context routes, over the process-wide
``Memory`` built on the first request.
"""

from typing import Any

from memstack.deferred_init import defer_for_functions

defer_for_functions()  # before the resolver's import: Powertools' unused resolvers stay unimported

from memstack.api import create_app  # noqa: E402
from memstack.bootstrap import memory_from_env  # noqa: E402
from memstack.observability import API_GATEWAY_REQUEST_ID, lambda_handler  # noqa: E402
from memstack.snapstart import prime  # noqa: E402

app = create_app(memory_from_env, routes="context")


def resolve(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """API Gateway REST proxy event → proxy response (``statusCode``, ``multiValueHeaders``, ``body``)."""
    return app.resolve(event, context)


handler = lambda_handler(resolve, correlation_id_path=API_GATEWAY_REQUEST_ID)
"""``resolve`` with the function's logs, trace and metrics (memstack.observability)."""

prime(memory_from_env, app.resolve)  # SnapStart only: the snapshot holds the built Memory and route
