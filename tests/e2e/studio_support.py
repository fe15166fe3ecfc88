"""Memstack Studio in a real browser: Debian's chromium driven by Playwright (never a browser Playwright
downloads), a seeded memory served by ``memstack serve``'s server, and the screenshots of docs/studio/.

    python -m tests.e2e.studio_support docs/studio     # regenerate the screenshots from the current code
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
"""Debian's chromium (``make test`` installs it when missing)."""

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]

RESOURCE = "studio-user"
TRIP = "trip-to-oslo"
HIKES = "hikes"
TRIP_MESSAGES = 26
"""More than one page of the Studio (20 a page)."""

WORKING_MEMORY = "# User\n- **Name**: Ana\n- Cat: Miso\n- Travels: Oslo in March"

OM: dict[str, Any] = {
    "enabled": True,
    "retrieval": {"scope": "thread"},
    "observation": {"message_tokens": 120, "buffer_tokens": False},
}


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Playwright ``Browser`` on ``CHROMIUM``; closed on exit."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).is_file():
        raise AssertionError(f"{CHROMIUM} is missing: `make test` installs it (make browser)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def studio_memory(path: str) -> Any:
    """A local ``Memory`` (SQLite at ``path``, hash embedder, scripted Observer inline, working memory and
    observational memory with retrieval on), seeded by ``seed``."""
    from memstack.adapters.testing import ScriptedChatModel
    from tests.observation_support import om_memory

    memory = om_memory(
        ScriptedChatModel(),
        path=path,
        semantic_recall={"top_k": 4},
        working_memory={"enabled": True},
        observational_memory=OM,
    )
    seed(memory)
    return memory


def trip_messages() -> list[dict[str, Any]]:
    """A trip-planning conversation: authors, a tool call and its result, an image with a caption."""
    ana = {"id": "u-ana", "name": "Ana", "role": "traveller"}
    out: list[dict[str, Any]] = [
        {
            "id": "trip-1",
            "role": "user",
            "content": "We fly to Oslo in March with my cat Miso.",
            "author": ana,
        },
        {
            "id": "trip-2",
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "Let me check the weather in Oslo for March."},
                {"type": "tool_call", "id": "call-weather", "name": "weather", "args": {"city": "Oslo"}},
            ],
        },
        {
            "id": "trip-3",
            "role": "tool",
            "parts": [
                {
                    "type": "tool_result",
                    "tool_call_id": "call-weather",
                    "name": "weather",
                    "result": {"city": "Oslo", "high_c": 4, "low_c": -3},
                }
            ],
        },
        {"id": "trip-4", "role": "assistant", "content": "Expect 4°C by day and -3°C at night: pack a coat."},
        {
            "id": "trip-5",
            "role": "user",
            "parts": [
                {"type": "image", "url": "https://example.com/miso.png", "caption": "Miso in her carrier"}
            ],
            "author": ana,
        },
    ]
    topics = ["museums", "the ferry", "cafés", "the opera house", "a day trip to the fjord", "saunas"]
    for i in range(6, TRIP_MESSAGES + 1):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"Note {i}: what about {topics[i % len(topics)]} in Oslo?"
        out.append(
            {"id": f"trip-{i}", "role": role, "content": text, **({"author": ana} if role == "user" else {})}
        )
    return out


def seed(memory: Any) -> None:
    """Two threads of ``RESOURCE`` (a trip with tool calls and images, hikes observed into groups), the
    resource's working memory, and one message saved without indexing (index health)."""
    from tests.observation_support import save_sentences

    memory.create_thread(resource_id=RESOURCE, thread_id=TRIP, title="Trip to Oslo")
    memory.save_messages(resource_id=RESOURCE, thread_id=TRIP, messages=trip_messages())
    memory.create_thread(resource_id=RESOURCE, thread_id=HIKES, title="Hikes with my sister")
    save_sentences(memory, RESOURCE, HIKES, 1, 12)
    memory.update_working_memory(resource_id=RESOURCE, working_memory=WORKING_MEMORY)
    memory.index_on_save = False
    try:
        memory.save_messages(
            resource_id=RESOURCE,
            thread_id=TRIP,
            messages=[
                {"id": "trip-unindexed", "role": "user", "content": "Saved while the indexer was down."}
            ],
        )
    finally:
        memory.index_on_save = True


def open_studio(page: Any, url: str, *, view: str = "threads", thread: str = "") -> None:
    """Open the Studio on ``RESOURCE`` at ``view`` (and ``thread``), and wait until the page has loaded."""
    page.goto(f"{url}/studio/#resource={RESOURCE}&thread={thread}&view={view}")
    page.wait_for_load_state("networkidle")


SCREENSHOTS = (
    ("threads", "", None),
    ("messages", TRIP, None),
    ("working-memory", "", None),
    ("observations", HIKES, "obs-group-messages"),
    ("recall", TRIP, "recall"),
    ("context", TRIP, "context"),
    ("index", "", None),
)
"""``(view, thread, action)`` of each screenshot: ``studio-<view>.png``."""


def screenshots(page: Any, url: str, out: Path) -> list[Path]:
    """A PNG of every view of the seeded Studio into ``out``; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 860})
    written = []
    for view, thread, action in SCREENSHOTS:
        open_studio(page, url, view=view, thread=thread)
        if action == "obs-group-messages":
            page.get_by_role("button", name="Messages behind it").nth(1).click()
            page.wait_for_selector("[data-testid=obs-group-messages] li")
        elif action == "recall":
            page.fill("[data-testid=recall-query]", "weather in Oslo")
            page.click("#recall-form button[type=submit]")
            page.wait_for_selector("[data-testid=recall-hits] tbody tr")
        elif action == "context":
            page.fill("[data-testid=context-message]", "What should I pack for Miso?")
            page.click("#context-form button[type=submit]")
            page.wait_for_selector("[data-testid=context-layers] tbody tr")
        target = out / f"studio-{view}.png"
        page.screenshot(path=str(target), full_page=False)
        written.append(target)
    return written


def main(argv: list[str]) -> int:
    """Write the screenshots into ``argv[0]`` (default docs/studio) from a freshly seeded memory."""
    import tempfile

    from tests.served import serving

    out = Path(argv[0] if argv else "docs/studio")
    with tempfile.TemporaryDirectory() as scratch:
        memory = studio_memory(str(Path(scratch) / "studio.db"))
        with memory, serving(memory) as url, chromium() as browser:
            page = browser.new_page()
            for path in screenshots(page, url, out):
                print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
