"""Faults around a real server process, each bounded to seconds: Redis stopped and restarted under
load, SIGTERM during long streams, overload then recovery, a storm of clients that hang up
mid-stream. The long version of this is ``bench/soak.py``."""

from __future__ import annotations

import json
import signal
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from itertools import count
from typing import Any

import httpx

from tests._logged import LoggedServer
from tests.test_live_server import wait_until
from tests.test_metrics_workers import scrape, value
from tests.test_redis_cache import RedisServer

SENTENCE = "今天天气很好，我们一起去公园散步吧。"
LONG = SENTENCE * 250  # 4,500 characters: about a second of decoding on one core
MODEL = "cn2en-gru-zh-en"


def stream_events(client: httpx.Client, text: str) -> list[dict[str, Any]]:
    with client.stream("POST", "/v1/translate/stream", json={"text": text}) as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line) for line in response.iter_lines() if line]


def error_records(server: LoggedServer) -> list[dict[str, Any]]:
    return [r for r in server.records if r["level"] in ("error", "critical")]


class Load:
    """Clients on threads sending a mix of streamed and plain requests until stopped; every
    outcome that is not a complete translation is kept in ``failures``."""

    def __init__(self, url: str, clients: int = 3) -> None:
        self.url = url
        self.done = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._texts = count()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(clients)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def wait_for(self, requests: int, timeout: float = 30.0) -> bool:
        target = self.done + requests
        return wait_until(lambda: self.done >= target, timeout)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            while not self._stop.is_set():
                text = f"我有{next(self._texts)}本书。"  # new text: a cache lookup and a store each time
                try:
                    if self.done % 2:
                        ok = stream_events(client, text)[-1]["type"] == "done"
                    else:
                        ok = client.post("/v1/translate", json={"text": text}).status_code == 200
                    failure = "" if ok else f"incomplete translation of {text}"
                except (httpx.HTTPError, AssertionError) as exc:
                    failure = f"{type(exc).__name__}: {exc}"
                with self._lock:
                    self.done += 1
                    if failure:
                        self.failures.append(failure)


def test_redis_stopped_and_restarted_under_load_fails_no_request() -> None:
    import redis

    first = RedisServer()
    with LoggedServer(LIUYI_REDIS_URL=first.url, LIUYI_CACHE_SIZE="0") as server, Load(server.url) as load:
        assert load.wait_for(20)
        first.stop()
        assert load.wait_for(20)  # served without the shared cache
        second = RedisServer(first.port)
        try:
            keys = redis.Redis(port=second.port)
            assert wait_until(lambda: keys.dbsize() > 0, 20), "the server went back to Redis once it returned"
            assert load.wait_for(10)
            keys.close()
        finally:
            second.stop()
        errors = value(scrape(server.url), "liuyi_cache_errors_total")
    assert load.failures == [] and load.done >= 50
    assert errors >= 1  # the outage was seen, and absorbed


def test_sigterm_ends_long_streams_with_done_or_shutting_down_and_exits() -> None:
    with (
        LoggedServer(LIUYI_SHUTDOWN_GRACE="0.2", LIUYI_CACHE_SIZE="0") as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        assert server.process is not None
        opened = [client.stream("POST", "/v1/translate/stream", json={"text": LONG}) for _ in range(4)]
        responses = [stream.__enter__() for stream in opened]
        lines = [response.iter_lines() for response in responses]
        assert all(json.loads(next(it))["type"] == "start" for it in lines)

        server.process.send_signal(signal.SIGTERM)
        assert server.wait_for(lambda r: r["message"] == "Shutting down")
        try:
            refused = httpx.post(f"{server.url}/v1/translate", json={"text": "你好。"}, timeout=5)
            assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down"
        except httpx.ConnectError:
            pass  # the listening socket is already closed: refused as well

        endings = []
        for it, response, stream in zip(lines, responses, opened, strict=True):
            events = [json.loads(line) for line in it if line]
            endings.append(events[-1])
            assert sum(e["type"] in ("done", "error") for e in events) == 1
            stream.__exit__(None, None, None)
            assert response.is_closed
        # uvicorn re-raises the SIGTERM it caught once it has shut down: status 0 or -SIGTERM
        assert server.process.wait(30) in (0, -signal.SIGTERM)
    for end in endings:
        assert end["type"] == "done" or (end["type"], end["code"]) == ("error", "shutting_down")
    assert error_records(server) == []


def test_overload_is_refused_with_retry_after_then_the_server_recovers() -> None:
    settings = {"LIUYI_MAX_CONCURRENT_STREAMS": "1", "LIUYI_MAX_QUEUED": "0", "LIUYI_CACHE_SIZE": "0"}
    with LoggedServer(**settings) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        start = threading.Barrier(12)

        def burst(_: int) -> httpx.Response:
            start.wait()
            return httpx.post(f"{server.url}/v1/translate", json={"text": LONG}, timeout=60)

        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(burst, range(12)))
        statuses = sorted(r.status_code for r in answers)
        assert set(statuses) == {200, 503}, statuses
        for refused in (r for r in answers if r.status_code == 503):
            assert refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["code"] == "overloaded"
        recovered = [client.post("/v1/translate", json={"text": SENTENCE}) for _ in range(3)]
        samples = scrape(server.url)
    assert [r.status_code for r in recovered] == [200, 200, 200]
    assert value(samples, "liuyi_active_streams", model=MODEL) == 0
    assert value(samples, "liuyi_queued_streams", model=MODEL) == 0
    assert value(samples, "liuyi_errors_total", code="overloaded") == statuses.count(503)
    assert error_records(server) == []


def hang_up_after_first_event(port: int) -> bytes:
    body = json.dumps({"text": LONG}).encode()
    request = (
        b"POST /v1/translate/stream HTTP/1.1\r\nHost: liuyi\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        received = b""
        while b'"type":"start"' not in received.replace(b" ", b""):
            chunk = sock.recv(4096)
            if not chunk:
                break
            received += chunk
    return received


def test_a_storm_of_clients_hanging_up_mid_stream_leaves_the_server_healthy() -> None:
    clients = 50
    with LoggedServer(LIUYI_CACHE_SIZE="0") as server:
        with ThreadPoolExecutor(clients) as pool:
            heads = list(pool.map(lambda _: hang_up_after_first_event(server.port), range(clients)))
        assert all(head.startswith(b"HTTP/1.1 200 ") for head in heads)

        def idle() -> bool:
            samples = scrape(server.url)
            return (
                value(samples, "liuyi_active_streams", model=MODEL) == 0
                and value(samples, "liuyi_queued_streams", model=MODEL) == 0
            )

        assert wait_until(idle), "every slot was given back"
        after = httpx.post(f"{server.url}/v1/translate", json={"text": SENTENCE}, timeout=30)
        samples = scrape(server.url)
    assert after.status_code == 200 and after.json()["translation"]
    assert value(samples, "liuyi_cancellations_total", reason="disconnect") >= 1
    statuses = {dict(labels)["status"] for (name, labels) in samples if name == "liuyi_requests_total"}
    assert not any(status.startswith("5") for status in statuses), statuses
    assert not any(name == "liuyi_errors_total" and n > 0 for (name, _), n in samples.items())
    assert error_records(server) == []
