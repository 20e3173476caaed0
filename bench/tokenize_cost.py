"""Is planning a translation on the event loop cheaper than a hop to a worker thread? By how much?

The server plans each request (sentence split + tokenization: ``decoding.Translation(...)``)
before it submits it to the scheduler. Planning on the event loop stalls every other stream on that
loop for as long as it takes; ``await asyncio.to_thread(...)`` keeps the loop free but costs a
thread hop. server/_service.py picks by text length (``_PLAN_ON_LOOP_CHARS``); this script prints
the numbers that threshold rests on, side by side, for short to maximal texts:

* ``plan`` — one ``Translation(bundle, text)`` on the loop: how long the loop is blocked.
* ``hop`` — ``await asyncio.to_thread(lambda: None)``: what moving any work off the loop costs.
* ``in thread`` — ``await asyncio.to_thread(Translation, bundle, text)``: the request's own wait.
* ``stall`` — the longest gap a ticker coroutine on the same loop sees while one plan runs in a
  thread (the GIL still makes the loop wait a little; compare it with ``plan``).

    python bench/tokenize_cost.py                 # the bundled model (word vocabulary)
    python bench/tokenize_cost.py --opus-mt       # opus-mt-zh-en's SentencePiece tokenizer (random weights)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._machine import machine_report
from decoding import DEFAULT_BUNDLE, Bundle, Translation, load_bundle

ROOT = Path(__file__).resolve().parent.parent
# 73 everyday sentences (507 characters), from the cn2en parity test's golden file
SENTENCES = [case["text"] for case in json.loads((ROOT / "tests/data/cn2en_golden.json").read_text("utf-8"))]
LENGTHS = (4, 40, 200, 500, 1000, 2000, 5000)  # characters; 5000 = the default max_input_chars


def text_of(length: int) -> str:
    """Chinese prose of exactly ``length`` characters. Every sentence is numbered ("12、...") so none
    repeats: planning tokenizes each distinct sentence once, and a repeated one would cost nothing."""
    numbered = (f"{n}、{sentence}" for n, sentence in enumerate(itertools.cycle(SENTENCES)))
    text = ""
    while len(text) < length:
        text += next(numbered)
    return "我很好。" if length == 4 else text[:length]


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def on_loop(run: Callable[[], object]) -> float:
    """Seconds the loop is blocked by one synchronous ``run``."""
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


async def in_thread(run: Callable[[], object]) -> float:
    """Seconds one ``await asyncio.to_thread(run)`` takes, as the awaiting coroutine sees it."""
    start = time.perf_counter()
    await asyncio.to_thread(run)
    return time.perf_counter() - start


async def stall_in_thread(run: Callable[[], object]) -> float:
    """The longest gap between two ticks of a coroutine on the loop while ``run`` runs in a thread."""
    worker = asyncio.ensure_future(asyncio.to_thread(run))
    longest, last = 0.0, time.perf_counter()
    while not worker.done():
        await asyncio.sleep(0)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    await worker
    return longest


async def measure(bundle: Bundle, repeats: int) -> None:
    def nothing() -> None:
        return None

    for _ in range(50):  # start the default executor's threads
        await in_thread(nothing)
    hop = median_ms([await in_thread(nothing) for _ in range(repeats * 20)])
    print(f"thread hop (await asyncio.to_thread(lambda: None)): median {hop:.3f} ms\n")
    print("| characters | plan on the loop (ms) | in a thread (ms) | loop stall, thread (ms) | plan / hop |")
    print("|---:|---:|---:|---:|---:|")
    for length in LENGTHS:
        if length > bundle.max_input_chars:
            continue
        text = text_of(length)

        def plan(text: str = text) -> Translation:
            return Translation(bundle, text)

        plan()  # warm caches
        samples: dict[str, list[float]] = {"loop": [], "thread": [], "stall": []}
        for _ in range(repeats):  # interleaved, so a noisy moment hits all three alike
            samples["loop"].append(await on_loop(plan))
            samples["thread"].append(await in_thread(plan))
            samples["stall"].append(await stall_in_thread(plan))
        loop, thread, stall = (median_ms(samples[key]) for key in ("loop", "thread", "stall"))
        print(f"| {length} | {loop:.3f} | {thread:.3f} | {stall:.3f} | {loop / hop:.1f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=30, help="runs per length (medians are printed)")
    parser.add_argument(
        "--opus-mt", action="store_true", help="opus-mt-zh-en's tokenizer instead of the bundled model's"
    )
    args = parser.parse_args()
    if args.opus_mt:
        from bench._models import opus_mt_bundle

        bundle = load_bundle(opus_mt_bundle(int8=True))
    else:
        bundle = load_bundle(DEFAULT_BUNDLE)
    print(machine_report())
    print(f"\nmodel: {bundle.name} ({bundle.manifest.tokenizer.kind}), median of {args.repeats} runs\n")
    asyncio.run(measure(bundle, args.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
