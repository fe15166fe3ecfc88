"""Adapters: implementations of the ports in ``memstack.ports``. Imported only when chosen."""
