"""Where a decoder step's time goes, per ONNX Runtime operator, at batch 1 and batch 16.

Runs the int8 benchmark model's decoder through the engine's own :class:`DecodeBatch` with ONNX
Runtime's profiler on (``SessionOptions.enable_profiling``), then sums each kernel's time by the
part of the model it belongs to: the output projection (vocabulary-wide matmul), the other
projections (quantize activations + integer matmul), attention, layer norms, the rest.

    python bench/op_profile.py [--model opus-mt|nllb-600M] [--threads 2] [--batches 1 16]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path

import onnxruntime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._models import MODELS
from decoding import DecodeBatch, GreedySequence, LoadOptions, RuntimeOptions, advance_batch, load_bundle

SOURCE = "周末我们去公园散步，然后一起去喝茶吧！"


def part_of_model(node: str, op: str, vocab_ops: set[str]) -> str:
    if node in vocab_ops:
        return "output projection (vocab-wide)"
    if op in ("GroupQueryAttention", "MultiHeadAttention"):
        return "attention (fused)"
    if op in ("LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization"):
        return "layer norms"
    if op in (
        "DynamicQuantizeLinear",
        "DynamicQuantizeMatMul",
        "MatMulInteger",
        "MatMulIntegerToFloat",
        "MatMulNBits",
        "MatMul",
        "FusedMatMul",
        "Gemm",
        "QGemm",
    ):
        return "other projections (quantize + matmul)"
    if op in ("TopK",):
        return "top-k"
    return "elementwise/other"


def profile(bundle_path: Path, threads: int, batch_size: int, steps: int, directory: str) -> dict[str, float]:
    options = LoadOptions(runtime=RuntimeOptions(intra_op_num_threads=threads), verify_checksums=False)
    bundle = load_bundle(bundle_path, options=options)
    graphs = bundle.graphs
    session_options = onnxruntime.SessionOptions()
    session_options.intra_op_num_threads = threads
    session_options.inter_op_num_threads = 1
    session_options.add_session_config_entry("session.intra_op.allow_spinning", "1")
    session_options.enable_mem_pattern = False
    session_options.enable_profiling = True
    session_options.profile_file_prefix = f"{directory}/decoder_b{batch_size}"
    graphs.decoder = onnxruntime.InferenceSession(
        str(bundle_path / bundle.manifest.decoder.file), session_options, providers=["CPUExecutionProvider"]
    )
    source_ids = bundle.tokenizer.encode(SOURCE).ids
    m = bundle.manifest
    batch = DecodeBatch(graphs)
    for _ in range(batch_size):
        sequence = GreedySequence(
            decoder_start=m.tokens.decoder_start, eos=m.tokens.eos, max_new_tokens=steps, min_new_tokens=steps
        )
        batch.add(graphs.encode(source_ids), max_new_tokens=steps, owner=sequence)
    for _ in range(steps):
        advance_batch(batch)
    trace = graphs.decoder.end_profiling()
    events = json.loads(Path(trace).read_text())
    # the vocab-wide matmul: the node that produces the logits' matmul (largest weight); found by
    # name from the graph ("lm_head" in its input's name survives quantization and fusion)
    vocab_ops = {
        e["name"].removesuffix("_kernel_time")
        for e in events
        if e.get("cat") == "Node"
        and e["args"].get("op_name") != "TopK"
        and f"{graphs.vocab_size}" in json.dumps(e["args"].get("output_type_shape", []))
    }
    per_part: dict[str, float] = collections.defaultdict(float)
    per_op: dict[str, float] = collections.defaultdict(float)
    runs = [e for e in events if e.get("cat") == "Session" and e["name"] == "model_run"]
    skip = 5  # warm-up steps
    start_ts = runs[skip]["ts"] if len(runs) > skip else 0
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time") or e["ts"] < start_ts:
            continue
        node, op = e["name"].removesuffix("_kernel_time"), e["args"].get("op_name", "?")
        per_part[part_of_model(node, op, vocab_ops)] += e["dur"]
        per_op[op] += e["dur"]
    measured = len(runs) - skip
    total_run = sum(r["dur"] for r in runs[skip:]) / measured / 1000
    result = {k: v / measured / 1000 for k, v in per_part.items()}
    result["__run_ms"] = total_run
    result.update({f"op:{k}": v / measured / 1000 for k, v in per_op.items()})
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="opus-mt")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--bundle", type=Path, help="profile this bundle instead of the benchmark's int8 one")
    args = parser.parse_args()
    bundle_path = args.bundle or MODELS[args.model][1](int8=True)
    with tempfile.TemporaryDirectory() as directory:
        for batch_size in args.batches:
            result = profile(bundle_path, args.threads, batch_size, args.steps, directory)
            run = result.pop("__run_ms")
            print(f"\n{bundle_path.name}, batch {batch_size}, {args.threads} threads: {run:.2f} ms per step")
            print(f"| {'part':<40} | {'ms/step':>8} | {'share':>6} |")
            print(f"|{'-' * 42}|{'-' * 10}|{'-' * 8}|")
            for key, value in sorted(result.items(), key=lambda kv: -kv[1]):
                print(f"| {key:<40} | {value:8.3f} | {value / run * 100:5.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
