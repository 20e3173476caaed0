"""Where a decoding step's time goes, from Python's point of view (pyinstrument).

Twenty 64-token translations through the public stream API on the int8 opus-mt-shaped benchmark
model; prints pyinstrument's call tree. What to look for: nearly all time inside ONNX Runtime's
``run_with_iobinding`` (the decoder) and ``run`` (the encoder), and no Python frame of our own
(batch bookkeeping, token choice, detokenizer) big enough to show.

    python bench/profile_engine.py [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._engine_workers import TTFT_SENTENCE
from bench._machine import machine_report
from bench._models import opus_mt_bundle
from decoding import DecodeOptions, LoadOptions, RuntimeOptions, load_bundle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from pyinstrument import Profiler  # the [bench] extra; --help works without it

    print(machine_report())  # a number without its CPU means nothing (see bench/_machine.py)
    bundle = load_bundle(
        opus_mt_bundle(int8=True),
        options=LoadOptions(
            runtime=RuntimeOptions(intra_op_num_threads=args.threads), verify_checksums=False
        ),
    )
    options = DecodeOptions(max_new_tokens=64, min_new_tokens=64)
    list(bundle.stream(TTFT_SENTENCE, options=options))  # warm-up
    profiler = Profiler(interval=0.0005)
    profiler.start()
    for _ in range(20):
        for _event in bundle.stream(TTFT_SENTENCE, options=options):
            pass
    profiler.stop()
    print(profiler.output_text(unicode=False, color=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
