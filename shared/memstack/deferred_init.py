"""Packages whose ``__init__`` runs on the first use of a name it re-exports, not when a sub-module is
imported.

Importing ``a.b.c`` always runs ``a/b/__init__.py`` first. Some SDK packages re-export everything from
that file: ``openai.types`` (several hundred pydantic models; memstack.adapters.openai.sdk) and
``aws_lambda_powertools.event_handler`` (every resolver — AppSync with ``asyncio``, Bedrock agents, VPC
Lattice, Lambda function URLs — when a function needs only the API Gateway REST one, which its
sub-module ``api_gateway`` defines). ``defer`` installs a meta-path finder that gives such a package a
deferred ``__init__``: the package module exists at once (with its ``__path__``, so its sub-modules import
as usual), and its ``__init__.py`` runs on the first access to a name that is not one of its sub-modules
(``from openai.types.chat import ChatCompletion``, ``aws_lambda_powertools.event_handler.AppSyncResolver``).
Every name stays reachable and means what it means eagerly; only the order of module execution changes.
Modules (not packages) load exactly as without the finder.

The finder changes how those packages import for everything in the process (``dir(package)`` lists only
its sub-modules until a re-exported name is used), so only a process that Memstack owns installs it: the
Lambda functions (``defer_for_functions`` in ``functions/api`` and ``functions/context``) and their composition
root (``bootstrap.memory_from_env``, the OpenAI SDK's types).
A package already imported is left as it is.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

__all__ = ["DeferredInitFinder", "defer", "deferred_packages"]

_lock = threading.Lock()
_finder: DeferredInitFinder | None = None


class _DeferredInitLoader:
    """Creates the package module as the real loader would, but runs its ``__init__.py`` only when a name
    is first looked up on it (module ``__getattr__``, PEP 562) that is neither one of its sub-modules nor a
    plain re-export (``_reexports``)."""

    # a loader and a finder by their methods (the import system's protocols), not by ``importlib.abc``'s
    # base classes: importing ``importlib.abc`` imports ``importlib.resources`` and with it ``tempfile``,
    # ``shutil`` and the compression modules, a few ms of every function's init for two base classes

    def __init__(self, real: Loader) -> None:
        self._real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module object; the import system sets __path__, __spec__, __file__

    def exec_module(self, module: ModuleType) -> None:
        real = self._real
        search = list(getattr(module, "__path__", ()))
        lock = threading.RLock()
        origins: dict[str, tuple[str, str]] | None = None

        def __getattr__(name: str) -> Any:  # noqa: N807 - PEP 562's name
            nonlocal origins
            if name.startswith("__"):
                raise AttributeError(name)
            if _is_submodule(search, name):  # ``from openai.types import embedding_create_params``
                return importlib.import_module(f"{module.__name__}.{name}")
            with lock:
                if module.__dict__.get("__getattr__") is __getattr__:
                    if origins is None:
                        origins = _reexports(module)
                    if name in origins:  # ``from .api_gateway import Response``: that sub-module alone
                        where, attribute = origins[name]
                        value = getattr(importlib.import_module(where), attribute)
                        setattr(module, name, value)  # the object the __init__ would bind
                        return value
                    del module.__dict__["__getattr__"]
                    real.exec_module(module)  # the package's own __init__, once
            return getattr(module, name)

        module.__getattr__ = __getattr__  # type: ignore[method-assign]


def _reexports(package: ModuleType) -> dict[str, tuple[str, str]]:
    """The names the package's ``__init__.py`` binds by ``from <module> import <name> [as <alias>]`` at its
    top level, each to (module, name); empty when its source cannot be read. A name bound any other way
    (or more than once) is left out: looking it up runs the whole ``__init__``."""
    import ast  # only when a deferred package's re-export is first used

    origin = getattr(package.__spec__, "origin", None)
    try:
        with open(str(origin), encoding="utf-8") as source:
            tree = ast.parse(source.read())
    except (OSError, SyntaxError, ValueError):
        return {}
    found: dict[str, tuple[str, str]] = {}
    bound_otherwise: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and all(alias.name != "*" for alias in node.names):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package.__name__)
            for alias in node.names:
                name = alias.asname or alias.name
                if name in found:
                    bound_otherwise.add(name)
                found[name] = (base, alias.name)
        else:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    bound_otherwise.add(sub.id)
                elif isinstance(sub, ast.alias):
                    bound_otherwise.add(sub.asname or sub.name.split(".")[0])
                elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    bound_otherwise.add(sub.name)
    return {name: where for name, where in found.items() if name not in bound_otherwise}


def _is_submodule(search: Sequence[str], name: str) -> bool:
    return any(
        os.path.isfile(os.path.join(entry, f"{name}.py")) or os.path.isdir(os.path.join(entry, name))
        for entry in search
    )


class DeferredInitFinder:
    """Finds the deferred packages as ``PathFinder`` does, with a deferred ``__init__``.

    Attributes:
        exact: packages deferred themselves only (their sub-packages load as usual).
        trees: packages deferred together with every package under them.
    """

    def __init__(self) -> None:
        self.exact: set[str] = set()
        self.trees: set[str] = set()

    def covers(self, fullname: str) -> bool:
        """Whether the package ``fullname`` gets a deferred ``__init__``."""
        if fullname in self.exact or fullname in self.trees:
            return True
        return any(fullname.startswith(tree + ".") for tree in self.trees)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not self.covers(fullname):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.submodule_search_locations is None or spec.loader is None:
            return spec  # a module, or not found: the usual path
        spec.loader = cast("Loader", _DeferredInitLoader(spec.loader))
        return spec


def defer(package: str, *, subpackages: bool = False) -> bool:
    """Give ``package`` (and with ``subpackages`` every package under it) a deferred ``__init__`` from its
    first import on; installs the process's one finder the first time.

    Args:
        package: a dotted package name, e.g. ``"aws_lambda_powertools.event_handler"``.
        subpackages: also defer the packages under it (``openai.types.chat``, ...).

    Returns:
        ``True`` if the package will import deferred (now or since an earlier call); ``False`` if it was
        already imported, so nothing changes for it.
    """
    global _finder
    with _lock:
        if _finder is None:
            _finder = DeferredInitFinder()
            sys.meta_path.insert(0, _finder)
        if _finder.covers(package):
            return True
        if package in sys.modules:
            return False
        (_finder.trees if subpackages else _finder.exact).add(package)
        return True


def deferred_packages() -> frozenset[str]:
    """The packages given to ``defer`` so far (each with or without its sub-packages)."""
    with _lock:
        return frozenset() if _finder is None else frozenset(_finder.exact | _finder.trees)


FUNCTION_PACKAGES = ("aws_lambda_powertools.event_handler", "aws_lambda_powertools.utilities.data_classes")
"""What the HTTP functions (``functions/api``, ``functions/context``) defer before importing the resolver:
Powertools' event handler package, whose ``__init__`` imports every resolver (``asyncio`` with AppSync's)
where the functions use ``api_gateway``'s alone, and its event data classes, whose ``__init__`` imports
every event source's (S3, SQS, Kinesis, Bedrock, …) where the resolver needs the API Gateway, ALB and
VPC Lattice ones it names."""

PLUGINS_ENV = "PYDANTIC_DISABLE_PLUGINS"
"""pydantic's switch for its plugins (``__all__``: none). Left on, the first model built scans the metadata
of every installed distribution for ``pydantic`` entry points (``importlib.metadata``, with ``email``,
``csv`` and ``zipfile``); Memstack's functions use no pydantic plugin."""


def defer_for_functions() -> None:
    """Defer ``FUNCTION_PACKAGES`` and turn pydantic's plugin discovery off (``PLUGINS_ENV``, unless the
    environment sets it: a deployment that wants a plugin sets it to ``""``). Call it in a Lambda handler
    module, before ``import memstack.api``."""
    os.environ.setdefault(PLUGINS_ENV, "__all__")
    for package in FUNCTION_PACKAGES:
        defer(package)
