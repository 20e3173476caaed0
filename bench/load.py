"""Server load benchmark: the seed articles' protocol, done properly.

N concurrent users (default 10) send short everyday sentences to a running `liuyi serve` for a fixed
duration, streaming (NDJSON, time to first delta measured) and non-streaming (JSON), and we report
average, P50, P95, P99 latency, TTFT, QPS and error rate — plus a sweep over concurrency 1..64 for
throughput and P95. Writes a Markdown report and PNG plots (matplotlib).

Loopback only, bounded in time. By default it starts its own server with the response cache OFF, so
the numbers measure the model, not the cache (pass --cache to measure the typical repeated-phrase
case, --url to test a server you started).

    python bench/load.py                               # bundled model, 10 users, 20 s per mode
    python bench/load.py --model bench/out/opus-mt-zh-en-random-int8-bundle
    python bench/load.py --sweep 1,2,4,8,16,32,64 --duration 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
SENTENCES = [
    record["text"] for record in json.loads((ROOT / "tests" / "data" / "cn2en_golden.json").read_text())
]


@dataclass
class Samples:
    latencies: list[float] = field(default_factory=list)  # seconds, successful requests
    ttfts: list[float] = field(default_factory=list)  # seconds to the first delta (streaming)
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    wall: float = 0.0
    client_cpu: float = 0.0  # CPU seconds the load generator itself used (it shares the machine)

    @property
    def requests(self) -> int:
        return len(self.latencies) + self.errors

    def summary(self) -> dict[str, float]:
        lat = sorted(self.latencies) or [float("nan")]
        summary = {
            "requests": self.requests,
            "qps": len(self.latencies) / self.wall if self.wall else 0.0,
            "error_rate_%": 100.0 * self.errors / self.requests if self.requests else 0.0,
            "avg_ms": 1000 * statistics.fmean(lat),
            "p50_ms": 1000 * _percentile(lat, 50),
            "p95_ms": 1000 * _percentile(lat, 95),
            "p99_ms": 1000 * _percentile(lat, 99),
            "client_cores": self.client_cpu / self.wall if self.wall else 0.0,
        }
        if self.ttfts:
            ttft = sorted(self.ttfts)
            summary.update(ttft_p50_ms=1000 * _percentile(ttft, 50), ttft_p95_ms=1000 * _percentile(ttft, 95))
        return summary


def _percentile(values: list[float], pct: float) -> float:
    index = min(len(values) - 1, max(0, round(pct / 100 * len(values) + 0.5) - 1))  # nearest rank
    return values[index]


async def one_request(client: httpx.AsyncClient, text: str, stream: bool, samples: Samples) -> None:
    """One request; cheap on purpose: bytes are scanned, not parsed, so the load generator (which shares
    the machine with the server) spends as little CPU as it can per request."""
    start = time.perf_counter()
    try:
        if stream:
            async with client.stream("POST", "/v1/translate/stream", json={"text": text}) as response:
                samples.statuses[response.status_code] = samples.statuses.get(response.status_code, 0) + 1
                if response.status_code != 200:
                    await response.aread()
                    samples.errors += 1
                    return
                first = None
                failed = False
                async for chunk in response.aiter_bytes():
                    if first is None and b'"type":"delta"' in chunk:
                        first = time.perf_counter() - start
                    failed = failed or b'"type":"error"' in chunk
                if failed:
                    samples.errors += 1
                    return
                if first is not None:
                    samples.ttfts.append(first)
        else:
            response = await client.post("/v1/translate", json={"text": text})
            samples.statuses[response.status_code] = samples.statuses.get(response.status_code, 0) + 1
            if response.status_code != 200:
                samples.errors += 1
                return
        samples.latencies.append(time.perf_counter() - start)
    except httpx.HTTPError:
        samples.errors += 1


async def _users(url: str, users: int, duration: float, stream: bool, seed: int) -> Samples:
    samples = Samples()
    rng = random.Random(seed)
    limits = httpx.Limits(max_connections=users, max_keepalive_connections=users)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as client:
        deadline = time.perf_counter() + duration

        async def user() -> None:
            while time.perf_counter() < deadline:
                await one_request(client, rng.choice(SENTENCES), stream, samples)

        start, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(user() for _ in range(users)))
        samples.wall = time.perf_counter() - start
        samples.client_cpu = time.process_time() - cpu
    return samples


def _process_users(args: tuple[str, int, float, bool, int]) -> Samples:
    return asyncio.run(_users(*args))


def run_load(url: str, users: int, duration: float, stream: bool, processes: int = 0) -> Samples:
    """``users`` concurrent users for ``duration`` seconds, spread over load-generator processes
    (default: one per 8 users, at most one per core) so that the generator, not the server, does
    not become the bottleneck at high concurrency."""
    import concurrent.futures
    import multiprocessing

    processes = processes or max(1, min(users // 8, os.cpu_count() or 1))
    if processes == 1:
        return asyncio.run(_users(url, users, duration, stream, 0))
    shares = [users // processes + (1 if i < users % processes else 0) for i in range(processes)]
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(processes, mp_context=context) as pool:
        parts = list(
            pool.map(_process_users, [(url, share, duration, stream, i) for i, share in enumerate(shares)])
        )
    merged = Samples(wall=max(part.wall for part in parts))
    for part in parts:
        merged.latencies += part.latencies
        merged.ttfts += part.ttfts
        merged.errors += part.errors
        merged.client_cpu += part.client_cpu
        for status, count in part.statuses.items():
            merged.statuses[status] = merged.statuses.get(status, 0) + count
    return merged


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], str]:
    port = args.port
    env = {
        **os.environ,
        "LIUYI_PORT": str(port),
        "LIUYI_HOST": "127.0.0.1",
        "LIUYI_LOG_LEVEL": "warning",
        "LIUYI_CACHE_SIZE": "1024" if args.cache else "0",
        "LIUYI_MAX_QUEUED": "256",
    }
    if args.threads:
        env["LIUYI_THREADS"] = str(args.threads)
    if args.batch:
        env["LIUYI_MAX_CONCURRENT_STREAMS"] = str(args.batch)
    if args.model:
        env["LIUYI_MODELS"] = str(args.model)
    process = subprocess.Popen(
        [sys.executable, "-m", "server", "serve"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(process, url)
    return process, url


def wait_ready(process: subprocess.Popen[bytes], url: str, timeout: float = 120) -> None:
    """Poll /readyz of a server we started.

    Raises:
        RuntimeError: it exited or was not ready within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("server did not become ready")
        time.sleep(0.1)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="benchmark this running server (loopback only) instead of starting one")
    parser.add_argument("--model", type=Path, help="bundle for the server we start (default: bundled)")
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument(
        "--threads", type=int, default=0, help="server's ONNX Runtime threads (0: its default)"
    )
    parser.add_argument(
        "--batch", type=int, default=0, help="server's max concurrent streams (batch size; 0: its default)"
    )
    parser.add_argument("--cache", action="store_true", help="leave the server's response cache on")
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per measurement (max 120)")
    parser.add_argument("--sweep", default="1,2,4,8,16,32,64", help="concurrency levels; '' to skip")
    parser.add_argument("--out", type=Path, default=OUT / "load")
    args = parser.parse_args()
    duration = min(args.duration, 120.0)

    process = None
    if args.url:
        if urlparse(args.url).hostname not in ("127.0.0.1", "localhost", "::1"):
            parser.error("load is only ever sent to loopback")
        url = args.url
    else:
        process, url = start_server(args)
    try:
        model = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
        run_load(url, args.users, 2.0, stream=False)  # warm-up, not reported
        results = {
            mode: run_load(url, args.users, duration, stream=(mode == "stream"))
            for mode in ("json", "stream")
        }
        sweep = {}
        for level in [int(x) for x in args.sweep.split(",") if x]:
            sweep[level] = run_load(url, level, max(3.0, duration / 2), stream=True).summary()
        rss = peak_rss_mb(process.pid) if process else float("nan")
    finally:
        if process:
            process.terminate()
            process.wait(30)
    report = render(args, model, results, sweep, rss)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.md").write_text(report, encoding="utf-8")
    plot(args.out, results, sweep)
    print(report)
    return 0


def render(
    args: argparse.Namespace,
    model: str,
    results: dict[str, Samples],
    sweep: dict[int, dict[str, float]],
    rss: float,
) -> str:
    command = "python bench/load.py " + " ".join(sys.argv[1:])
    cache = "on" if args.cache else "off"
    lines = [
        f"`{command.strip()}` — model `{model}`, {args.users} users, cache {cache}",
        "",
        "| mode | requests | QPS | avg ms | P50 ms | P95 ms | P99 ms | TTFT P50 ms | TTFT P95 ms | err % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, samples in results.items():
        s = samples.summary()
        lines.append(
            f"| {mode} | {s['requests']:.0f} | {s['qps']:.0f} | {s['avg_ms']:.1f} | {s['p50_ms']:.1f} | "
            f"{s['p95_ms']:.1f} | {s['p99_ms']:.1f} | {s.get('ttft_p50_ms', float('nan')):.1f} | "
            f"{s.get('ttft_p95_ms', float('nan')):.1f} | {s['error_rate_%']:.2f} |"
        )
    if sweep:
        lines += [
            "",
            "| users (streaming) | QPS | P95 ms | TTFT P95 ms | errors % | load generator's CPU (cores) |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for level, s in sweep.items():
            lines.append(
                f"| {level} | {s['qps']:.0f} | {s['p95_ms']:.1f} | "
                f"{s.get('ttft_p95_ms', float('nan')):.1f} | "
                f"{s['error_rate_%']:.2f} | {s['client_cores']:.2f} |"
            )
    if rss == rss:  # not NaN
        lines += ["", f"server peak RSS: {rss:.0f} MB"]
    return "\n".join(lines) + "\n"


def plot(out: Path, results: dict[str, Samples], sweep: dict[int, dict[str, float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for mode, samples in results.items():
        ax.hist([1000 * x for x in samples.latencies], bins=50, alpha=0.6, label=mode)
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("requests")
    ax.set_title("Latency distribution")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "latency.png", dpi=120)
    plt.close(fig)
    if sweep:
        levels = list(sweep)
        fig, ax1 = plt.subplots(figsize=(7, 4))
        ax1.plot(levels, [sweep[x]["qps"] for x in levels], "o-", color="tab:blue", label="QPS")
        ax1.set_xscale("log", base=2)
        ax1.set_xlabel("concurrent users")
        ax1.set_ylabel("QPS", color="tab:blue")
        ax2 = ax1.twinx()
        ax2.plot(levels, [sweep[x]["p95_ms"] for x in levels], "s--", color="tab:red", label="P95")
        ax2.set_ylabel("P95 latency (ms)", color="tab:red")
        ax1.set_title("Throughput and P95 vs concurrency (streaming)")
        fig.tight_layout()
        fig.savefig(out / "concurrency.png", dpi=120)
        plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
