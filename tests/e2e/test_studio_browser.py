"""Memstack Studio in a real browser (Debian's chromium through Playwright) against ``memstack serve``'s
server on loopback: each view loads, a thread is followed page by page, a recall query runs, working memory
is edited, and what the page shows is compared with the API's own answers for the same request."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests.e2e.studio_support import (
    HIKES,
    RESOURCE,
    TRIP,
    TRIP_MESSAGES,
    WORKING_MEMORY,
    chromium,
    open_studio,
    screenshots,
    studio_memory,
)
from tests.served import serving

GROUP = re.compile(r'<observation-group\b[^>]*\brange="([^"]+):([^"]+)"')


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    memory = studio_memory(str(tmp_path_factory.mktemp("studio") / "studio.db"))
    with memory, serving(memory) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    context.close()
    assert errors == [], f"the page raised: {errors}"


@pytest.fixture
def api(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, params={"resource_id": RESOURCE}) as client:
        yield client


def answer(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def cells(page: Any, selector: str) -> list[list[str]]:
    rows = page.locator(f"{selector} tbody tr")
    return [[c.strip() for c in rows.nth(i).locator("td").all_inner_texts()] for i in range(rows.count())]


def fact(page: Any, table: str, key: str) -> str:
    return str(page.locator(f"[data-testid={table}] tr[data-key={key}] td").inner_text()).strip()


def test_given_the_server_when_its_root_is_opened_then_the_studio_loads(page: Any, url: str) -> None:
    page.goto(url + "/")
    assert page.url.startswith(url + "/studio/")
    assert page.title() == "Memstack Studio"
    assert page.locator("#view-welcome").is_visible()


def test_given_a_resource_when_it_is_opened_then_the_threads_are_the_apis(
    page: Any, url: str, api: httpx.Client
) -> None:
    page.goto(url + "/studio/")
    page.fill("#resource", RESOURCE)
    page.click("#resource-form button")
    page.wait_for_selector("[data-testid=threads-table] tbody tr")
    expected = answer(api.get("/v1/threads", params={"order_by": "updated_at", "direction": "desc"}))[
        "threads"
    ]
    shown = cells(page, "[data-testid=threads-table]")
    assert [(r[0], r[1], int(r[2])) for r in shown] == [
        (t["title"], t["id"], t["last_seq"]) for t in expected
    ]


def test_given_a_thread_when_followed_then_its_messages_page_by_page_match_the_api(
    page: Any, url: str, api: httpx.Client
) -> None:
    open_studio(page, url)
    page.get_by_role("link", name="Trip to Oslo").click()
    page.wait_for_selector("[data-testid=messages-list] li")
    first = answer(api.get(f"/v1/threads/{TRIP}/messages", params={"limit": 20}))
    items = page.locator("[data-testid=messages-list] > li")
    assert [items.nth(i).get_attribute("data-message") for i in range(items.count())] == [
        m["id"] for m in first["messages"]
    ]
    page.click("#messages-more")
    items.nth(len(first["messages"])).wait_for()  # the page's CSP forbids eval: no wait_for_function
    assert items.count() == TRIP_MESSAGES + 1
    assert page.locator("#messages-more").is_hidden()
    call = page.locator("[data-testid=tool-call][data-call=call-weather]")
    assert "weather(" in call.inner_text()
    assert '"high_c": 4' in call.locator("[data-testid=tool-result]").inner_text()
    assert (
        page.locator("li[data-message=trip-5] [data-testid=image]").inner_text()
        == "[image: Miso in her carrier]"
    )
    assert page.locator("li[data-message=trip-1] [data-testid=author]").inner_text() == "Ana (traveller)"


def test_given_working_memory_when_edited_behind_the_toggle_then_the_api_has_the_new_document(
    page: Any, url: str, api: httpx.Client
) -> None:
    open_studio(page, url, view="working-memory")
    page.wait_for_selector("[data-testid=wm-rendered] li")
    assert answer(api.get("/v1/working-memory"))["working_memory"] == WORKING_MEMORY
    assert page.locator("[data-testid=wm-rendered] strong").first.inner_text() == "Name"
    assert page.locator("[data-testid=wm-text]").is_hidden()
    page.check("[data-testid=wm-edit]")
    edited = WORKING_MEMORY + "\n- Allergies: none"
    page.fill("[data-testid=wm-text]", edited)
    page.click("#wm-save")
    page.wait_for_selector("[data-testid=wm-status]:has-text('Saved.')")
    assert answer(api.get("/v1/working-memory"))["working_memory"] == edited
    assert "Allergies: none" in page.locator("[data-testid=wm-rendered]").inner_text()
    api.put("/v1/working-memory", json={"working_memory": WORKING_MEMORY}).raise_for_status()


def test_given_a_json_document_when_shown_as_a_tree_then_its_keys_are_nested(
    page: Any, url: str, api: httpx.Client
) -> None:
    doc = {"name": "Ana", "pets": [{"name": "Miso", "kind": "cat"}]}
    thread_scope = {"working_memory": {"enabled": True, "scope": "thread"}}
    api.put(
        f"/v1/threads/{HIKES}/working-memory",
        json={"working_memory": json.dumps(doc), "options": thread_scope},
    ).raise_for_status()
    open_studio(page, url, view="working-memory", thread=HIKES)
    page.select_option("#wm-scope", "thread")
    page.check("#wm-json")
    tree = page.locator("[data-testid=wm-tree]")
    tree.wait_for()
    assert tree.locator(":scope > ul > li").count() == 2
    assert 'kind: "cat"' in tree.inner_text()


def test_given_an_observed_thread_then_the_record_and_each_groups_messages_are_the_apis(
    page: Any, url: str, api: httpx.Client
) -> None:
    record = answer(api.get(f"/v1/threads/{HIKES}/observations"))["record"]
    open_studio(page, url, view="observations", thread=HIKES)
    page.wait_for_selector("[data-testid=obs-group]")
    for key in (
        "generation_count",
        "observed_seq",
        "pending_message_tokens",
        "buffered_chunks",
        "failure_count",
    ):
        assert fact(page, "obs-record", key) == str(record[key]), key
    assert fact(page, "obs-usage", "observer_calls").startswith(str(record["usage"]["observer_calls"]))
    ranges = GROUP.findall(record["active_observations"])
    groups = page.locator("[data-testid=obs-group][data-range]")
    assert [groups.nth(i).get_attribute("data-range") for i in range(groups.count())] == [
        f"{a}:{b}" for a, b in ranges
    ]
    first, last = ranges[1]
    groups.nth(1).get_by_role("button", name="Messages behind it").click()
    shown = groups.nth(1).locator("[data-testid=obs-group-messages] li")
    shown.first.wait_for()
    messages = answer(api.get(f"/v1/threads/{HIKES}/messages", params={"limit": 200}))["messages"]
    seqs = {m["id"]: m["seq"] for m in messages}
    expected = [m["id"] for m in messages if seqs[first] <= m["seq"] <= seqs[last]]
    assert [shown.nth(i).get_attribute("data-message") for i in range(shown.count())] == expected


def test_given_a_recall_query_then_the_hits_and_every_retrievers_score_are_the_apis(
    page: Any, url: str, api: httpx.Client
) -> None:
    open_studio(page, url, view="recall", thread=TRIP)
    page.fill("[data-testid=recall-query]", "weather in Oslo")
    page.fill("#recall-form input[name=top_k]", "3")
    page.select_option("#recall-form select[name=scope]", "thread")
    page.click("#recall-form button[type=submit]")
    page.wait_for_selector("[data-testid=recall-hits] tbody tr")
    options = {
        "semantic_recall": {
            "mode": "hybrid",
            "top_k": 3,
            "message_range": {"before": 1, "after": 1},
            "scope": "thread",
        }
    }
    hits = answer(
        api.post(f"/v1/threads/{TRIP}/recall", json={"query": "weather in Oslo", "options": options})
    )["hits"]
    rows = cells(page, "[data-testid=recall-hits]")
    # top_k hits at least: windows that overlap in this short thread leave budget (3 x 3 messages) for more
    assert len(rows) == len(hits) >= 3

    def shown(value: Any) -> str:
        return "–" if value is None else f"{value:.4f}"

    assert [r[1:9] for r in rows] == [
        [
            h["message_id"],
            h["thread_id"],
            str(h["seq"]),
            shown(h["score"]),
            str(h["vector_rank"] or "–"),
            shown(h["vector_score"]),
            str(h["keyword_rank"] or "–"),
            shown(h["keyword_score"]),
        ]
        for h in hits
    ]


def test_given_a_bad_filter_when_recall_runs_then_the_apis_error_is_shown(page: Any, url: str) -> None:
    open_studio(page, url, view="recall", thread=TRIP)
    page.fill("[data-testid=recall-query]", "weather")
    page.fill("#recall-form input[name=filter]", '{"role": {"$near": "user"}}')
    page.click("#recall-form button[type=submit]")
    alert = page.get_by_role("alert")
    alert.wait_for()
    assert alert.inner_text().startswith("400 invalid_input")


def test_given_a_message_when_its_context_is_shown_then_layers_tokens_and_requests_are_the_apis(
    page: Any, url: str, api: httpx.Client
) -> None:
    open_studio(page, url, view="messages", thread=TRIP)
    page.locator("li[data-message=trip-1]").get_by_role("button", name="What the model sees").click()
    page.wait_for_selector("[data-testid=context-layers] tbody tr")
    body = {"message": "We fly to Oslo in March with my cat Miso."}
    expected = answer(api.post(f"/v1/threads/{TRIP}/inspect", json=body))
    rows = cells(page, "[data-testid=context-layers]")
    assert [(r[1], r[2], int(r[4])) for r in rows] == [
        (x["layer"].replace("_", " "), x["role"], x["tokens"]) for x in expected["layers"]
    ]
    assert page.locator("[data-testid=context-total]").inner_text() == str(expected["token_count"])
    assert json.loads(page.locator("[data-testid=context-request]").inner_text()) == expected["openai"]
    page.select_option("[data-testid=context-provider]", "bedrock")
    assert json.loads(page.locator("[data-testid=context-request]").inner_text()) == expected["bedrock"]


def test_given_results_of_one_thread_when_another_is_chosen_then_no_view_shows_them(
    page: Any, url: str
) -> None:
    """A recall and an assembled context belong to their thread: choosing another thread (in the Threads
    view, or by the address) leaves the recall and context views empty until they run for it."""
    open_studio(page, url, view="recall", thread=TRIP)
    page.fill("[data-testid=recall-query]", "weather in Oslo")
    page.click("#recall-form button[type=submit]")
    page.wait_for_selector("[data-testid=recall-hits] tbody tr")
    page.click("nav button[data-view=context]")
    page.fill("[data-testid=context-message]", "When do we fly?")
    page.click("#context-form button[type=submit]")
    page.wait_for_selector("[data-testid=context-layers] tbody tr")

    page.click("nav button[data-view=threads]")
    page.locator(f"tr[data-thread='{HIKES}'] a").click()
    page.click("nav button[data-view=context]")

    assert page.locator("#current-thread").inner_text() == f"thread: {HIKES}"
    assert cells(page, "[data-testid=context-layers]") == []
    assert page.locator("[data-testid=context-request]").inner_text() == ""
    assert page.locator("[data-testid=context-total]").inner_text() == ""
    page.click("nav button[data-view=recall]")
    assert cells(page, "[data-testid=recall-hits]") == []
    assert page.locator("#recall-summary").inner_text() == ""

    page.fill("[data-testid=recall-query]", "weather in Oslo")  # and by the address
    page.click("#recall-form button[type=submit]")
    page.wait_for_selector("[data-testid=recall-hits] tbody tr")
    page.evaluate(f"location.hash = 'resource={RESOURCE}&thread={TRIP}&view=recall'")
    page.wait_for_function(f"document.querySelector('#current-thread').textContent === 'thread: {TRIP}'")
    assert cells(page, "[data-testid=recall-hits]") == []


def test_given_a_message_saved_without_indexing_then_index_health_names_it(
    page: Any, url: str, api: httpx.Client
) -> None:
    expected = answer(api.get("/v1/index-health"))
    open_studio(page, url, view="index")
    page.wait_for_selector("[data-testid=index-samples] tbody tr")
    for key in ("embedding_model", "dimension", "messages", "indexed", "not_indexed", "stale"):
        assert fact(page, "index-facts", key) == str(expected[key]), key
    assert expected["not_indexed"] == 1
    assert cells(page, "[data-testid=index-samples]") == [
        [TRIP, "trip-unindexed", str(TRIP_MESSAGES + 1), "not_indexed"]
    ]


def test_given_no_thread_when_a_thread_view_is_opened_then_the_page_says_to_choose_one(
    page: Any, url: str
) -> None:
    open_studio(page, url, view="recall")
    assert "Choose a thread" in page.get_by_role("alert").inner_text()


def test_given_the_seeded_studio_then_every_view_has_a_screenshot(
    page: Any, url: str, tmp_path: Path
) -> None:
    written = screenshots(page, url, tmp_path)
    assert [p.name for p in written] == [
        f"studio-{v}.png"
        for v in ("threads", "messages", "working-memory", "observations", "recall", "context", "index")
    ]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)


@pytest.mark.parametrize("thread", ["a/b", "q?x", "h#x", "50%", "ü🙂", ".."])
def test_given_a_thread_id_no_path_can_carry_when_opened_then_the_page_says_why_and_asks_nothing(
    page: Any, url: str, thread: str
) -> None:
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/v1/threads/" in request.url else None)
    page.goto(f"{url}/studio/#" + urlencode({"resource": RESOURCE, "thread": thread, "view": "messages"}))
    page.wait_for_load_state("networkidle")
    assert "cannot be addressed over HTTP" in page.get_by_role("alert").inner_text()
    assert asked == []
