"""The engine's own tokens/s under N closed-loop users: the server's BatchScheduler driven in-process.

This is the reference the server is compared with (bench/load.py): the same bundle, thread count,
batch size, sentences (in the same order per user), max tokens and closed-loop users as the HTTP
run, but no HTTP, no event loop, no JSON. A driver thread plays the users: it plans each next
translation (tokenization, as the server's event loop does) and submits it; the scheduler thread's
callback only stamps times and hands finished users back to the driver.

Run as ``python bench/_engine_users.py CONFIG_JSON`` in a fresh process (its peak RSS is its own);
prints one JSON line with the samples.
"""

from __future__ import annotations

import json
import queue
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._loadgen import Samples, progress
from bench._models import load_for_bench

ROOT = Path(__file__).resolve().parent.parent
# what the users send (bench/load.py's HTTP users too): everyday sentences with known translations
SENTENCES = [
    record["text"] for record in json.loads((ROOT / "tests" / "data" / "cn2en_golden.json").read_text())
]


def run_in_own_process(config: dict[str, Any]) -> dict[str, Any]:
    """:func:`run` in a fresh process (clean threads, its own peak RSS); its JSON result."""
    output = subprocess.run(
        [sys.executable, __file__, json.dumps(config, ensure_ascii=False)],
        check=True,
        stdout=subprocess.PIPE,
        cwd=ROOT,
    ).stdout
    result: dict[str, Any] = json.loads(output.splitlines()[-1])
    return result


def run(config: dict[str, Any]) -> dict[str, Any]:
    from bench._machine import peak_rss_mb
    from decoding import (
        BatchScheduler,
        DecodeOptions,
        Delta,
        Result,
        Translation,
    )

    bundle = load_for_bench(Path(config["bundle"]), config["threads"])
    bundle.warm_up()
    scheduler = BatchScheduler(
        bundle,
        max_batch_size=config["batch"],
        max_queue=config["users"],
        first_step_alone=config.get("first_step_alone", True),
    )
    options = DecodeOptions(max_new_tokens=config["max_new_tokens"])
    sentences: list[str] = config["sentences"]
    users: int = config["users"]

    def measure(duration: float) -> Samples:
        samples = Samples()
        ready: queue.SimpleQueue[int] = queue.SimpleQueue()
        rngs = [random.Random(config["seed"] * 1000 + index) for index in range(users)]

        def submit(user: int, *, burst: bool = False) -> None:
            started = time.perf_counter()
            ttfts = samples.burst_ttfts if burst else samples.ttfts
            translation = Translation(bundle, rngs[user].choice(sentences), options=options)
            first = [True]

            def on_event(event: object) -> None:  # scheduler thread: stamp and hand back, nothing more
                if first[0] and isinstance(event, Delta):
                    first[0] = False
                    ttfts.append(time.perf_counter() - started)
                elif isinstance(event, Result):
                    samples.latencies.append(time.perf_counter() - started)
                    samples.tokens += event.output_tokens
                    ready.put(user)

            scheduler.submit(translation, on_event)

        start, cpu = time.perf_counter(), time.process_time()
        deadline = start + duration
        for user in range(users):
            submit(user, burst=True)  # every user at once, as the HTTP users start
        running = users
        while running:
            user = ready.get()
            if time.perf_counter() < deadline:
                submit(user)
            else:
                running -= 1
        samples.wall = time.perf_counter() - start
        samples.client_cpu = time.process_time() - cpu  # the whole engine process: CPU it used
        return samples

    try:
        measure(min(2.0, config["duration"]))  # warm-up, not reported
        samples = measure(config["duration"])
    finally:
        scheduler.close()
    return {"summary": samples.summary(), "peak_rss_mb": peak_rss_mb()}


if __name__ == "__main__":
    settings = json.loads(sys.argv[1])
    progress(f"  engine, {settings['users']} users, {settings['threads']} threads: measuring")
    print(json.dumps(run(settings)))
