"""Memstack Studio's files as ``memstack serve`` answers them, and ``memstack studio --url``: the same page
served locally with each API request forwarded to a Memstack API — here a local ``memstack serve`` acting
as the deployed one — signed with SigV4 or carrying a JWT."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from botocore.credentials import Credentials

from memstack import Memory
from memstack.studio.proxy import ProxyConfig, StudioServer, make_studio_server
from tests.e2e.serve_support import clean_env
from tests.e2e.studio_support import RESOURCE, TRIP, chromium, open_studio, seed
from tests.served import serving
from tests.sigv4_support import expected_signature

STATIC = Path(__file__).resolve().parents[2] / "shared" / "memstack" / "studio" / "static"


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local ``memstack serve`` acting as the deployed API, seeded with the Studio's resource."""
    path = tmp_path_factory.mktemp("remote") / "remote.db"
    with Memory.local(
        str(path), embedder="hash", background="inline", working_memory={"enabled": True}
    ) as memory:
        seed(memory)
        with serving(memory) as url:
            yield url


class Recording(httpx.BaseTransport):
    """The network, with every request the proxy sends kept for the test to read."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.sent: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.sent.append(request)
        return self.inner.handle_request(request)


@pytest.fixture
def recording() -> Recording:
    return Recording()


@contextmanager
def studio(config: ProxyConfig, transport: httpx.BaseTransport | None = None) -> Iterator[StudioServer]:
    """``memstack studio``'s server on a free loopback port, forwarding to ``config.url``."""
    server = make_studio_server(config, transport=transport, log=io.StringIO())
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        server.client.close()


# --- memstack serve's /studio ------------------------------------------------------------------------


def test_given_serve_when_the_root_or_studio_is_asked_then_it_redirects_to_the_studio(remote: str) -> None:
    for path in ("/", "/studio"):
        reply = httpx.get(remote + path)
        assert (reply.status_code, reply.headers["location"]) == (302, "/studio/"), path


def test_given_serve_then_the_studio_files_are_the_packaged_ones_with_their_types_and_policy(
    remote: str,
) -> None:
    for name, media in (("", "text/html"), ("studio.js", "text/javascript"), ("studio.css", "text/css")):
        reply = httpx.get(f"{remote}/studio/{name}")
        assert reply.status_code == 200, name
        assert reply.headers["content-type"].startswith(media)
        assert reply.content == (STATIC / (name or "index.html")).read_bytes()
        assert "script-src 'self'" in reply.headers["content-security-policy"]
        assert reply.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    "path", ["/studio/missing.js", "/studio/..%2Fassets.py", "/studio/../cli.py", "/studio/x/studio.js"]
)
def test_given_a_path_that_is_not_a_studio_file_then_404_in_the_apis_error_shape(
    remote: str, path: str
) -> None:
    reply = httpx.get(remote + path)
    assert reply.status_code == 404
    assert reply.json()["error"]["code"] == "not_found"


def test_given_a_write_to_a_studio_path_then_405_with_allow_and_the_connection_closes(remote: str) -> None:
    reply = httpx.post(remote + "/studio/", content=b"{}", headers={"Content-Type": "application/json"})
    assert (reply.status_code, reply.headers["allow"]) == (405, "GET, HEAD")
    assert reply.json()["error"]["code"] == "method_not_allowed"
    assert reply.headers["connection"] == "close"


def test_given_head_of_the_studio_then_the_headers_come_without_a_body(remote: str) -> None:
    reply = httpx.head(remote + "/studio/")
    assert reply.status_code == 200 and reply.content == b""
    assert int(reply.headers["content-length"]) == len((STATIC / "index.html").read_bytes())


# --- memstack studio --url ---------------------------------------------------------------------------


def test_given_the_proxy_then_the_page_is_served_and_api_answers_are_the_remotes(remote: str) -> None:
    with studio(ProxyConfig(url=remote, port=0)) as server:
        page = httpx.get(server.url + "/studio/")
        assert page.content == (STATIC / "index.html").read_bytes()
        query = {"resource_id": RESOURCE, "limit": "5"}
        forwarded = httpx.get(f"{server.url}/v1/threads/{TRIP}/messages", params=query)
        direct = httpx.get(f"{remote}/v1/threads/{TRIP}/messages", params=query)
        assert forwarded.status_code == 200 and forwarded.json() == direct.json()
        missing = httpx.get(f"{server.url}/v1/threads/nope", params={"resource_id": RESOURCE})
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
        saved = httpx.put(
            f"{server.url}/v1/working-memory",
            params={"resource_id": "proxy-user"},
            json={"working_memory": "# Hi"},
        )
        assert saved.status_code == 204
        assert (
            httpx.get(f"{remote}/v1/working-memory", params={"resource_id": "proxy-user"}).json()[
                "working_memory"
            ]
            == "# Hi"
        )
        assert httpx.get(server.url + "/elsewhere").status_code == 404


def test_given_sigv4_when_forwarding_then_each_request_is_signed_as_api_gateway_checks_it(
    remote: str, recording: Recording, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSTUDIO")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "studio-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "studio-token")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    with studio(ProxyConfig(url=remote, port=0, sigv4=True), recording) as server:
        reply = httpx.post(
            f"{server.url}/v1/threads/{TRIP}/recall",
            params={"resource_id": RESOURCE},
            json={"query": "weather"},
        )
        assert reply.status_code == 200
    (sent,) = recording.sent
    credentials = Credentials("AKIDSTUDIO", "studio-secret", "studio-token")
    assert sent.headers["authorization"].endswith(
        "Signature=" + expected_signature(sent, credentials, "eu-west-1")
    )
    assert "/eu-west-1/execute-api/aws4_request" in sent.headers["authorization"]
    assert json.loads(sent.content) == {"query": "weather"}


def test_given_a_jwt_when_forwarding_then_the_bearer_token_goes_and_browser_headers_do_not(
    remote: str, recording: Recording
) -> None:
    with studio(ProxyConfig(url=remote, port=0, jwt="tok.en.value"), recording) as server:
        httpx.get(
            f"{server.url}/v1/threads",
            params={"resource_id": RESOURCE},
            headers={"Cookie": "session=1", "X-Other": "1"},
        ).raise_for_status()
    (sent,) = recording.sent
    assert sent.headers["authorization"] == "Bearer tok.en.value"
    assert "cookie" not in sent.headers and "x-other" not in sent.headers


def test_given_an_api_that_does_not_answer_then_503_names_the_url_and_the_cause() -> None:
    with studio(ProxyConfig(url="http://127.0.0.1:9", port=0)) as server:
        reply = httpx.get(f"{server.url}/v1/threads", params={"resource_id": RESOURCE})
    assert reply.status_code == 503
    error = reply.json()["error"]
    assert (
        error["code"] == "unavailable"
        and "http://127.0.0.1:9" in error["message"]
        and "ConnectError" in error["message"]
    )


def test_given_a_body_over_the_limit_then_413_and_nothing_is_forwarded(
    remote: str, recording: Recording
) -> None:
    from memstack.api.app import MAX_BODY_BYTES

    with studio(ProxyConfig(url=remote, port=0), recording) as server:
        reply = httpx.post(
            f"{server.url}/v1/threads/{TRIP}/recall",
            params={"resource_id": RESOURCE},
            content=b"x" * (MAX_BODY_BYTES + 1),
            headers={"Content-Type": "application/json"},
        )
    assert (reply.status_code, reply.json()["error"]["code"]) == (413, "payload_too_large")
    assert recording.sent == []


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (ProxyConfig(url="ftp://api.example.com"), "url"),
        (ProxyConfig(url="https://api.example.com", sigv4=True, jwt="t"), "jwt"),
        (ProxyConfig(url="https://api.example.com", jwt="  "), "jwt"),
    ],
)
def test_given_a_bad_configuration_then_invalid_input_names_the_option(
    config: ProxyConfig, field: str
) -> None:
    from memstack.errors import InvalidInput

    with pytest.raises(InvalidInput) as raised:
        make_studio_server(config)
    assert raised.value.field == field


def test_given_the_proxy_in_a_browser_then_the_threads_view_shows_the_remotes_threads(remote: str) -> None:
    expected = httpx.get(
        f"{remote}/v1/threads",
        params={"resource_id": RESOURCE, "order_by": "updated_at", "direction": "desc"},
    ).json()["threads"]
    with studio(ProxyConfig(url=remote, port=0)) as server, chromium() as browser:
        page = browser.new_page()
        open_studio(page, server.url)
        page.wait_for_selector("[data-testid=threads-table] tbody tr")
        rows = page.locator("[data-testid=threads-table] tbody tr")
        assert [rows.nth(i).get_attribute("data-thread") for i in range(rows.count())] == [
            t["id"] for t in expected
        ]


def test_given_the_command_then_it_serves_until_sigterm_and_refuses_sigv4_with_jwt(remote: str) -> None:
    cmd = [sys.executable, "-m", "memstack.cli", "studio", "--url", remote, "--port", "0"]
    process = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env()
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("memstack studio: open http://127.0.0.1:") and f"(API {remote})" in line
        local = line.split("open ", 1)[1].split(" ", 1)[0]
        assert httpx.get(local).status_code == 200
    finally:
        process.terminate()
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "memstack studio: stopped" in out and "Traceback" not in err
    both = subprocess.run([*cmd, "--sigv4", "--jwt", "t"], capture_output=True, text=True, env=clean_env())
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    bad = subprocess.run([*cmd[:5], "localhost:1"], capture_output=True, text=True, env=clean_env())
    assert bad.returncode == 2 and "--url must be an http(s) URL" in bad.stderr


def test_given_the_package_data_then_every_studio_file_is_shipped_in_the_wheel() -> None:
    import fnmatch
    import tomllib

    root = STATIC.parents[3]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "memstack.studio"
    ]
    files = [p.relative_to(STATIC.parent).as_posix() for p in STATIC.iterdir()]
    assert files and all(any(fnmatch.fnmatch(f, g) for g in globs) for f in files), (files, globs)
