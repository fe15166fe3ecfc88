"""``memstack serve`` describes itself (issue 16, item 3): ``/openapi.json`` is the committed document,
``/docs`` a reference page rendered from it with the package's own stylesheet, and ``--options`` /
``--observational`` configure the memory beside ``MEMSTACK_OPTIONS``."""

from __future__ import annotations

import json
import re
import socket
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from memstack import Memory
from memstack.cli import main
from memstack.client import MemstackClient
from tests.e2e.serve_support import running_serve
from tests.served import serving

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "openapi.json"


class _Page(HTMLParser):
    """What a browser would load and link: external resources, anchors and the ids they point to."""

    def __init__(self) -> None:
        super().__init__()
        self.external: list[str] = []
        self.links: set[str] = set()
        self.ids: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        for name in ("src", "href"):
            value = found.get(name) or ""
            if value.startswith("#"):
                self.links.add(value[1:])
            elif value.startswith(("http:", "https:", "//")):
                self.external.append(value)
        if tag in ("script", "link"):
            self.external.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture(scope="module")
def url() -> object:
    with Memory.local(":memory:", embedder="hash") as memory, serving(memory) as base:
        yield base


def test_given_serve_when_openapi_json_is_fetched_then_it_is_the_committed_document_byte_for_byte(
    url: str,
) -> None:
    answer = httpx.get(f"{url}/openapi.json")

    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.content == COMMITTED.read_bytes(), "serve must answer exactly docs/openapi.json"


def test_given_serve_when_docs_is_fetched_then_every_operation_and_schema_is_on_a_self_contained_page(
    url: str,
) -> None:
    document = json.loads(COMMITTED.read_text())
    answer = httpx.get(f"{url}/docs")
    page = _Page()
    page.feed(answer.text)

    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    assert page.external == [], f"the page must load nothing from elsewhere: {page.external}"
    assert "font:" in answer.text and ".method.get" in answer.text, "the package's stylesheet is inlined"
    text = " ".join(page.text)
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            assert path in text and method.upper() in text
            assert operation["summary"].split(":")[0] in text, operation["summary"]
    for name in document["components"]["schemas"]:
        assert "schema-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") in page.ids, name
    broken = sorted(page.links - page.ids)
    assert not broken, f"links to nothing: {broken[:5]}"


def test_given_serve_when_docs_is_posted_to_then_405_with_allow_and_the_api_error_shape(url: str) -> None:
    answer = httpx.post(f"{url}/docs")

    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, HEAD"
    assert answer.json()["error"]["code"] == "method_not_allowed"


def test_given_bad_json_in_options_when_serve_starts_then_exit_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["serve", "--embedder", "hash", "--db", ":memory:", "--options", "{last_messages: 3}"])

    assert code == 2
    err = capsys.readouterr().err
    assert "--options must be a JSON object of memory options" in err and "character 1" in err


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("[1, 2]", "not list"),
        ('{"last_messages": "many"}', "last_messages"),
    ],
)
def test_given_options_that_are_not_memory_options_when_serve_starts_then_exit_2_naming_the_option(
    given: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["serve", "--embedder", "hash", "--db", ":memory:", "--options", given])

    assert code == 2
    err = capsys.readouterr().err
    assert "--options" in err and expected in err


def test_given_observational_without_a_chat_model_when_serve_starts_then_exit_2_saying_what_to_set(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "MEMSTACK_OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMSTACK_OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)

    code = main(["serve", "--embedder", "hash", "--db", ":memory:", "--observational"])

    assert code == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" in err and "OPENAI_BASE_URL" in err


@pytest.mark.parametrize(
    ("observational", "shown"),
    [
        pytest.param(False, 3, id="options-replace-MEMSTACK_OPTIONS"),
        # observational memory shows the whole unobserved tail instead of the last messages
        pytest.param(True, 12, id="observational-on"),
    ],
)
def test_given_options_and_observational_flags_when_served_then_the_api_applies_them(
    tmp_path: Path, observational: bool, shown: int
) -> None:
    env = {
        "MEMSTACK_OPTIONS": '{"last_messages": 9}',  # replaced by --options
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # a keyless endpoint; nothing reaches it here
    }
    args = ["--embedder", "hash", "--db", str(tmp_path / "m.db"), "--options", '{"last_messages": 3}']
    args += ["--observational"] if observational else []
    with running_serve(*args, cwd=tmp_path, env=env) as served:
        assert f"observational={'on' if observational else 'off'}" in served.stdout[0]
        with MemstackClient(served.url, resource_id="r") as client:
            client.save_messages(thread_id="t", messages=[f"message {i}" for i in range(12)])
            ctx = client.context(thread_id="t", message="next", options={"semantic_recall": False})

    assert len(ctx.history_ids) == shown


@pytest.mark.parametrize("workers", ["1", "2"])
def test_given_a_port_in_use_when_serve_starts_then_exit_1_saying_it_cannot_listen(
    workers: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        db = str(tmp_path / "memory.db")

        code = main(["serve", "--embedder", "hash", "--db", db, "--port", str(port), "--workers", workers])

    assert code == 1
    err = capsys.readouterr().err
    assert f"memstack: cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err
