"""A load generator light enough to share 2 cores with the server it measures.

httpx costs ~1 ms of CPU per request plus a parse per streamed chunk; at 16 users on this 2-core
machine that was a tenth of a core taken from the server being measured. Here every user keeps
one raw HTTP/1.1 keep-alive connection (asyncio streams), writes its request as preformatted
bytes and reads the response without parsing it: chunk sizes are read, each chunk is scanned
for ``"type":"delta"`` (time to first delta) and only the final record is searched for
``output_tokens``. The CPU this costs is measured (``time.process_time``) and printed next to
the numbers, so a reader can see that it stayed small.

Loopback only (callers check), bounded in time, no retries: a failure is counted, not hidden.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass, field

_OUTPUT_TOKENS = re.compile(rb'"usage":\{"input_tokens":\d+,"output_tokens":(\d+)')
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length: *(\d+)", re.IGNORECASE)


@dataclass
class Samples:
    """What N users measured; one instance per measurement."""

    latencies: list[float] = field(default_factory=list)  # seconds, successful requests
    # seconds to the first delta (streaming), steady state: every request but each user's first
    ttfts: list[float] = field(default_factory=list)
    # each user's first request: all users send it in the same millisecond, a burst no steady load
    # has (10 users at once wait for 10 encoder calls); reported on its own
    burst_ttfts: list[float] = field(default_factory=list)
    tokens: int = 0  # output tokens of successful requests (from the final record's usage)
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    wall: float = 0.0  # first request sent .. last answer read
    client_cpu: float = 0.0  # CPU seconds the load generator itself used (it shares the machine)

    @property
    def requests(self) -> int:
        return len(self.latencies) + self.errors

    def summary(self) -> dict[str, float]:
        lat = sorted(self.latencies) or [float("nan")]
        ttft = sorted(self.ttfts) or [float("nan")]
        wall = self.wall or float("nan")
        return {
            "requests": self.requests,
            "qps": len(self.latencies) / wall,
            "tokens_per_s": self.tokens / wall,
            "error_rate_%": 100.0 * self.errors / self.requests if self.requests else 0.0,
            "avg_ms": 1000 * statistics.fmean(lat),
            "p50_ms": 1000 * percentile(lat, 50),
            "p95_ms": 1000 * percentile(lat, 95),
            "p99_ms": 1000 * percentile(lat, 99),
            "ttft_p50_ms": 1000 * percentile(ttft, 50),
            "ttft_p95_ms": 1000 * percentile(ttft, 95),
            "ttft_burst_max_ms": 1000 * max(self.burst_ttfts, default=float("nan")),
            "client_cores": self.client_cpu / wall,
        }


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile of sorted ``values``."""
    index = min(len(values) - 1, max(0, round(pct / 100 * len(values) + 0.5) - 1))
    return values[index]


def progress(message: str) -> None:
    """Long runs say what they are doing (stderr, so stdout stays the report)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class _Connection:
    """One keep-alive HTTP/1.1 connection; reopened when the server closes it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._reader = self._writer = None

    async def post(self, path: str, body: bytes, samples: Samples, started: float, *, first: bool) -> None:
        """Send one request and read its whole answer, recording latency, TTFT (among the burst's
        when it is the user's ``first``) and tokens."""
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._reader, self._writer
        assert reader is not None
        writer.write(
            f"POST {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        samples.statuses[status] = samples.statuses.get(status, 0) + 1
        lowered = head.lower()
        if b"transfer-encoding: chunked" in lowered:
            ttfts = samples.burst_ttfts if first else samples.ttfts
            last = await self._read_chunks(reader, ttfts, started)
        else:
            length = _CONTENT_LENGTH.search(head)
            last = await reader.readexactly(int(length.group(1))) if length else await reader.read()
        if b"connection: close" in lowered:
            await self.close()
        found = _OUTPUT_TOKENS.search(last)
        if status != 200 or found is None or b'"type":"error"' in last:
            samples.errors += 1
            return
        samples.tokens += int(found.group(1))
        samples.latencies.append(time.perf_counter() - started)

    async def _read_chunks(self, reader: asyncio.StreamReader, ttfts: list[float], started: float) -> bytes:
        """Read a chunked body, adding its TTFT to ``ttfts``; returns its last two chunks (where the
        final record is)."""
        previous = last = b""
        first_delta = False
        while True:
            size = int((await reader.readline()).split(b";", 1)[0], 16)
            if size == 0:
                await reader.readline()  # the empty trailer section
                return previous + last
            previous, last = last, (await reader.readexactly(size + 2))[:-2]
            if not first_delta and b'"type":"delta"' in last:
                first_delta = True
                ttfts.append(time.perf_counter() - started)


async def run_users(
    host: str,
    port: int,
    *,
    users: int,
    duration: float,
    stream: bool,
    sentences: list[str],
    max_new_tokens: int | None,
    seed: int = 0,
    label: str = "",
) -> Samples:
    """``users`` closed-loop users (each sends its next request when its answer is complete) for
    ``duration`` seconds; requests in flight at the deadline are finished and counted."""
    samples = Samples()
    path = "/v1/translate/stream" if stream else "/v1/translate"
    extra = {"max_new_tokens": max_new_tokens} if max_new_tokens else {}
    bodies = [json.dumps({"text": text, **extra}, ensure_ascii=False).encode() for text in sentences]
    deadline = time.perf_counter() + duration

    async def user(index: int) -> None:
        rng = random.Random(seed * 1000 + index)  # the same sentence order as the engine's user
        connection = _Connection(host, port)
        first = True
        try:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                try:
                    await connection.post(path, rng.choice(bodies), samples, started, first=first)
                except (OSError, asyncio.IncompleteReadError, ValueError):
                    samples.errors += 1
                    await connection.close()
                first = False
        finally:
            await connection.close()

    async def ticker() -> None:
        while True:
            await asyncio.sleep(5.0)
            progress(f"  {label}: {samples.requests} requests, {samples.tokens} tokens so far")

    ticking = asyncio.ensure_future(ticker())
    start, cpu = time.perf_counter(), time.process_time()
    try:
        await asyncio.gather(*(user(i) for i in range(users)))
    finally:
        ticking.cancel()
    samples.wall = time.perf_counter() - start
    samples.client_cpu = time.process_time() - cpu
    return samples
