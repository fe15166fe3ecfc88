"""The use cases behind the ``Memory`` facade, one module per concern: ``threads`` (threads, clones, the
erasure of a resource), ``messages`` (saves, listings, deletions, the stream indexer's work), ``background``
(observation, reflection and titles, in-process or on a schedule), ``working_memory`` and ``turns`` (context
and recall). Each knows only ports, the layers and the core modules."""
