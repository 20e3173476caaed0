"""Two (or more) bundles of the same model, A/B, interleaved step by step: which graph is faster?

On a shared, noisy machine two benchmark runs minutes apart are not comparable; here every decoder
step of bundle A is followed by the same step of bundle B, so both see the same load, and each step's
time ratio B/A is paired. Also checks that the greedy ids are identical (a graph rewrite that is
meant to be exact, such as packing q|k|v into one matmul, must not change a single token).

    python bench/ab_bundles.py BUNDLE_A BUNDLE_B [--threads 2] [--steps 64] [--batches 1 16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._engine_workers import BATCH_SENTENCES, TTFT_SENTENCE
from bench._models import load_for_bench
from decoding import (
    Bundle,
    DecodeBatch,
    GreedySequence,
    advance_batch,
)


def start_batch(bundle: Bundle, rows: int, steps: int) -> tuple[DecodeBatch, list[GreedySequence]]:
    m = bundle.manifest
    batch, sequences = DecodeBatch(bundle.graphs), []
    for i in range(rows):
        text = BATCH_SENTENCES[i % len(BATCH_SENTENCES)] if rows > 1 else TTFT_SENTENCE
        sequence = GreedySequence(
            decoder_start=m.tokens.decoder_start, eos=m.tokens.eos, max_new_tokens=steps, min_new_tokens=steps
        )
        sequences.append(sequence)
        batch.add(
            bundle.graphs.encode(bundle.tokenizer.encode(text).ids), max_new_tokens=steps, owner=sequence
        )
    return batch, sequences


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bundles", type=Path, nargs="+")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    bundles = [load_for_bench(p, args.threads) for p in args.bundles]
    first = args.bundles[0]

    encoder: dict[Path, list[float]] = {p: [] for p in args.bundles}
    for _ in range(15):
        for path, bundle in zip(args.bundles, bundles, strict=True):
            ids = bundle.tokenizer.encode(TTFT_SENTENCE).ids
            started = time.perf_counter()
            bundle.graphs.encode(ids)
            encoder[path].append((time.perf_counter() - started) * 1000)
    for path in args.bundles:
        ratio = statistics.median(a / b for a, b in zip(encoder[path], encoder[first], strict=True))
        print(
            f"encoder, 24-token source, {path}: "
            f"median {statistics.median(encoder[path]):.2f} ms, paired ratio {ratio:.3f}"
        )

    for rows in args.batches:
        times: dict[Path, list[float]] = {p: [] for p in args.bundles}
        tokens: dict[Path, list[list[int]]] = {}
        for _ in range(args.rounds):
            started_batches = [start_batch(bundle, rows, args.steps) for bundle in bundles]
            for _ in range(args.steps):
                for path, (batch, _) in zip(args.bundles, started_batches, strict=True):
                    started = time.perf_counter()
                    advance_batch(batch)
                    times[path].append((time.perf_counter() - started) * 1000)
            tokens = {
                p: [s.tokens for s in seqs]
                for p, (_, seqs) in zip(args.bundles, started_batches, strict=True)
            }
        for path in args.bundles:
            ratio = statistics.median(a / b for a, b in zip(times[path], times[first], strict=True))
            same = sum(
                x == y
                for a, b in zip(tokens[path], tokens[first], strict=True)
                for x, y in zip(a, b, strict=False)
            )
            total = sum(len(a) for a in tokens[first])
            print(
                f"batch {rows:2d}, {path}: step median {statistics.median(times[path]):.2f} ms, "
                f"paired ratio {ratio:.3f}, greedy ids identical {same}/{total}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
