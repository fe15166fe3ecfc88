"""The routes, one module per area; each ``register(app)`` adds its routes to a ``MemstackResolver``.

Every route but health takes ``resource_id`` as a query parameter (docs/api.md) and makes one ``Memory``
call for that resource.
"""
