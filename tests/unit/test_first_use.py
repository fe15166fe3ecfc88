"""What a new user hits first (issue 16, item 4): each friction point fixed at its mechanism.

The OpenAI-compatible endpoint is mocked with respx and answered by the scripted Observer/Reflector, so the
demo runs the real OpenAI adapter end to end without a network.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import respx

from memstack import InvalidInput, Memory
from memstack.adapters.testing import ScriptedChatModel
from memstack.cli import main
from tests.openai_support import scripted_completion

ROOT = Path(__file__).resolve().parents[2]
BASE_URL = "http://llm.test/v1"
_OPENAI_NAMES = (
    "OPENAI_API_KEY",
    "MEMSTACK_OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "MEMSTACK_OPENAI_BASE_URL",
    "MEMSTACK_OPENAI_API_KEY_SECRET_ARN",
    "MEMSTACK_EMBEDDER",
    "MEMSTACK_CHAT_PROVIDER",
    "MEMSTACK_CHAT_MODEL",
    "MEMSTACK_OPTIONS",
    "MEMSTACK_DB_PATH",
    "MEMSTACK_BACKEND",
)


@pytest.fixture(autouse=True)
def no_model_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _OPENAI_NAMES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def keyless_endpoint() -> Iterator[tuple[respx.MockRouter, ScriptedChatModel]]:
    """A mocked OpenAI-compatible server at ``BASE_URL`` answering chat completions with the scripted
    Observer/Reflector; it refuses any request that carries an ``Authorization`` header."""
    scripted = ScriptedChatModel()

    def answer(request: httpx.Request) -> httpx.Response:
        if "authorization" in request.headers:
            return httpx.Response(400, json={"error": {"message": "this server takes no key"}})
        return scripted_completion(scripted, request)

    with respx.mock(base_url=BASE_URL, assert_all_called=False) as router:
        router.post("/chat/completions").mock(side_effect=answer)
        yield router, scripted


def test_given_the_shipped_data_and_only_a_base_url_when_demo_observes_at_its_default_threshold_then_the_observer_runs(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    keyless_endpoint: tuple[respx.MockRouter, ScriptedChatModel],
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", BASE_URL)  # no key: a local server that needs none
    _, scripted = keyless_endpoint

    # no --data (the repository's data/locomo), no --message-tokens (the demo's default threshold)
    code = main(["demo", "--embedder", "hash", "--quiet", "--observational", "--conversations", "1"])

    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "SKIPPED" not in captured.err and "observational memory on" in captured.err
    assert "locomo-dev-2.json.gz" in captured.err, "the demo should read the repository's own data"
    om = next(line for line in captured.out.splitlines() if line.startswith("OBSERVATIONAL "))
    figures = dict(part.split("=") for part in om.split()[1:])
    assert int(figures["observer_calls"]) >= 3, om
    assert int(figures["observed_messages"]) > 100, om
    assert int(figures["failures"]) == 0, om
    assert scripted.count("observer") == int(figures["observer_calls"])


def test_given_only_a_base_url_when_build_needs_a_chat_model_then_it_is_keyless_and_sends_no_key(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    keyless_endpoint: tuple[respx.MockRouter, ScriptedChatModel],
) -> None:
    from memstack.bootstrap import build
    from memstack.settings import load_settings

    monkeypatch.setenv("OPENAI_BASE_URL", BASE_URL)
    router, _ = keyless_endpoint
    settings = load_settings(db_path=tmp_path / "m.db", embedder="hash")

    with build(settings, options={"observational_memory": True}) as memory:
        assert memory.chat_model is not None
        result = memory.chat_model.complete([{"role": "user", "content": "hello"}])

    assert result.text and router.calls.call_count == 1
    assert "authorization" not in router.calls.last.request.headers


def test_given_neither_key_nor_base_url_when_the_openai_adapter_is_built_then_the_error_names_both() -> None:
    from memstack.adapters.openai.chat import OpenAIChatModel

    with pytest.raises(InvalidInput, match="OPENAI_API_KEY.*OPENAI_BASE_URL"):
        OpenAIChatModel("gpt-4o-mini", api_key=None, base_url=None)


def test_given_chat_settings_when_memory_local_turns_on_observational_memory_then_it_builds_the_model_as_build_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", BASE_URL)
    monkeypatch.setenv("MEMSTACK_CHAT_MODEL", "my-local-model")

    with Memory.local(":memory:", embedder="hash", observational_memory=True) as memory:
        assert memory.chat_model is not None
        assert memory.chat_model.model_id == "openai/my-local-model"


def test_given_no_chat_settings_when_memory_local_turns_on_observational_memory_then_the_error_says_what_to_pass() -> (
    None
):
    with pytest.raises(InvalidInput) as caught:
        Memory.local(":memory:", embedder="hash", observational_memory=True)

    message = caught.value.message
    assert "OPENAI_API_KEY" in message and "OPENAI_BASE_URL" in message and "chat_model=" in message


def test_given_a_key_in_the_environment_when_memory_local_and_serve_open_the_default_database_then_one_embedder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from memstack.serve import build_memory

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # nothing is embedded: no request is made
    monkeypatch.chdir(tmp_path)  # the default database, .memstack/memory.db, of this folder

    with Memory.local() as memory:
        local_model = memory.embedder.model_id
    with build_memory() as served:
        served_model = served.embedder.model_id

    assert local_model == served_model == "openai/text-embedding-3-small@1536"


def test_given_a_database_of_another_embedder_when_opened_then_the_error_names_the_embedder_flag_and_reindex(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from memstack.serve import build_memory

    path = str(tmp_path / "m.db")
    Memory.local(path, embedder="hash").close()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    with pytest.raises(InvalidInput) as caught:
        build_memory(db=path)  # the default rule now picks openai

    message = caught.value.message
    assert "--embedder hash" in message and "memstack reindex" in message
    assert caught.value.field == "embedder"


def test_given_max_tokens_none_when_message_history_is_configured_then_it_means_no_budget() -> None:
    from memstack.config import MemoryOptions

    options = MemoryOptions.parse({"message_history": {"max_tokens": None}})

    assert options.message_history is None
    with Memory.local(":memory:", embedder="hash", message_history={"max_tokens": None}) as memory:
        memory.save_messages(thread_id="t", resource_id="r", messages=["hello", "world"])
        ctx = memory.context(
            thread_id="t", resource_id="r", message="again", options={"message_history": {"max_tokens": None}}
        )
    assert len(ctx.history_ids) == 2


def test_given_a_path_when_build_is_called_with_it_then_a_clear_error_names_the_calls_that_take_one() -> None:
    from memstack.bootstrap import build

    with pytest.raises(InvalidInput, match=r"Memory\.local\('m\.db'\)") as caught:
        build("m.db")  # type: ignore[arg-type]

    assert caught.value.field == "settings"


def test_given_powertools_dev_mode_when_the_api_is_used_as_a_library_then_nothing_reaches_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from memstack.api.app import create_app
    from memstack.api.http import handle_http

    monkeypatch.setenv("POWERTOOLS_DEV", "true")  # Powertools' verbose mode, common on developer machines
    with Memory.local(":memory:", embedder="hash") as memory:
        app = create_app(memory)
        body = b'{"messages": [{"role": "user", "content": "my secret plan"}]}'
        answer = handle_http(app, "POST", "/v1/threads/t1/messages", "resource_id=user-secret-42", [], body)
        missing = handle_http(app, "GET", "/v1/threads/nope", "resource_id=user-secret-42", [], None)

    assert (answer.status, missing.status) == (200, 404)
    out = capsys.readouterr().out
    assert "user-secret-42" not in out and "my secret plan" not in out
    assert out == ""


_UNCLOSED_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from memstack import Memory
    from memstack.adapters.testing import ChatCall, ScriptedChatModel

    def slow(call: ChatCall) -> str:
        time.sleep(0.3)
        return chat.observe(call.last_content) if call.kind == "observer" else "A title"

    chat = ScriptedChatModel(respond=slow)
    memory = Memory.local(
        sys.argv[1], embedder="hash", chat_model=chat,
        observational_memory={"observation": {"message_tokens": 200, "buffer_tokens": False}},
    )
    for i in range(12):
        memory.save_messages(
            thread_id="t", resource_id="r",
            messages=[f"Message {i}: I went hiking near lake number {i} with my sister and we talked a lot."],
        )
    # no close(), no settled(): the script just ends
    """
)


def test_given_a_script_that_exits_without_close_when_observation_is_queued_then_it_is_drained_with_a_warning(
    tmp_path: Path,
) -> None:
    db = tmp_path / "m.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "shared")}
    done = subprocess.run(
        [sys.executable, "-c", _UNCLOSED_SCRIPT, str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )

    assert done.returncode == 0, done.stderr
    assert "still queued at exit" in done.stderr and "close()" in done.stderr
    assert "abandoned" not in done.stderr
    with Memory.local(str(db), embedder="hash") as memory:
        record = memory.get_observation_record(resource_id="r", thread_id="t")
    assert record is not None and record.observed_seq("t") > 0, "the queued observation was dropped"
