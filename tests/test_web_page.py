"""The live page (static/) and its client library (static/liuyi.js), driven in a real Chromium
against a real uvicorn on 127.0.0.1.

Streaming is made observable with the decoder gate (tests/_live.py): the test releases decoder steps
one at a time and waits for the page to show each token, so "the text arrived before `done`" is
proven by order, not by timing. Browser tests are plain sync tests: Playwright's sync API cannot run
inside pytest-asyncio's event loop.

Chromium comes from Debian (tests/apt-packages.txt), never from `playwright install`. Without it (or
without node) these tests skip locally and fail under CI=true, where nothing may be skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from decoding import Bundle, LoadOptions, load_bundle
from server import Settings
from tests._live import LiveServer, StepGate, gated

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]
WIDE = {"width": 1280, "height": 800}
NARROW = {"width": 390, "height": 844}
WAIT_MS = 15_000  # upper bound for any single wait in the browser (never reached when things work)


def require(available: bool, what: str) -> None:
    """Skip when a tool is missing — except under CI=true, where a skipped browser test is a failure."""
    if available:
        return
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"{what} is required under CI=true")
    pytest.skip(f"{what} is not installed")


# ---- fixtures and helpers -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require(CHROMIUM.exists(), f"{CHROMIUM} (Debian package chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - playwright is a test dependency
        require(False, "the playwright Python package")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=WIDE)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    uncaught: list[Any] = []
    page.on("pageerror", lambda error: uncaught.append(error))
    yield page
    context.close()
    assert not uncaught, f"uncaught errors in the page: {uncaught}"


def open_page(page: Any, live: LiveServer, *, translate_as_you_type: bool = False) -> None:
    page.goto(live.url + "/")
    page.wait_for_selector("html[data-ready='true']", state="attached")
    if not translate_as_you_type:  # tests start translations explicitly, one at a time
        page.uncheck("#live")


def wait_for_state(page: Any, state: str) -> None:
    page.wait_for_function("s => document.querySelector('#status').dataset.state === s", arg=state)


def status_text(page: Any) -> str:
    return str(page.text_content("#status-text"))


def output_text(page: Any) -> str:
    return str(page.text_content("#output"))


# Grows with every decoder step the page has seen: a token adds text, an end of sentence marks its span.
PROGRESS = (
    "document.querySelector('#output').textContent.length"
    " + document.querySelectorAll('#output .segment.complete').length"
)


def release_one_step(page: Any, gate: StepGate) -> str:
    """Let one decoder step through and wait until the page shows its effect; the text shown."""
    before = page.evaluate(PROGRESS)
    gate.allow(1)
    page.wait_for_function(f"before => ({PROGRESS}) > before", arg=before)
    return output_text(page)


def disconnect_cancellations(live: LiveServer) -> float:
    """liuyi_cancellations_total{reason="disconnect"}, scraped from /metrics."""
    text = httpx.get(f"{live.url}/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "liuyi_cancellations_total" and sample.labels.get("reason") == "disconnect":
                return float(sample.value)
    return 0.0


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll a condition on the server's side (not a synchronisation sleep: the deadline only bounds
    how long a broken build takes to fail)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def translation_of(live: LiveServer, text: str) -> str:
    response = httpx.post(f"{live.url}/v1/translate", json={"text": text})
    response.raise_for_status()
    return str(response.json()["translation"])


# ---- liuyi.js unit tests (node) -----------------------------------------------------------------


def test_liuyi_js_unit_tests_pass_under_node() -> None:
    node = shutil.which("node")
    require(node is not None, "node (Debian package nodejs)")
    assert node is not None
    result = subprocess.run(
        [node, "--test", "tests/js/"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# fail 0" in result.stdout


# ---- the page ------------------------------------------------------------------------------------


def test_the_translation_appears_token_by_token_before_done_and_equals_the_batch_result(
    page: Any, default_bundle: Bundle
) -> None:
    text = "我很好。你好吗？"
    # No cache: the final POST must translate again, not replay what the stream recorded.
    with LiveServer(Settings(cache_size=0), bundles=[default_bundle]) as live, gated(default_bundle) as gate:
        open_page(page, live)
        page.fill("#source", text)
        page.evaluate(
            """() => {
                window.outputMutations = 0;
                new MutationObserver((records) => { window.outputMutations += records.length; })
                    .observe(document.querySelector('#output'),
                             {childList: true, characterData: true, subtree: true});
            }"""
        )
        page.click("#translate")
        wait_for_state(page, "streaming")

        shown = [release_one_step(page, gate) for _ in range(3)]
        assert shown[0] and shown[0] != shown[1] != shown[2]
        assert shown[1].startswith(shown[0]) and shown[2].startswith(shown[1])
        assert page.evaluate("window.outputMutations") >= 3
        assert page.get_attribute("#status", "data-state") == "streaming"  # no `done` yet
        assert page.is_visible("#output .cursor")
        assert page.get_attribute("#output", "aria-busy") == "true"

        gate.open()
        wait_for_state(page, "done")
        final = output_text(page)
        assert final.startswith(shown[2])
        assert final == translation_of(live, text)
        assert page.locator("#output .cursor").count() == 0
        assert page.locator("#output .segment").count() == 2  # one span per source sentence
        stats = str(page.text_content("#stats"))
        assert "first token" in stats and "tokens/s" in stats and "total" in stats
        assert page.is_hidden("#cached")


def test_a_repeated_translation_is_marked_cached(page: Any, default_bundle: Bundle) -> None:
    with LiveServer(Settings(), bundles=[default_bundle]) as live:
        translation_of(live, "我很好。")  # fills the server's cache
        open_page(page, live)
        page.fill("#source", "我很好。")
        page.click("#translate")
        wait_for_state(page, "done")
        assert output_text(page) == "I'm very well."
        assert page.is_visible("#cached")


def test_stop_aborts_the_stream_and_the_server_cancels_the_translation(
    page: Any, default_bundle: Bundle
) -> None:
    with LiveServer(Settings(), bundles=[default_bundle]) as live, gated(default_bundle) as gate:
        open_page(page, live)
        page.fill("#source", "我很好。你好吗？")
        page.click("#translate")
        partial = release_one_step(page, gate)
        before = disconnect_cancellations(live)

        page.click("#stop")
        wait_for_state(page, "stopped")
        assert "Stopped" in status_text(page)
        assert eventually(lambda: disconnect_cancellations(live) > before), "the server never saw the abort"
        assert output_text(page) == partial  # what arrived stays; the cursor is gone
        assert page.locator("#output .cursor").count() == 0
        assert page.is_disabled("#stop")


def test_typing_translates_after_a_pause_and_a_new_pause_supersedes_the_running_stream(
    page: Any, default_bundle: Bundle
) -> None:
    with LiveServer(Settings(), bundles=[default_bundle]) as live, gated(default_bundle) as gate:
        open_page(page, live, translate_as_you_type=True)
        page.fill("#source", "你好吗？")
        wait_for_state(page, "streaming")  # no button pressed: the debounce started it
        before = disconnect_cancellations(live)

        page.fill("#source", "我很好。")
        assert eventually(lambda: disconnect_cancellations(live) > before), "the old stream was not aborted"
        gate.open()
        wait_for_state(page, "done")
        assert output_text(page) == "I'm very well."


def test_an_over_long_text_shows_the_servers_limit(page: Any) -> None:
    # The page's counter shows the limit of GET /v1/models, which reports the bundle's own limit:
    # the bundle is loaded with the same limit as the server's settings.
    bundle = load_bundle(options=LoadOptions(max_input_chars=20))
    with LiveServer(Settings(max_input_chars=20), bundles=[bundle]) as live:
        open_page(page, live)
        page.fill("#source", "我很好。" * 6)
        assert page.text_content("#counter") == "24 / 20 characters — too long"

        page.click("#translate")
        wait_for_state(page, "error")
        assert status_text(page) == "Text too long: 24 characters; this server accepts at most 20 characters."

        error = page.evaluate(
            """async (text) => {
                const { translateStream, LiuyiError } = await import('/static/liuyi.js');
                try {
                    for await (const event of translateStream(text)) { /* not reached */ }
                } catch (e) {
                    return { isLiuyiError: e instanceof LiuyiError, status: e.status, code: e.code,
                             limit: e.details.limit };
                }
            }""",
            "好" * 21,
        )
        assert error == {"isLiuyiError": True, "status": 413, "code": "text_too_long", "limit": 20}


def test_an_overloaded_server_is_reported_and_the_page_retries_by_itself(
    page: Any, default_bundle: Bundle
) -> None:
    settings = Settings(max_concurrent_streams=1, max_queued=0, retry_after=1)
    with LiveServer(settings, bundles=[default_bundle]) as live, gated(default_bundle) as gate:
        with (
            httpx.Client(base_url=live.url) as other_client,
            other_client.stream("POST", "/v1/translate/stream", json={"text": "你好吗？"}) as held,
        ):
            assert held.status_code == 200  # holds the only place, stuck at the gate
            open_page(page, live)
            page.fill("#source", "我很好。")
            page.click("#translate")
            wait_for_state(page, "overloaded")
            assert status_text(page).startswith("The server is busy (overloaded). Retrying in ")

            gate.open()
            assert '"type":"done"' in "".join(held.iter_lines())  # the other client finishes
        wait_for_state(page, "done")  # the page's own retry, after Retry-After
        assert output_text(page) == "I'm very well."


def test_a_server_that_cannot_be_reached_is_a_network_error(page: Any, default_bundle: Bundle) -> None:
    with LiveServer(Settings(), bundles=[default_bundle]) as live:
        open_page(page, live)
        page.route("**/v1/translate/stream", lambda route: route.abort("connectionrefused"))
        page.fill("#source", "我很好。")
        page.click("#translate")
        wait_for_state(page, "error")
        assert status_text(page).startswith("Network error: cannot reach the server.")


def test_keyboard_only_use_directions_shortcut_and_copy(page: Any, default_bundle: Bundle) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    with LiveServer(Settings(), bundles=[default_bundle]) as live:
        open_page(page, live)
        # Only the directions the server has (the bundled model is zh->en), plus auto.
        labels = [label.strip() for label in page.locator("#directions label").all_text_contents()]
        assert labels == ["Auto", "中→EN"]

        page.focus("#source")
        page.keyboard.type("我很好。")
        page.keyboard.press("Control+Enter")
        wait_for_state(page, "done")
        assert output_text(page) == "I'm very well."

        page.focus("#copy")
        page.keyboard.press("Enter")
        assert page.evaluate("navigator.clipboard.readText()") == "I'm very well."

        # The caret in a source sentence links it to its translation, as hovering does.
        page.focus("#source")
        page.keyboard.press("End")
        page.keyboard.type("你好吗？")
        page.keyboard.press("Control+Enter")
        wait_for_state(page, "done")
        page.keyboard.press("ArrowLeft")
        assert page.text_content("#mirror mark") == "你好吗？"
        assert page.text_content("#output .segment.active") == translation_of(live, "你好吗？")


def test_a_server_with_api_keys_asks_for_one_and_accepts_it(page: Any, default_bundle: Bundle) -> None:
    with LiveServer(Settings(api_keys=("s3cret",)), bundles=[default_bundle]) as live:
        open_page(page, live)
        page.fill("#source", "我很好。")
        page.click("#translate")
        wait_for_state(page, "error")
        assert status_text(page) == "This server needs a valid API key: enter it under Settings below."

        page.click(".settings summary")
        page.fill("#api-key", "s3cret")
        page.keyboard.press("Enter")
        page.wait_for_selector("#directions input[value='zh-en']")
        page.click("#translate")
        wait_for_state(page, "done")
        assert output_text(page) == "I'm very well."


def test_the_event_source_helper_streams_the_same_translation(page: Any, default_bundle: Bundle) -> None:
    with LiveServer(Settings(), bundles=[default_bundle]) as live:
        open_page(page, live)
        events = page.evaluate(
            """async (text) => {
                const { translateEventSource } = await import('/static/liuyi.js');
                return await new Promise((resolve) => {
                    const events = [];
                    translateEventSource(text, { onEvent: (event) => {
                        events.push(event);
                        if (event.type === 'done' || event.type === 'error') resolve(events);
                    } });
                });
            }""",
            "我很好。你好吗？",
        )
        assert events[0]["type"] == "start" and events[-1]["type"] == "done"
        joined = "".join(event["text"] for event in events if event["type"] == "delta")
        assert joined == events[-1]["translation"] == translation_of(live, "我很好。你好吗？")


@pytest.mark.parametrize(
    ("name", "viewport", "scheme"),
    [
        ("page-mid-stream", WIDE, "light"),
        ("page-mid-stream-narrow", NARROW, "light"),
        ("page-mid-stream-dark", WIDE, "dark"),
    ],
)
def test_screenshot_mid_stream_with_a_sentence_linked_to_its_source(
    page: Any, default_bundle: Bundle, name: str, viewport: dict[str, int], scheme: str
) -> None:
    """Artifacts for a person to look at (artifacts/*.png); the assertions check the linking."""
    text = "我很好。你好吗？\n\n今天天气很好。我们去公园散步吧。\n\n他明天要去北京。"
    page.set_viewport_size(viewport)
    page.emulate_media(color_scheme=scheme)
    with LiveServer(Settings(), bundles=[default_bundle]) as live, gated(default_bundle) as gate:
        open_page(page, live)
        page.fill("#source", text)
        page.click("#translate")
        while page.locator("#output .segment.complete").count() < 3:
            release_one_step(page, gate)
        for _ in range(3):  # the fourth sentence, half written
            release_one_step(page, gate)
        page.hover("#output .segment[data-segment='1']")
        assert page.text_content("#mirror mark") == "你好吗？"  # the source sentence is highlighted
        assert page.get_attribute("#status", "data-state") == "streaming"
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 10_000
