"""Soak test: minutes of mixed traffic against one server, looking for errors and memory growth.

A bounded number of concurrent clients (default 8) send, for ``--minutes``, a seeded random mix of
what real clients send: native JSON and NDJSON, SSE, the OpenAI, LibreTranslate and DeepL routes,
streams the client abandons after the first delta, and bad inputs (which must get a 4xx JSON error,
never a 5xx). Texts are everyday sentences, some repeated (cache hits), some made unique, some long.

Reported: requests, errors (any 5xx, transport failure, unexpected status or a stream that does not
end with ``done``), P50/P95 latency per kind, error records in the server's log (when it started the
server), and the server's resident memory right after warm-up and at the end (``process_*`` from
``/metrics``, summed over workers) with the growth in percent. The issue's target: 0 errors and
< 5 % RSS growth after warm-up.

    python bench/soak.py --minutes 10 --out bench/results/soak-10min.md
    python bench/soak.py --minutes 1 --url http://127.0.0.1:8000     # a server you started
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._machine import machine_report
from bench.load import _percentile, wait_ready

ROOT = Path(__file__).resolve().parent.parent
SENTENCES: list[str] = [
    record["text"] for record in json.loads((ROOT / "tests" / "data" / "cn2en_golden.json").read_text())
]
# kind -> weight in the mix
MIX = {
    "json": 20,
    "ndjson": 20,
    "sse": 10,
    "openai": 8,
    "openai_stream": 8,
    "libretranslate": 8,
    "deepl": 8,
    "cancelled": 8,
    "bad_input": 10,
}
BAD_INPUTS: list[tuple[str, str, bytes, str]] = [  # (path, content type, body, what)
    ("/v1/translate", "application/json", b'{"text": ""}', "empty text"),
    ("/v1/translate", "application/json", b'{"text": 42}', "wrong type"),
    ("/v1/translate", "application/json", b'{"text": "\xe4\xbd', "truncated JSON"),
    ("/v1/translate", "application/json", b'{"text": "hi", "source": "xx"}', "unknown language"),
    ("/v1/translate/stream", "application/json", b"[]", "not an object"),
    ("/v1/chat/completions", "application/json", b'{"model": "nope", "messages": []}', "unknown model"),
    ("/translate", "application/json", b'{"q": "hi"}', "missing target"),
    ("/v2/translate", "application/json", b'{"text": ["hi"]}', "missing target_lang"),
]


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    requests: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)  # "kind: what went wrong"

    def record(self, kind: str, seconds: float, problem: str | None) -> None:
        self.requests[kind] += 1
        if problem:
            self.errors[f"{kind}: {problem}"] += 1
        else:
            self.latencies[kind].append(seconds)


def pick_text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.4:
        return rng.choice(SENTENCES[:50])  # a small set: cache hits
    if roll < 0.9:
        return f"{rng.choice(SENTENCES)}第{rng.randrange(10**6)}次。"  # unique: decoded
    return "".join(rng.sample(SENTENCES, 12))  # long: a dozen segments


def chat_body(text: str, *, stream: bool = False) -> dict[str, Any]:
    return {"model": "liuyi-auto", "messages": [{"role": "user", "content": text}], "stream": stream}


async def one(client: httpx.AsyncClient, kind: str, rng: random.Random) -> str | None:
    """Send one request of ``kind``; returns what went wrong, or None."""
    text = pick_text(rng)
    if kind == "json":
        response = await client.post("/v1/translate", json={"text": text})
        return _expect(response, 200, lambda body: bool(body["translation"]))
    if kind in ("ndjson", "sse", "cancelled"):
        headers = {"accept": "text/event-stream"} if kind == "sse" else {}
        async with client.stream("POST", "/v1/translate/stream", json={"text": text}, headers=headers) as r:
            if r.status_code != 200:
                return f"status {r.status_code}"
            last = ""
            async for line in r.aiter_lines():
                if kind == "cancelled" and '"delta"' in line:
                    return None  # hang up mid-stream: the server must just stop
                if line.strip():
                    last = line
            return None if '"done"' in last else f"stream ended with {last[:80]!r}"
    if kind == "openai":
        response = await client.post("/v1/chat/completions", json=chat_body(text))
        return _expect(response, 200, lambda b: bool(b["choices"][0]["message"]["content"]))
    if kind == "openai_stream":
        async with client.stream("POST", "/v1/chat/completions", json=chat_body(text, stream=True)) as r:
            if r.status_code != 200:
                return f"status {r.status_code}"
            lines = [line async for line in r.aiter_lines() if line.strip()]
            return None if lines and lines[-1] == "data: [DONE]" else "stream without [DONE]"
    if kind == "libretranslate":
        response = await client.post("/translate", data={"q": text, "source": "zh", "target": "en"})
        return _expect(response, 200, lambda b: bool(b["translatedText"]))
    if kind == "deepl":
        response = await client.post("/v2/translate", json={"text": [text], "target_lang": "EN-US"})
        return _expect(response, 200, lambda b: bool(b["translations"][0]["text"]))
    path, content_type, raw, what = rng.choice(BAD_INPUTS)
    response = await client.post(path, content=raw, headers={"content-type": content_type})
    if not 400 <= response.status_code < 500:
        return f"{what}: status {response.status_code}"
    try:
        response.json()
    except ValueError:
        return f"{what}: error body is not JSON"
    return None


def _expect(response: httpx.Response, status: int, check: Callable[[Any], bool]) -> str | None:
    if response.status_code != status:
        return f"status {response.status_code}"
    try:
        return None if check(response.json()) else "empty result"
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return f"unexpected body ({type(exc).__name__})"


async def run_clients(url: str, clients: int, seconds: float, seed: int, tally: Tally) -> None:
    kinds, weights = list(MIX), list(MIX.values())
    stop = time.monotonic() + seconds

    async def client_loop(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            while time.monotonic() < stop:
                kind = rng.choices(kinds, weights)[0]
                started = time.perf_counter()
                try:
                    problem = await one(client, kind, rng)
                except httpx.HTTPError as exc:
                    problem = f"{type(exc).__name__}"
                tally.record(kind, time.perf_counter() - started, problem)

    await asyncio.gather(*(client_loop(i) for i in range(clients)))


def server_rss_bytes(url: str) -> float:
    """Resident memory of the server (all workers) from its own /metrics."""
    total = 0.0
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("process_resident_memory_bytes"):
            total += float(line.split()[-1])
    return total


def start_server(port: int, workers: int, log: IO[str]) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "LIUYI_PORT": str(port), "LIUYI_HOST": "127.0.0.1", "LIUYI_WORKERS": str(workers)}
    env["LIUYI_LOG_LEVEL"] = "warning"  # access lines would dominate; errors and warnings are kept
    process = subprocess.Popen(
        [sys.executable, "-m", "server", "serve"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(process, url)
    return process, url


def ms(values: list[float], pct: float) -> float:
    """The ``pct`` percentile in milliseconds (nan without values)."""
    return 1000 * _percentile(sorted(values), pct) if values else float("nan")


def render(
    args: argparse.Namespace, tally: Tally, rss: tuple[float, float], logged_errors: int | None
) -> str:
    warm, end = rss
    server = args.url or f"started by the script, {args.workers} worker(s)"
    growth = 100 * (end - warm) / warm if warm else float("nan")
    total = sum(tally.requests.values())
    errors = sum(tally.errors.values())
    every = [s for values in tally.latencies.values() for s in values]
    lines = [
        f"`python bench/soak.py {' '.join(sys.argv[1:])}`",
        "",
        machine_report(),
        "",
        f"{args.clients} concurrent clients, {args.minutes:g} min "
        f"(+ {args.warm_up:g} s warm-up, not counted); "
        f"server: {server}",
        "",
        f"**{total} requests, {errors} errors; P50 {ms(every, 50):.1f} ms, "
        f"P95 {ms(every, 95):.1f} ms; server RSS {warm / 2**20:.1f} MB after warm-up, "
        f"{end / 2**20:.1f} MB at the end ({growth:+.1f} %)**",
        "",
        "| kind | requests | errors | P50 ms | P95 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind in MIX:
        kind_errors = sum(n for key, n in tally.errors.items() if key.startswith(kind + ":"))
        values = tally.latencies[kind]
        lines.append(
            f"| {kind} | {tally.requests[kind]} | {kind_errors} | {ms(values, 50):.1f} | "
            f"{ms(values, 95):.1f} |"
        )
    lines.append("")
    if logged_errors is not None:
        lines.append(f"error records in the server's log: {logged_errors}")
    for problem, n in tally.errors.most_common(10):
        lines.append(f"- {n} × {problem}")
    lines.append(
        "\nLatency is per request to its last byte (abandoned streams: to the first delta); "
        "`cancelled` streams are hung up after their first delta on purpose, `bad_input` requests "
        "must get a 4xx JSON error."
    )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="measured duration (max 120)")
    parser.add_argument("--url", help="soak this running server (loopback only) instead of starting one")
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--workers", type=int, default=1, help="worker processes of the server we start")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--warm-up", type=float, default=60.0, help="seconds of load before RSS is taken")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="also write the Markdown report here")
    args = parser.parse_args()
    if not 0 < args.minutes <= 120:
        parser.error("--minutes must be in (0, 120]")
    print(machine_report(), flush=True)

    if args.url and urlparse(args.url).hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("load is only ever sent to loopback")
    with tempfile.TemporaryFile("w+") as log:
        process, url = (None, args.url) if args.url else start_server(args.port, args.workers, log)
        try:
            asyncio.run(run_clients(url, args.clients, args.warm_up, args.seed, Tally()))
            warm_rss = server_rss_bytes(url)
            tally = Tally()
            asyncio.run(run_clients(url, args.clients, args.minutes * 60, args.seed + 1, tally))
            end_rss = server_rss_bytes(url)
        finally:
            if process is not None:
                process.terminate()
                process.wait(60)
        log.seek(0)
        records = [json.loads(line) for line in log if line.startswith("{")]
    logged_errors = sum(r["level"] in ("error", "critical") for r in records) if process else None
    report = render(args, tally, (warm_rss, end_rss), logged_errors)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report, encoding="utf-8")
    print(report)
    return 0 if not tally.errors else 1


if __name__ == "__main__":
    sys.exit(main())
