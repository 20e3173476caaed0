"""Against a real uvicorn server on 127.0.0.1: early arrival, disconnects, overload, timeouts,
heartbeats and graceful shutdown. The StepGate holds decoder steps, so every ordering claim is
proven by which steps were allowed, not by timing."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sse_starlette.sse import AppStatus

from decoding import Bundle
from server import Settings, create_app
from tests._live import LiveServer, ServerProcess, StepGate, gated
from tests._logged import LoggedServer

QUESTION = "你喜欢吃苹果吗？"  # 7 output tokens with the default model
GOLDEN = json.loads((Path(__file__).parent / "data" / "cn2en_golden.json").read_text(encoding="utf-8"))


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll a server-side condition (a counter, a flag) with a deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def disconnects(live: LiveServer) -> float:
    return float(live.state.metrics.cancellations.labels("disconnect")._value.get())


@pytest.fixture
def live(default_bundle: Bundle) -> Iterator[LiveServer]:
    with LiveServer(Settings(cache_size=0), bundles=[default_bundle]) as server:
        yield server


@pytest.fixture
def gate(live: LiveServer, default_bundle: Bundle) -> Iterator[StepGate]:
    with gated(default_bundle) as step_gate:  # installed after startup: warm-up is not held
        yield step_gate


def test_curl_receives_the_first_delta_while_the_decoder_is_still_running(
    live: LiveServer, gate: StepGate
) -> None:
    curl = subprocess.Popen(
        [
            "curl",
            "--no-buffer",
            "-sS",
            "-X",
            "POST",
            f"{live.url}/v1/translate/stream",
            "-H",
            "content-type: application/json",
            "-d",
            json.dumps({"text": QUESTION}),
        ],
        stdout=subprocess.PIPE,
    )
    assert curl.stdout is not None
    arrivals: list[tuple[float, dict[str, Any]]] = []

    def read_event() -> dict[str, Any]:
        event = json.loads(curl.stdout.readline())  # type: ignore[union-attr]
        arrivals.append((time.monotonic(), event))
        return event

    assert read_event()["type"] == "start"  # sent before the decoder has taken a single step
    gate.allow(1)
    first = read_event()
    assert first == {"type": "delta", "text": "Do", "index": 0, "segment": 0}
    assert gate.wait_for_steps(2)  # the decoder now waits for step 2: the stream cannot have ended
    assert curl.poll() is None
    gate.open()
    while arrivals[-1][1]["type"] != "done":
        read_event()
    assert curl.wait(10) == 0
    curl.stdout.close()
    first_delta_at, done_at = arrivals[1][0], arrivals[-1][0]
    assert first_delta_at < done_at
    assert arrivals[-1][1]["translation"] == "Do you like to eat?"


def test_client_disconnect_stops_decoding_within_one_step(live: LiveServer, gate: StepGate) -> None:
    scheduler = live.state.service.schedulers["cn2en-gru-zh-en"]
    with (
        httpx.Client(base_url=live.url, timeout=10) as client,
        client.stream("POST", "/v1/translate/stream", json={"text": QUESTION}) as response,
    ):
        lines = response.iter_lines()
        assert json.loads(next(lines))["type"] == "start"
        gate.allow(1)
        assert json.loads(next(lines))["type"] == "delta"
        assert gate.wait_for_steps(2)  # step 2 is waiting at the gate when we hang up
    assert wait_until(lambda: disconnects(live) == 1)  # the server noticed and cancelled
    gate.open()  # step 2 may finish; no step 3 may start
    assert scheduler.wait_idle(10)
    assert gate.started == 2  # out of the 7 this translation needs
    assert scheduler.active == 0 and scheduler.queued == 0


async def test_disconnect_over_raw_asgi_returns_and_frees_the_slot(default_bundle: Bundle) -> None:
    """Starlette's own pattern: receive() says http.disconnect right after the first body chunk."""
    import asyncio

    app = create_app(Settings(cache_size=0), bundles=[default_bundle])
    async with app.router.lifespan_context(app):
        scheduler = app.state.service.schedulers["cn2en-gru-zh-en"]
        with gated(default_bundle) as gate:
            gate.allow(1)
            body_sent = asyncio.Event()
            request_read = False

            async def receive() -> dict[str, Any]:
                nonlocal request_read
                if not request_read:
                    request_read = True
                    return {
                        "type": "http.request",
                        "body": json.dumps({"text": QUESTION}).encode(),
                        "more_body": False,
                    }
                await body_sent.wait()
                return {"type": "http.disconnect"}

            async def send(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.body" and message.get("body"):
                    body_sent.set()

            scope = {
                "type": "http",
                "asgi": {"version": "3.0", "spec_version": "2.3"},
                "http_version": "1.1",
                "method": "POST",
                "scheme": "http",
                "path": "/v1/translate/stream",
                "raw_path": b"",
                "query_string": b"",
                "root_path": "",
                "headers": [(b"content-type", b"application/json")],
                "client": ("127.0.0.1", 1),
                "server": ("127.0.0.1", 80),
                "state": {},
            }
            await asyncio.wait_for(app(scope, receive, send), 10)  # returns by itself
            assert app.state.metrics.cancellations.labels("disconnect")._value.get() == 1
            gate.open()
            assert await asyncio.to_thread(scheduler.wait_idle, 10)
            assert gate.started <= 2


def test_overload_answers_503_with_retry_after_then_recovers(default_bundle: Bundle) -> None:
    settings = Settings(cache_size=0, max_concurrent_streams=1, max_queued=1, retry_after=2)
    with (
        LiveServer(settings, bundles=[default_bundle]) as live,
        gated(default_bundle) as gate,
        httpx.Client(base_url=live.url, timeout=10) as client,
    ):
        scheduler = live.state.service.schedulers["cn2en-gru-zh-en"]
        with (
            client.stream("POST", "/v1/translate/stream", json={"text": QUESTION}) as running,
            client.stream("POST", "/v1/translate/stream", json={"text": "我很好。"}) as queued,
        ):
            running_lines, queued_lines = running.iter_lines(), queued.iter_lines()
            assert json.loads(next(running_lines))["type"] == "start"
            assert json.loads(next(queued_lines))["type"] == "start"
            assert (scheduler.active, scheduler.queued) == (1, 1)
            refused = client.post("/v1/translate", json={"text": "我们走吧！"})
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "2"
            assert refused.json()["error"]["code"] == "overloaded"
            gate.open()
            assert [json.loads(line)["type"] for line in running_lines][-1] == "done"
            assert [json.loads(line)["type"] for line in queued_lines][-1] == "done"
        recovered = client.post("/v1/translate", json={"text": "我们走吧！"})
        assert recovered.status_code == 200 and recovered.json()["translation"]


def test_request_timeout_ends_the_stream_with_an_error_and_cancels(default_bundle: Bundle) -> None:
    settings = Settings(cache_size=0, request_timeout=0.3)
    with (
        LiveServer(settings, bundles=[default_bundle]) as live,
        gated(default_bundle) as gate,
        httpx.Client(base_url=live.url, timeout=10) as client,
    ):
        events = [
            json.loads(line)
            for line in client.post("/v1/translate/stream", json={"text": QUESTION}).text.splitlines()
        ]
        assert events[0]["type"] == "start"
        assert events[-1] == {"type": "error", "code": "request_timeout", "message": "no result within 0.3 s"}
        plain = client.post("/v1/translate", json={"text": QUESTION})
        assert plain.status_code == 504 and plain.json()["error"]["code"] == "request_timeout"
        gate.open()
        assert live.state.service.schedulers["cn2en-gru-zh-en"].wait_idle(10)
        assert live.state.metrics.cancellations.labels("timeout")._value.get() == 2


def test_heartbeats_keep_an_idle_stream_alive(default_bundle: Bundle) -> None:
    with (
        LiveServer(Settings(cache_size=0, heartbeat_interval=0.05), bundles=[default_bundle]) as live,
        gated(default_bundle) as gate,
        httpx.Client(base_url=live.url, timeout=10) as client,
    ):
        with client.stream("POST", "/v1/translate/stream", json={"text": "我很好。"}) as response:
            lines = response.iter_lines()
            assert json.loads(next(lines))["type"] == "start"
            assert json.loads(next(lines)) == {"type": "ping"}  # nothing decoded: the gate is closed
            assert json.loads(next(lines)) == {"type": "ping"}
            gate.open()
            types = [json.loads(line)["type"] for line in lines]
        assert types[-1] == "done" and "delta" in types


def test_shutdown_drain_refuses_new_work_and_ends_held_streams(default_bundle: Bundle) -> None:
    with (
        LiveServer(Settings(cache_size=0), bundles=[default_bundle]) as live,
        gated(default_bundle),
        httpx.Client(base_url=live.url, timeout=10) as client,
    ):
        with client.stream("POST", "/v1/translate/stream", json={"text": QUESTION}) as held:
            lines = held.iter_lines()
            assert json.loads(next(lines))["type"] == "start"
            live.call_in_loop(live.state.lifecycle.begin_drain, 0.2)
            last = [json.loads(line) for line in lines][-1]
        assert last == {
            "type": "error",
            "code": "shutting_down",
            "message": "the server is shutting down",
            "retry_after": 1,
        }
        refused = client.post("/v1/translate", json={"text": "我很好。"})
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down"
        assert client.get("/readyz").json() == {"status": "draining"}


def test_create_app_leaves_sse_starlettes_process_global_app_status_alone() -> None:
    assert AppStatus.enable_automatic_graceful_drain is True  # the library's default
    create_app(Settings())
    assert AppStatus.enable_automatic_graceful_drain is True and AppStatus.should_exit is False


def test_an_sse_stream_is_not_cut_by_sse_starlettes_global_exit_flag(default_bundle: Bundle) -> None:
    """sse-starlette sets ``AppStatus.should_exit`` for the whole process when any uvicorn server
    in it exits, and never resets it; liuyi's SSE streams end by their own drain instead."""
    AppStatus.should_exit = True  # as left behind by another server of this process
    try:
        with (
            LiveServer(Settings(cache_size=0), bundles=[default_bundle]) as live,
            gated(default_bundle) as gate,
            httpx.Client(base_url=live.url, timeout=10) as client,
            client.stream("GET", "/v1/translate/stream", params={"text": QUESTION}) as held,
        ):
            lines = held.iter_lines()
            kinds = [next(line for line in lines if line.startswith("event: "))]
            gate.open()
            kinds += [line for line in lines if line.startswith("event: ")]
    finally:
        AppStatus.should_exit = False
    assert kinds[0] == "event: start" and kinds[-1] == "event: done"


def test_streams_running_at_shutdown_may_finish_within_the_grace_period(default_bundle: Bundle) -> None:
    with (
        LiveServer(Settings(cache_size=0), bundles=[default_bundle]) as live,
        gated(default_bundle) as gate,
        httpx.Client(base_url=live.url, timeout=10) as client,
    ):
        with client.stream("POST", "/v1/translate/stream", json={"text": QUESTION}) as held:
            lines = held.iter_lines()
            assert json.loads(next(lines))["type"] == "start"
            live.call_in_loop(live.state.lifecycle.begin_drain, 30.0)
            gate.open()
            last = [json.loads(line) for line in lines][-1]
        assert last["type"] == "done" and last["translation"] == "Do you like to eat?"


def test_liuyi_serve_prints_the_page_url_and_exits_cleanly_on_sigterm() -> None:
    with ServerProcess() as server:
        assert server.process is not None and server.process.stdout is not None
        assert f"http://127.0.0.1:{server.port}/" in server.process.stdout.readline()
        reply = httpx.post(f"{server.url}/v1/translate", json={"text": "我很好。"}).json()
        assert reply["translation"] == "I'm very well."
        # SIGTERM: uvicorn shuts down, then re-raises the signal it caught (status 0 or -SIGTERM)
        assert server.stop() in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in server.process.stderr.read()  # type: ignore[union-attr]


def test_curl_through_a_server_subprocess_gets_deltas_long_before_the_end() -> None:
    """No gate across processes: a long text makes decoding take a while, and the first delta must
    arrive in the first half of the stream's duration (a buffered response delivers it at the end)."""
    text = "".join(record["text"] for record in GOLDEN[:40])  # 40 sentences, one stream
    with ServerProcess(LIUYI_CACHE_SIZE="0") as server:
        started = time.monotonic()
        with subprocess.Popen(
            [
                "curl",
                "--no-buffer",
                "-sS",
                "-X",
                "POST",
                f"{server.url}/v1/translate/stream",
                "-H",
                "content-type: application/json",
                "-d",
                json.dumps({"text": text}),
            ],
            stdout=subprocess.PIPE,
        ) as curl:
            assert curl.stdout is not None
            arrivals = [(time.monotonic() - started, json.loads(line)) for line in curl.stdout]
        first_delta = next(at for at, event in arrivals if event["type"] == "delta")
        done = next(at for at, event in arrivals if event["type"] == "done")
    assert first_delta < done / 2
    segments = len(arrivals[0][1]["segments"])
    assert segments >= 30 and sum(1 for _, event in arrivals if event["type"] == "segment") == segments


def test_several_worker_processes_serve_the_same_api() -> None:
    """Both workers answer (told apart by the pid in their access records), and answer alike."""

    def translating(record: dict[str, Any]) -> bool:
        return record["logger"] == "liuyi.access" and record["route"] == "/v1/translate"

    with LoggedServer(LIUYI_WORKERS="2", LIUYI_CACHE_SIZE="0") as server:

        def translate(_: int) -> httpx.Response:  # its own connection: the kernel picks a worker
            return httpx.post(f"{server.url}/v1/translate", json={"text": "我很好。"}, timeout=30)

        replies: dict[str, str] = {}  # request id -> translation
        with ThreadPoolExecutor(4) as pool:
            # until both workers have served: the second may still be loading its model when the
            # first answers /readyz (a loaded 2-core machine takes seconds), so bounded by time
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                for response in pool.map(translate, range(8)):
                    replies[response.headers["x-request-id"]] = response.json()["translation"]
                if len({r["pid"] for r in server.records if translating(r)}) >= 2:
                    break
        assert server.wait_for(translating, count=len(replies))  # logged once the response is sent
        translated = [r for r in server.records if translating(r)]
    by_worker: dict[int, set[str]] = {}
    for record in translated:
        by_worker.setdefault(record["pid"], set()).add(replies[record["request_id"]])
    assert len(translated) == len(replies)  # every request logged once, by the worker that served it
    assert len(by_worker) == 2, "both workers served requests"
    assert all(translations == {"I'm very well."} for translations in by_worker.values())
