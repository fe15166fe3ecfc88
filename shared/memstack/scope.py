"""``Scope``: who a call acts for — a resource and, for thread operations, one of its threads.

The trusted caller names both (DESIGN.md "Who uses it and how"); the facade checks them once at the edge
and passes the value inward, so the use cases and layers never re-validate bare id strings.
"""

from __future__ import annotations

from dataclasses import dataclass

from memstack.errors import InvalidInput
from memstack.model import check_id, check_routable_id


@dataclass(frozen=True, slots=True)
class Scope:
    """A resource id and an optional thread id, both already validated.

    Build it with ``Scope.of`` (a thread operation) or ``Scope.resource`` (a resource-wide one); the plain
    constructor does not validate.

    Attributes:
        resource_id: the owner (a user, org or project); at most 256 characters, no control characters,
            routable (``memstack.model.check_routable_id``).
        thread_id: one conversation of that owner (as routable), or ``None`` for resource-wide operations.
    """

    resource_id: str
    thread_id: str | None = None

    @classmethod
    def of(cls, resource_id: object, thread_id: object, *, existing: bool = False) -> Scope:
        """A thread scope.

        Args:
            resource_id, thread_id: the ids, each a routable id (``check_routable_id``).
            existing: the ids name data already stored, which the call only reads or removes (the source of
                ``clone_thread``, ``delete_thread``): any valid id (``check_id``) is taken, so a thread stored
                under an id the routable rule now refuses can still be copied to a routable id and deleted.

        Raises:
            InvalidInput: either id is not a valid id (fields ``resource_id`` / ``thread_id``).
        """
        check = check_id if existing else check_routable_id
        return cls(check(resource_id, "resource_id"), check(thread_id, "thread_id"))

    @classmethod
    def resource(cls, resource_id: object, *, existing: bool = False) -> Scope:
        """A resource-wide scope (no thread).

        Args:
            resource_id: a routable id (``check_routable_id``).
            existing: the scope of a removal (``erase_resource``, ``delete_messages``): any valid id
                (``check_id``), so a resource stored under an id the routable rule now refuses can still be
                erased.

        Raises:
            InvalidInput: ``resource_id`` is not a valid id.
        """
        return cls((check_id if existing else check_routable_id)(resource_id, "resource_id"))

    @classmethod
    def for_working_memory(cls, resource_id: object, thread_id: object | None, scope: str) -> Scope:
        """The scope of a working-memory call: ``thread_id`` may be omitted in resource scope.

        Raises:
            InvalidInput: a bad id, or no ``thread_id`` in thread scope.
        """
        if thread_id is None:
            if scope != "resource":
                raise InvalidInput(
                    "thread_id is required for thread-scoped working memory", field="thread_id"
                )
            return cls.resource(resource_id)
        return cls.of(resource_id, thread_id)

    @property
    def thread(self) -> str:
        """The thread id.

        Raises:
            InvalidInput: this is a resource-wide scope (field ``thread_id``).
        """
        if self.thread_id is None:
            raise InvalidInput("thread_id is required here", field="thread_id")
        return self.thread_id

    def with_thread(self, thread_id: str) -> Scope:
        """The same resource, another (already validated) thread."""
        return Scope(self.resource_id, thread_id)
