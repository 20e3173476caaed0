"""Server load benchmark: the server's delivered tokens/s next to the engine's own, in one run.

For each concurrency level (default 1, 4, 10, 16 users) two measurements run back to back with
the same bundle, thread count, batch size, sentences (same order per user) and max tokens:

* **engine**: the server's BatchScheduler driven in-process by closed-loop users, no HTTP
  (``bench/_engine_users.py``, in its own process);
* **server**: ``liuyi serve`` over loopback, the same users streaming NDJSON
  (``bench/_loadgen.py``, a raw-socket generator light enough to share the cores).

The report prints server ÷ engine tokens/s per level, TTFT P95 under load ÷ idle TTFT, the CPU
the server, the engine and the load generator used, and each one's peak RSS (``VmHWM`` of its own
process). Then the seed articles' protocol: N users, JSON and streaming, latency percentiles.
Every report starts with the machine (CPU, ISA, cores, versions); progress goes to stderr.

The response cache is OFF in the server it starts (the model is measured, not the cache).

    python bench/load.py                                              # bundled model
    python bench/load.py --model bench/out/opus-mt-zh-en-random-int8-bundle
    python bench/load.py --url http://127.0.0.1:8000 --levels ''      # a server you started
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._engine_users import SENTENCES, run_in_own_process
from bench._loadgen import Samples, percentile, progress, run_users
from bench._machine import machine_report

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
_percentile = percentile  # bench/soak.py's name for it


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="benchmark this running server (loopback only) instead of starting one")
    parser.add_argument("--model", type=Path, help="bundle (default: the bundled model)")
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument(
        "--threads", default="", help="ONNX Runtime threads, e.g. 1,2 (default: the server's default)"
    )
    parser.add_argument("--batch", type=int, default=16, help="max concurrent streams (batch size)")
    parser.add_argument("--max-new-tokens", type=int, default=0, help="per request (0: the bundle's default)")
    parser.add_argument("--cache", action="store_true", help="leave the server's response cache on")
    parser.add_argument("--levels", default="1,4,10,16", help="users for engine vs server; '' to skip")
    parser.add_argument("--users", type=int, default=10, help="users for the JSON/streaming table")
    parser.add_argument("--modes", default="json,stream", help="JSON/streaming table modes; '' to skip")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measurement (max 120)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved engine/server rounds (medians)")
    parser.add_argument("--out", type=Path, default=OUT / "load.md")
    args = parser.parse_args()
    args.duration = min(args.duration, 120.0)
    thread_counts = [int(x) for x in args.threads.split(",") if x] or [_default_threads()]
    levels = [int(x) for x in args.levels.split(",") if x]
    modes = [x for x in args.modes.split(",") if x]
    if args.url and urlparse(args.url).hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("load is only ever sent to loopback")
    if args.url and levels and not (args.model and args.threads.isdigit()):
        parser.error("engine vs server needs the server's bundle and threads: --model and --threads N")
    machine = machine_report()
    progress(machine)

    started = time.perf_counter()
    rounds: dict[tuple[int, int], list[dict[str, Any]]] = {}
    table: dict[str, dict[str, float]] = {}
    rss: dict[int, float] = {}
    model = ""
    for round_number in range(1, args.rounds + 1):
        for threads in thread_counts:  # a fresh server per thread count and round
            process = None if args.url else start_server(args, threads)
            url = args.url or f"http://127.0.0.1:{args.port}"
            try:
                model = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
                load = _LoadRunner(url, args, process.pid if process else None)
                load.measure(min(4, max(levels, default=4)), 2.0, stream=True, label="warm-up")
                for level in levels:  # engine and server back to back: the machine's noise hits both
                    label = f"round {round_number}/{args.rounds}, {threads} thread(s), {level} users"
                    engine = run_engine(args, threads, level)
                    server, cores = load.measure(level, args.duration, stream=True, label=f"server, {label}")
                    row = {"engine": engine, "server": server.summary(), "server_cores": cores}
                    rounds.setdefault((threads, level), []).append(row)
                    progress(
                        f"{label}: engine {engine['summary']['tokens_per_s']:.0f} tokens/s, "
                        f"server {server.summary()['tokens_per_s']:.0f} tokens/s"
                    )
                if round_number == args.rounds and threads == thread_counts[0]:
                    for mode in modes:
                        samples, cores = load.measure(
                            args.users, args.duration, stream=mode == "stream", label=mode
                        )
                        table[mode] = {**samples.summary(), "server_cores": cores, "threads": threads}
                if process:
                    rss[threads] = max(rss.get(threads, 0.0), _status_mb(process.pid, "VmHWM"))
            finally:
                if process:
                    process.terminate()
                    process.wait(30)
    comparison = {key: _median_row(rows) for key, rows in rounds.items()}
    report = render(args, machine, model, comparison, table, rss)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    progress(f"done in {time.perf_counter() - started:.0f} s; report: {args.out}")
    print(report)
    return 0


def _median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each number's median over the rounds; the ratio is the median of each round's own ratio."""
    engine = {key: statistics.median(r["engine"]["summary"][key] for r in rows) for key in rows[0]["server"]}
    server = {key: statistics.median(r["server"][key] for r in rows) for key in rows[0]["server"]}
    return {
        "engine": {"summary": engine, "peak_rss_mb": max(r["engine"]["peak_rss_mb"] for r in rows)},
        "server": server,
        "server_cores": statistics.median(r["server_cores"] for r in rows),
        "ratio": statistics.median(
            r["server"]["tokens_per_s"] / r["engine"]["summary"]["tokens_per_s"] for r in rows
        ),
        "ratios": [r["server"]["tokens_per_s"] / r["engine"]["summary"]["tokens_per_s"] for r in rows],
    }


def _default_threads() -> int:
    from server._settings import Settings

    return Settings().inference_threads


class _LoadRunner:
    """Runs users against the server and reads the server's CPU time around each measurement."""

    def __init__(self, url: str, args: argparse.Namespace, pid: int | None) -> None:
        self.host, self.port = urlparse(url).hostname or "127.0.0.1", urlparse(url).port or 80
        self.args, self.pid = args, pid

    def measure(self, users: int, duration: float, *, stream: bool, label: str) -> tuple[Samples, float]:
        progress(f"{label}: {users} users for {duration:g} s")
        before = _cpu_seconds(self.pid)
        samples = asyncio.run(
            run_users(
                self.host,
                self.port,
                users=users,
                duration=duration,
                stream=stream,
                sentences=SENTENCES,
                max_new_tokens=self.args.max_new_tokens or None,
                label=label,
            )
        )
        cores = (_cpu_seconds(self.pid) - before) / samples.wall if samples.wall else float("nan")
        return samples, cores


def run_engine(args: argparse.Namespace, threads: int, users: int) -> dict[str, Any]:
    """The engine alone with ``users`` closed-loop users, in its own process."""
    from decoding import bundled_models

    config = {
        "bundle": str(args.model or bundled_models()[0]),
        "threads": threads,
        "batch": args.batch,
        "users": users,
        "duration": args.duration,
        "max_new_tokens": args.max_new_tokens or None,
        "sentences": SENTENCES,
        "seed": 0,
    }
    return run_in_own_process(config)


def start_server(args: argparse.Namespace, threads: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "LIUYI_PORT": str(args.port),
        "LIUYI_HOST": "127.0.0.1",
        "LIUYI_LOG_LEVEL": "warning",
        "LIUYI_CACHE_SIZE": "1024" if args.cache else "0",
        "LIUYI_MAX_QUEUED": "256",
        "LIUYI_THREADS": str(threads),
        "LIUYI_MAX_CONCURRENT_STREAMS": str(args.batch),
    }
    if args.model:
        env["LIUYI_MODELS"] = str(args.model)
    process = subprocess.Popen(
        [sys.executable, "-m", "server", "serve"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL
    )
    started = time.perf_counter()
    wait_ready(process, f"http://127.0.0.1:{args.port}")
    progress(f"server ({threads} thread(s)) ready after {time.perf_counter() - started:.1f} s")
    return process


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
        time.sleep(0.05)


def _cpu_seconds(pid: int | None) -> float:
    """user + system CPU seconds of a process (NaN when we did not start it)."""
    if pid is None:
        return float("nan")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def render(
    args: argparse.Namespace,
    machine: str,
    model: str,
    comparison: dict[tuple[int, int], dict[str, Any]],
    table: dict[str, dict[str, float]],
    rss: dict[int, float],
) -> str:
    command = ("python bench/load.py " + " ".join(sys.argv[1:])).strip()
    cache = "on" if args.cache else "off"
    tokens = args.max_new_tokens or "the bundle's default"
    lines = [
        machine,
        "",
        f"`{command}` — model `{model}`, batch {args.batch}, max new tokens {tokens}, response cache "
        f"{cache}, {args.duration:g} s per measurement; engine vs server: medians of {args.rounds} "
        "interleaved rounds (each round's ratio in brackets). TTFT percentiles are steady state: each "
        "user's first request is left out, because all users send it in the same millisecond (a "
        "burst no steady load has); the slowest of that burst is its own column.",
    ]
    if comparison:
        lines += [
            "",
            "| threads | users | engine tokens/s | server tokens/s | server ÷ engine | "
            "engine TTFT P50 / P95 ms | server TTFT P50 / P95 ms | start burst TTFT max ms: engine / "
            "server | server latency P95 ms | server QPS | CPU cores: engine / server / load generator | "
            "errors |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for (threads, level), row in comparison.items():
            e, s = row["engine"]["summary"], row["server"]
            ratios = ", ".join(f"{x:.2f}" for x in row["ratios"])
            lines.append(
                f"| {threads} | {level} | {e['tokens_per_s']:.0f} | {s['tokens_per_s']:.0f} | "
                f"**{row['ratio']:.2f}** ({ratios}) | {e['ttft_p50_ms']:.1f} / {e['ttft_p95_ms']:.1f} | "
                f"{s['ttft_p50_ms']:.1f} / {s['ttft_p95_ms']:.1f} | "
                f"{e['ttft_burst_max_ms']:.0f} / {s['ttft_burst_max_ms']:.0f} | "
                f"{s['p95_ms']:.0f} | {s['qps']:.1f} | "
                f"{e['client_cores']:.2f} / {row['server_cores']:.2f} / {s['client_cores']:.2f} | "
                f"{s['error_rate_%']:.1f} % |"
            )
        for threads in dict.fromkeys(threads for threads, _ in comparison):
            lines += ["", f"{threads} thread(s):", *_targets(comparison, threads)]
            engine_rss = max(
                row["engine"]["peak_rss_mb"] for (t, _), row in comparison.items() if t == threads
            )
            lines.append(
                f"* peak RSS (VmHWM of each process): engine {engine_rss:.0f} MB, "
                f"server {rss.get(threads, float('nan')):.0f} MB"
            )
    if table:
        threads = int(next(iter(table.values()))["threads"])
        lines += [
            "",
            f"{args.users} users, {threads} thread(s) (the seed articles' protocol):",
            "",
            "| mode | requests | QPS | tokens/s | avg ms | P50 ms | P95 ms | P99 ms | TTFT P50 / P95 ms | "
            "CPU cores: server / load generator | err % |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for mode, s in table.items():
            ttft = f"{s['ttft_p50_ms']:.1f} / {s['ttft_p95_ms']:.1f}" if mode == "stream" else "—"
            lines.append(
                f"| {mode} | {s['requests']:.0f} | {s['qps']:.1f} | {s['tokens_per_s']:.0f} | "
                f"{s['avg_ms']:.1f} | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} | {s['p99_ms']:.1f} | {ttft} | "
                f"{s['server_cores']:.2f} / {s['client_cores']:.2f} | {s['error_rate_%']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def _targets(comparison: dict[tuple[int, int], dict[str, Any]], threads: int) -> list[str]:
    """The issue's two ratios, when the levels they need were measured."""
    lines = []
    loaded = comparison.get((threads, 10))
    if loaded:
        lines.append(f"* server ÷ engine tokens/s at 10 users: **{loaded['ratio']:.2f}** (target ≥ 0.8)")
    idle = comparison.get((threads, 1))
    if loaded and idle:
        ttft, base = loaded["server"]["ttft_p95_ms"], idle["server"]["ttft_p50_ms"]
        lines.append(
            f"* server TTFT P95 at 10 users (steady state) ÷ idle TTFT (P50 at 1 user): {ttft:.1f} / "
            f"{base:.1f} ms = **{ttft / base:.2f}** (target ≤ 3); the start burst's slowest: "
            f"{loaded['server']['ttft_burst_max_ms']:.0f} ms"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
