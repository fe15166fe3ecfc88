"""The HTTP API: the Powertools resolver shared by the Lambda functions (``functions/api``,
``functions/context``) and ``memstack serve``; routes in docs/api.md, the OpenAPI document in
docs/openapi.json (``python -m memstack.api.openapi``).

    from memstack.api import create_app
    app = create_app(memory)                     # a Memory, or a provider such as memory_from_env
    app.resolve(api_gateway_rest_event, context) # → the proxy response dict
"""

from memstack.api.app import MAX_BODY_BYTES, MemstackResolver, create_app
from memstack.api.auth import AuthConfig
from memstack.api.http import HttpResponse, handle_http, to_event, to_http_response

__all__ = [
    "MAX_BODY_BYTES",
    "AuthConfig",
    "HttpResponse",
    "MemstackResolver",
    "create_app",
    "handle_http",
    "to_event",
    "to_http_response",
]
