"""Through a real nginx (deploy/nginx/liuyi.conf, started by deploy/local-cluster.sh) in front of
replicas running in this process: streams arrive incrementally, a client hanging up at nginx stops
the replica's decoder, overload and errors come back as JSON, /metrics stays internal, SSE resumes
on another replica. The StepGate holds decoder steps, so ordering is proven without timing.

Each cluster here is stopped with SIGINT, as Ctrl-C would, and must leave no process behind.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from decoding import Bundle, load_bundle
from server import Settings
from tests import test_live_server
from tests._cluster import ROOT, Cluster
from tests._live import LiveServer, StepGate, free_port, gated, require_binary
from tests.test_live_server import QUESTION, disconnects, wait_until

# fixtures shared with the direct tests: `live` (a replica, cache off) and `gate` (its decoder held)
live = test_live_server.live
gate = test_live_server.gate

STREAM_ROUTES = {
    "ndjson": ("/v1/translate/stream", {"text": QUESTION}, {}),
    "sse": ("/v1/translate/stream", {"text": QUESTION}, {"accept": "text/event-stream"}),
    "openai": (
        "/v1/chat/completions",
        {"model": "liuyi-zh-en", "stream": True, "messages": [{"role": "user", "content": QUESTION}]},
        {},
    ),
}


@contextlib.contextmanager
def nginx_in_front_of(tmp_path: Path, *replicas: LiveServer | int, **options: Any) -> Iterator[Cluster]:
    """nginx alone (local-cluster.sh --upstream ...) in front of these replicas (or bare ports)."""
    ports = [replica if isinstance(replica, int) else replica.port for replica in replicas]
    upstreams = [f"127.0.0.1:{port}" for port in ports]
    with Cluster(tmp_path / "cluster", upstreams=upstreams, stop_signal=signal.SIGINT, **options) as cluster:
        yield cluster
    assert cluster.returncode == 130  # Ctrl-C: everything stopped, the script says so
    assert "local-cluster: stopped" in cluster.output


def content_of(payload: dict[str, Any]) -> str:
    """The translated text a stream payload carries (native delta or OpenAI chunk)."""
    if payload.get("type") == "delta":
        return str(payload["text"])
    choices = payload.get("choices") or [{}]
    return str(choices[0].get("delta", {}).get("content") or "")


class CurlStream:
    """`curl --no-buffer` reading a stream through nginx, one payload at a time (NDJSON lines or
    SSE `data:` lines). `--max-time` bounds the test if nginx ever buffers the stream."""

    def __init__(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        command = [require_binary("curl"), "--no-buffer", "-sS", "--max-time", "30", "-X", "POST", url]
        command += ["-H", "content-type: application/json", "-d", json.dumps(body)]
        for name, value in headers.items():
            command += ["-H", f"{name}: {value}"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE)

    def next_payload(self) -> dict[str, Any] | None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode().strip()
            if line.startswith("data:"):
                line = line.removeprefix("data:").strip()
            elif not line.startswith("{"):
                continue  # SSE event:/id: lines, blank separators, comments
            return None if line == "[DONE]" else dict(json.loads(line))
        return None

    def rest(self) -> list[dict[str, Any]]:
        payloads = []
        while (payload := self.next_payload()) is not None:
            payloads.append(payload)
        return payloads

    def close(self) -> int:
        code = self.process.wait(30)
        assert self.process.stdout is not None
        self.process.stdout.close()
        return code


@pytest.mark.parametrize("flavour", list(STREAM_ROUTES))
def test_streams_through_nginx_arrive_while_the_decoder_is_still_held(
    tmp_path: Path, live: LiveServer, gate: StepGate, flavour: str
) -> None:
    path, body, headers = STREAM_ROUTES[flavour]
    with nginx_in_front_of(tmp_path, live) as cluster:
        curl = CurlStream(cluster.url + path, body, headers)
        try:
            gate.allow(1)
            first_text = ""
            while not first_text:
                payload = curl.next_payload()
                assert payload is not None, "the stream ended before its first text"
                first_text = content_of(payload)
            assert first_text == "Do"
            assert gate.wait_for_steps(2)  # the decoder is held at step 2 of 7: nothing more exists yet
            assert curl.process.poll() is None
            gate.open()
            rest = curl.rest()
        finally:
            gate.open()
            code = curl.close()
    assert code == 0
    assert first_text + "".join(content_of(payload) for payload in rest) == "Do you like to eat?"


def test_curl_interrupted_at_nginx_stops_the_replica_within_one_step(
    tmp_path: Path, live: LiveServer, gate: StepGate
) -> None:
    scheduler = live.state.service.schedulers["cn2en-gru-zh-en"]
    with nginx_in_front_of(tmp_path, live) as cluster:
        curl = CurlStream(cluster.url + "/v1/translate/stream", {"text": QUESTION}, {})
        try:
            gate.allow(1)
            first, second = curl.next_payload(), curl.next_payload()
            assert first and second and (first["type"], second["type"]) == ("start", "delta")
            assert gate.wait_for_steps(2)  # step 2 waits at the gate when the user presses Ctrl-C
            curl.process.send_signal(signal.SIGINT)
            assert wait_until(lambda: disconnects(live) == 1)  # nginx closed the replica's connection
        finally:
            gate.open()  # step 2 may finish; no step 3 may start
            curl.close()
        assert scheduler.wait_idle(10)
    assert gate.started == 2  # of the 7 steps this translation needs
    assert scheduler.active == 0 and scheduler.queued == 0


def test_sse_resume_through_nginx_continues_the_stream_on_the_other_replica(
    tmp_path: Path, default_bundle: Bundle
) -> None:
    """Replica A serves the first connection and then goes away; the reconnect with Last-Event-ID
    can only reach replica B, which decodes the same deterministic stream and skips what was seen."""
    path = "/v1/translate/stream?text=" + QUESTION
    settings = Settings(cache_size=0)
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(LiveServer(settings, bundles=[default_bundle]))
        b = stack.enter_context(LiveServer(settings, bundles=[load_bundle()]))  # its own model copy
        replicas = {"a": a, "b": b}
        cluster = stack.enter_context(nginx_in_front_of(tmp_path, a, b))
        reference = sse_events(httpx.get(a.url + path, timeout=10).text)
        assert [e["event"] for e in reference][:2] == ["start", "delta"] and reference[-1]["event"] == "done"

        assert wait_until(lambda: stream_requests(a) == 1)  # the reference is counted once finished
        counts = {name: stream_requests(replica) for name, replica in replicas.items()}
        with (
            httpx.Client(base_url=cluster.url, timeout=10) as client,
            client.stream("GET", path) as first,
        ):
            seen = []
            for event in sse_events_of(first.iter_lines()):
                seen.append(event)
                if event["id"] == "2":
                    break  # the connection drops here

        def served_by() -> list[str]:  # counted when the replica has finished with the request
            return [name for name, replica in replicas.items() if stream_requests(replica) > counts[name]]

        assert wait_until(lambda: len(served_by()) == 1)
        served = served_by()[0]
        other = "b" if served == "a" else "a"
        before = stream_requests(replicas[other])
        replicas[served].__exit__()  # the replica that served the first connection stops

        resumed = httpx.get(cluster.url + path, headers={"Last-Event-ID": "2"}, timeout=10)
        assert resumed.status_code == 200
        rest = sse_events(resumed.text)
        assert wait_until(lambda: stream_requests(replicas[other]) == before + 1)
    assert [e["id"] for e in seen] == ["0", "1", "2"]
    assert [e["id"] for e in rest] == [str(i) for i in range(3, len(reference))]
    assert stable(seen + rest) == stable(reference)  # the same stream, whichever replica sent each part


def stable(events: list[dict[str, str]]) -> list[tuple[str, str, dict[str, Any]]]:
    """Events without what differs between two runs of one stream (request id, timings)."""
    result = []
    for event in events:
        data = {k: v for k, v in json.loads(event["data"]).items() if k not in ("id", "timings")}
        result.append((event["id"], event["event"], data))
    return result


def stream_requests(replica: LiveServer) -> float:
    counter = replica.state.metrics.requests.labels("/v1/translate/stream", "200")
    return float(counter._value.get())


def sse_events(text: str) -> list[dict[str, str]]:
    return list(sse_events_of(iter(text.splitlines())))


def sse_events_of(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """`event`, `id` and `data` of each SSE message (comment pings skipped)."""
    fields: dict[str, str] = {}
    for line in lines:
        if not line:
            if fields:
                yield fields
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.strip()
    if fields:
        yield fields


def test_replicas_overloaded_answer_503_with_retry_after_through_nginx(
    tmp_path: Path, default_bundle: Bundle
) -> None:
    settings = Settings(cache_size=0, max_concurrent_streams=1, max_queued=0, retry_after=7)
    with (
        LiveServer(settings, bundles=[default_bundle]) as a,
        LiveServer(settings, bundles=[default_bundle]) as b,
        gated(default_bundle) as gate,
        nginx_in_front_of(tmp_path, a, b) as cluster,
        httpx.Client(base_url=cluster.url, timeout=10) as client,
        client.stream("POST", "/v1/translate/stream", json={"text": QUESTION}) as held_1,
        client.stream("POST", "/v1/translate/stream", json={"text": "我很好。"}) as held_2,
    ):
        held = [held_1.iter_lines(), held_2.iter_lines()]
        assert [json.loads(next(lines))["type"] for lines in held] == ["start", "start"]
        schedulers = [s for r in (a, b) for s in r.state.service.schedulers.values()]
        # one stream on each replica, decoding (held at the gate): both are full
        assert wait_until(lambda: [s.active for s in schedulers] == [1, 1])

        refused = client.post("/v1/translate", json={"text": "我们走吧！"})
        compat = client.post(
            "/v1/chat/completions",
            json={"model": "liuyi-zh-en", "messages": [{"role": "user", "content": "我们走吧！"}]},
        )
        gate.open()
        assert [[json.loads(line) for line in lines][-1]["type"] for lines in held] == ["done", "done"]
        recovered = client.post("/v1/translate", json={"text": "我们走吧！"})
    assert refused.status_code == 503 and refused.headers["retry-after"] == "7"
    assert refused.json()["error"]["code"] == "overloaded"  # the replica's own answer, unchanged
    assert compat.status_code == 429 and compat.headers["retry-after"] == "7"
    assert compat.json()["error"]["code"] == "overloaded" and compat.json()["error"]["type"]
    assert recovered.status_code == 200


def test_errors_nginx_produces_itself_are_json_in_liuyis_shape(tmp_path: Path, live: LiveServer) -> None:
    with nginx_in_front_of(tmp_path, live) as cluster:
        too_large = httpx.post(
            cluster.url + "/v1/translate",
            content=b'{"text": "' + b"x" * 300_000 + b'"}',
            headers={"content-type": "application/json", "x-request-id": "big-1"},
            timeout=10,
        )
        long_uri = httpx.get(cluster.url + "/v1/models?x=" + "a" * 9000, timeout=10)
        big_header = httpx.get(cluster.url + "/healthz", headers={"x-big": "a" * 20000}, timeout=10)
        garbage = raw_exchange(cluster.port, b"NONSENSE\r\n\r\n")
        replica_metrics = live.state.metrics.render().decode()
    assert too_large.status_code == 413
    assert too_large.headers["x-request-id"] == "big-1"
    assert too_large.json()["error"] == {
        "code": "body_too_large",
        "message": "request body larger than 262144 bytes",
        "limit": 262144,
    }
    assert 'route="/v1/translate"' not in replica_metrics  # refused by nginx: the replica never saw it
    assert (long_uri.status_code, long_uri.json()["error"]["code"]) == (414, "uri_too_long")
    assert (big_header.status_code, big_header.json()["error"]["code"]) == (400, "headers_too_large")
    head, _, body = garbage.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and b"Content-Type: application/json" in head
    assert json.loads(body)["error"]["code"] == "bad_request"  # even without a request line to route
    for response in (too_large, long_uri, big_header):
        assert response.headers["content-type"] == "application/json"
        assert set(response.json()) == {"error"} and response.json()["error"]["message"]

    with nginx_in_front_of(tmp_path / "down", free_port()) as cluster:  # nothing listens there
        down = httpx.post(cluster.url + "/v1/translate", json={"text": "我很好。"}, timeout=10)
    assert down.status_code == 502 and down.headers["retry-after"] == "1"
    assert down.headers["content-type"] == "application/json"
    assert down.json()["error"]["code"] == "no_replica" and down.json()["error"]["message"]


def raw_exchange(port: int, request: bytes) -> bytes:
    """Send bytes that no HTTP client would send; everything nginx answers before closing."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_metrics_answer_internal_addresses_only_and_request_ids_pass_through(
    tmp_path: Path, live: LiveServer
) -> None:
    """nginx trusts X-Forwarded-For from 127.0.0.1 here (a load balancer in front), so the test can
    speak from a public address (203.0.113.0/24 is reserved for documentation)."""
    with (
        nginx_in_front_of(tmp_path, live, trust_forwarded_for="127.0.0.1") as cluster,
        httpx.Client(base_url=cluster.url, timeout=10) as client,
    ):
        public = {"x-forwarded-for": "203.0.113.9"}
        denied = client.get("/metrics", headers=public)
        private = client.get("/metrics", headers={"x-forwarded-for": "10.1.2.3"})
        local = client.get("/metrics")
        translated = client.post("/v1/translate", json={"text": "我很好。"}, headers=public)
        own_id = client.get("/healthz", headers={"x-request-id": "client-id-7"})
        fresh_id = client.get("/healthz")
    assert denied.status_code == 403
    assert denied.json() == {"error": {"code": "forbidden", "message": "not available from this address"}}
    assert private.status_code == 200 and local.status_code == 200
    assert "liuyi_requests_total" in local.text
    assert translated.status_code == 200  # only /metrics is restricted
    assert own_id.headers["x-request-id"] == "client-id-7"  # passed to the replica, echoed back
    assert len(fresh_id.headers["x-request-id"]) == 32  # nginx's $request_id (liuyi's own are 16)


def test_nginx_limits_agree_with_liuyis_own() -> None:
    """The proxy's limits are set from liuyi's defaults; this catches one changing without the other."""
    conf = (ROOT / "deploy" / "nginx" / "liuyi.conf").read_text(encoding="utf-8")

    def seconds(directive: str) -> float:
        values = re.findall(rf"^\s*{directive} (\d+)s;", conf, flags=re.MULTILINE)
        assert len(values) == 1, directive
        return float(values[0])

    defaults = Settings()
    body_limit = re.findall(r"^\s*client_max_body_size (\d+)k;", conf, flags=re.MULTILINE)
    assert [int(value) * 1024 for value in body_limit] == [defaults.max_body_bytes]
    assert f'"limit": {defaults.max_body_bytes}' in conf  # nginx's own 413 names the same limit
    assert seconds("proxy_read_timeout") > max(defaults.request_timeout, defaults.heartbeat_interval)
    # idle upstream connections are dropped by nginx before uvicorn drops them under its feet
    upstream = conf[conf.index("upstream liuyi {") : conf.index("}", conf.index("upstream liuyi {"))]
    idle = re.findall(r"keepalive_timeout (\d+)s;", upstream)
    assert len(idle) == 1 and float(idle[0]) < uvicorn.Config(app=None).timeout_keep_alive
