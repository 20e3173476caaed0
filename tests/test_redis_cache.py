"""The shared cache: two server processes share translations through a real redis-server, and
requests keep succeeding when Redis goes away."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests._live import ServerProcess, free_port, require_binary


class RedisServer:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()  # a given port: a restart where the server expects it
        self.process = subprocess.Popen(
            [
                require_binary("redis-server"),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)
        client.close()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


def stream(url: str, text: str) -> list[dict[str, Any]]:
    response = httpx.post(f"{url}/v1/translate/stream", json={"text": text}, timeout=30)
    assert response.status_code == 200
    return [json.loads(line) for line in response.text.splitlines()]


def test_two_server_processes_share_translations_through_redis(redis_server: RedisServer) -> None:
    """The second replica accepts at most 8 characters: the cache never answers what it refuses."""
    longer = "你喜欢吃苹果吗？我很好。"
    with (
        ServerProcess(LIUYI_REDIS_URL=redis_server.url) as first,
        ServerProcess(LIUYI_REDIS_URL=redis_server.url, LIUYI_MAX_INPUT_CHARS="8") as second,
    ):
        fresh = stream(first.url, "你喜欢吃苹果吗？")
        shared = stream(second.url, "你喜欢吃苹果吗？")
        assert not stream(first.url, longer)[0]["cached"]
        refused = httpx.post(f"{second.url}/v1/translate/stream", json={"text": longer}, timeout=30)
    assert not fresh[0]["cached"] and shared[0]["cached"] and shared[-1]["cached"]
    deltas = [[e["text"] for e in events if e["type"] == "delta"] for events in (fresh, shared)]
    assert deltas[0] == deltas[1]
    assert shared[-1]["translation"] == fresh[-1]["translation"] == "Do you like to eat?"
    assert refused.status_code == 413 and refused.json()["error"]["code"] == "text_too_long"


def test_requests_succeed_when_redis_stops_mid_test(redis_server: RedisServer) -> None:
    with ServerProcess(LIUYI_REDIS_URL=redis_server.url, LIUYI_CACHE_SIZE="0") as server:
        assert stream(server.url, "我很好。")[-1]["translation"] == "I'm very well."
        redis_server.stop()
        for text in ("我不知道。", "我们走吧！", "我很好。"):
            events = stream(server.url, text)
            assert events[-1]["type"] == "done" and events[-1]["translation"]
        plain = httpx.post(f"{server.url}/v1/translate", json={"text": "他是我的朋友。"}, timeout=30)
        assert plain.status_code == 200
        metrics = httpx.get(f"{server.url}/metrics").text
    errors = [line for line in metrics.splitlines() if line.startswith("liuyi_cache_errors_total")]
    assert errors and float(errors[0].split()[-1]) >= 1
