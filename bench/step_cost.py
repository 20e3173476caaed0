"""Per-step decoder cost as the output grows: a KV cache keeps it (nearly) flat.

Runs the liuyi engine on a random-weight model with opus-mt-zh-en's architecture (vocab 65001,
d_model 512, 6+6 layers, 8 heads, ffn 2048), forcing a fixed output length with min_new_tokens, and
prints ms/token for early and late steps. Attention over the cache still grows by one position per
step, so "flat" means: late steps cost about what early steps cost, not k times more.

    python bench/step_cost.py [--tokens 256] [--threads 1] [--int8]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._machine import machine_report
from bench._models import opus_mt_bundle
from decoding import DecodeBatch, GreedySequence, LoadOptions, RuntimeOptions, advance_batch, load_bundle

SOURCE = "流式翻译让用户在第一个词生成之后就能看到结果，而不必等待整句话翻译完成。"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=256, help="output tokens per run")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--int8", action="store_true")
    args = parser.parse_args()
    print(machine_report())  # a number without its CPU means nothing (see bench/_machine.py)

    bundle = load_bundle(
        opus_mt_bundle(int8=args.int8),
        options=LoadOptions(runtime=RuntimeOptions(intra_op_num_threads=args.threads)),
    )
    source_ids = bundle.tokenizer.encode(SOURCE).ids
    m = bundle.manifest
    per_step = np.zeros((args.runs, args.tokens))
    for run in range(args.runs + 1):  # the first run warms up and is discarded
        batch = DecodeBatch(bundle.graphs)
        sequence = GreedySequence(
            decoder_start=m.tokens.decoder_start,
            eos=m.tokens.eos,
            max_new_tokens=args.tokens,
            min_new_tokens=args.tokens,
        )
        batch.add(bundle.graphs.encode(source_ids), max_new_tokens=args.tokens, owner=sequence)
        for step in range(args.tokens):
            start = time.perf_counter()
            advance_batch(batch)
            if run:
                per_step[run - 1, step] = (time.perf_counter() - start) * 1000
    median = np.median(per_step, axis=0)
    print(
        f"model: {bundle.name} ({m.quantization or 'fp32'}), source tokens {len(source_ids)}, "
        f"threads {args.threads}, median of {args.runs} runs"
    )
    print(f"{'steps':>12} {'ms/token':>9}")
    edges = [0, 8, 32, 64, 128, 192, args.tokens]
    for lo, hi in itertools.pairwise(edges):
        if lo < args.tokens:
            print(f"{lo + 1:>5}-{min(hi, args.tokens):<6} {statistics.fmean(median[lo:hi]):9.2f}")
    early, late = statistics.fmean(median[:32]), statistics.fmean(median[-32:])
    print(f"late/early ratio: {late / early:.2f}  (1.00 = perfectly flat)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
