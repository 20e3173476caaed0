"""A/B of the scheduler's ``first_step_alone``: engine TTFT and tokens/s with and without it.

Each round runs both settings back to back at every level (closed-loop users, the engine in its own
process: ``bench/_engine_users.py``), so the machine's noise hits both; every round is printed, then
medians and the on ÷ off ratios.

    PYTHONPATH=$PWD python bench/first_step.py --model bench/out/BUNDLE --levels 1,10 --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._engine_users import SENTENCES, run_in_own_process
from bench._loadgen import progress
from bench._machine import machine_report

KEYS = ("ttft_p50_ms", "ttft_p95_ms", "tokens_per_s", "p95_ms")


def run_engine(args: argparse.Namespace, users: int, alone: bool) -> dict[str, float]:
    config = {
        "bundle": str(args.model),
        "threads": args.threads,
        "batch": args.batch,
        "users": users,
        "duration": args.duration,
        "max_new_tokens": None,
        "sentences": SENTENCES,
        "seed": 0,
        "first_step_alone": alone,
    }
    summary: dict[str, float] = run_in_own_process(config)["summary"]
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="bundle directory")
    parser.add_argument("--levels", default="1,10", help="closed-loop users per measurement")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    parser.add_argument("--batch", type=int, default=16, help="max batch size")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",") if x]
    print(machine_report() + "\n")
    results: dict[tuple[int, bool], list[dict[str, float]]] = {}
    header = "| round | users | first_step_alone | TTFT P50 ms | TTFT P95 ms | latency P95 ms | tokens/s |"
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for round_number in range(1, args.rounds + 1):
        for users in levels:
            order = (True, False) if round_number % 2 else (False, True)  # alternate who goes first
            for alone in order:
                progress(f"round {round_number}, {users} users, first_step_alone={alone}")
                s = run_engine(args, users, alone)
                results.setdefault((users, alone), []).append(s)
                print(
                    f"| {round_number} | {users} | {'on' if alone else 'off'} | {s['ttft_p50_ms']:.1f} | "
                    f"{s['ttft_p95_ms']:.1f} | {s['p95_ms']:.0f} | {s['tokens_per_s']:.0f} |",
                    flush=True,
                )
    print("\nmedians (on ÷ off):")
    for users in levels:
        on = {k: statistics.median(r[k] for r in results[(users, True)]) for k in KEYS}
        off = {k: statistics.median(r[k] for r in results[(users, False)]) for k in KEYS}
        print(
            f"* {users} users: TTFT P50 {on['ttft_p50_ms']:.1f} vs {off['ttft_p50_ms']:.1f} ms "
            f"({on['ttft_p50_ms'] / off['ttft_p50_ms']:.2f}x), TTFT P95 {on['ttft_p95_ms']:.1f} vs "
            f"{off['ttft_p95_ms']:.1f} ms ({on['ttft_p95_ms'] / off['ttft_p95_ms']:.2f}x), tokens/s "
            f"{on['tokens_per_s']:.0f} vs {off['tokens_per_s']:.0f} "
            f"({on['tokens_per_s'] / off['tokens_per_s']:.2f}x)"
        )
    if 1 in levels:
        idle = {
            alone: statistics.median(r["ttft_p95_ms"] for r in results[(1, alone)]) for alone in (True, False)
        }
        for users in levels:
            if users == 1:
                continue
            for alone in (True, False):
                loaded = statistics.median(r["ttft_p95_ms"] for r in results[(users, alone)])
                print(
                    f"* TTFT P95 at {users} users ÷ idle P95, first_step_alone "
                    f"{'on' if alone else 'off'}: {loaded / idle[alone]:.1f}x (target <= 3)"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
