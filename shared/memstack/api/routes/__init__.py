"""The routes, one module per area, each with its own Powertools ``APIGatewayRouter`` (``router``) that
``memstack.api.app`` includes into a resolver; no route module imports the app.

Every route but health takes ``resource_id`` as a query parameter (docs/api.md) and makes one ``Memory``
call for that resource (``memstack.api.deps.current_memory``).
"""
