"""Importing the ``openai`` SDK without building the types it never uses.

``openai/__init__.py`` runs ``from . import types``, and ``openai._client`` reaches
``openai.types.responses`` (through ``openai.lib._tools``): the package ``__init__`` files of
``openai.types`` and its sub-packages re-export every generated request and response model, so one
``import openai`` defines several hundred pydantic models. Memstack calls two endpoints (embeddings and chat
completions), which need a few dozen of them. Measured on openai 3.57 (CPU of a fresh interpreter, a loaded
2-core build machine): ``import openai`` took 530-570 ms eagerly and 250-330 ms with the finder below; the
first ``client.embeddings`` then builds the embeddings types (about 50 ms more than eagerly).
``benchmarks/cold_start.py`` shows the effect on a function's first request.

``install`` (called by the deployed functions' composition root, ``bootstrap.memory_from_env``, before the
SDK's first import; never in a library user's process) puts in place a meta-path finder
that gives every *package* under ``openai.types`` a deferred ``__init__``: the package module exists at
once (with its ``__path__``, so its sub-modules import as usual), and its ``__init__.py`` runs on the first access to a name that is not one of its sub-modules
(``openai.types.CreateEmbeddingResponse``, ``from openai.types.chat import ChatCompletion``). Every name
stays reachable and means what it means eagerly; only the order of module execution changes. Modules (not
packages) load exactly as without the finder.

The finder is installed once per process, before the SDK's first import, and only for ``openai.types``; if
``openai`` was already imported (by the host application) nothing changes.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["LAZY_PACKAGES", "install"]

LAZY_PACKAGES = "openai.types"
"""The package (and its sub-packages) whose ``__init__`` runs on first use of a re-exported name."""

_lock = threading.Lock()
_finder: _DeferredInitFinder | None = None


class _DeferredInitLoader(importlib.abc.Loader):
    """Creates the package module as the real loader would, but runs its ``__init__.py`` only when a name
    that is not a sub-module is first looked up on it (module ``__getattr__``, PEP 562)."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self._real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module object; the import system sets __path__, __spec__, __file__

    def exec_module(self, module: ModuleType) -> None:
        real = self._real
        search = list(getattr(module, "__path__", ()))
        lock = threading.RLock()

        def __getattr__(name: str) -> Any:  # noqa: N807 - PEP 562's name
            if name.startswith("__"):
                raise AttributeError(name)
            if _is_submodule(search, name):  # ``from openai.types import embedding_create_params``
                return importlib.import_module(f"{module.__name__}.{name}")
            with lock:
                if module.__dict__.get("__getattr__") is __getattr__:
                    del module.__dict__["__getattr__"]
                    real.exec_module(module)  # the package's own __init__, once
            return getattr(module, name)

        module.__getattr__ = __getattr__  # type: ignore[method-assign]


def _is_submodule(search: Sequence[str], name: str) -> bool:
    return any(
        os.path.isfile(os.path.join(entry, f"{name}.py")) or os.path.isdir(os.path.join(entry, name))
        for entry in search
    )


class _DeferredInitFinder(importlib.abc.MetaPathFinder):
    """Finds packages under ``LAZY_PACKAGES`` as ``PathFinder`` does, with a deferred ``__init__``."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != LAZY_PACKAGES and not fullname.startswith(LAZY_PACKAGES + "."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.submodule_search_locations is None or spec.loader is None:
            return spec  # a module, or not found: the usual path
        spec.loader = _DeferredInitLoader(spec.loader)
        return spec


def install() -> bool:
    """Install the finder (once per process) unless ``openai`` is already imported; call it right before
    ``import openai``.

    Returns:
        ``True`` if the finder is in place for the SDK's first import (now or earlier).
    """
    global _finder
    with _lock:
        if _finder is None:
            if "openai" in sys.modules:
                return False
            _finder = _DeferredInitFinder()
            sys.meta_path.insert(0, _finder)
        return True
