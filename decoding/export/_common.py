"""Pieces every converter shares: the output directory, int8 quantization, a session to check with."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import onnxruntime


def prepare_output_dir(output_dir: Path, *, force: bool) -> Path:
    """Create ``output_dir``; refuse to overwrite an existing one unless ``force``."""
    output_dir = Path(output_dir)
    if output_dir.exists():
        if not force:
            raise FileExistsError(f"{output_dir} exists; pass --force to replace it")
        shutil.rmtree(output_dir)
    output_dir.mkdir(parents=True)
    return output_dir


def quantize_int8(path: Path) -> None:
    """Replace a float32 graph by its onnxruntime dynamic-int8 version (weights int8, activations
    quantized on the fly). MatMul/Gemm weights are quantized per output channel, which keeps greedy
    outputs much closer to float32 than one scale per tensor. Embedding tables (Gather) are int8
    too: for opus-mt they are 65001 x 512 floats (133 MB) in each graph, most of a bundle's memory,
    while a step reads only one row of them.

    Weights use 7 bits (``reduce_range``), deliberately — do not "fix" without reading this. ONNX
    Runtime multiplies uint8 activations by int8 weights; on x86 CPUs without VNNI (AVX2-only,
    AVX-512 without VNNI) its kernel adds pairs of products in saturating 16-bit lanes, and
    255 * 127 * 2 overflows them: on an AMD EPYC (AVX2) only 45 % of greedy tokens agreed with
    float32, against 94 % on a VNNI Xeon. With 7-bit weights (|w| <= 64) the pair sum (255 * 64 * 2)
    always fits. A bundle made on one CPU is served on others, so the safe choice is made for all of them;
    it costs a bit of precision on VNNI machines (tests/test_int8.py holds the agreement)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantized = path.with_suffix(".int8.onnx")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantizer logs a "consider pre-processing" hint on the root logger
    try:
        quantize_dynamic(
            str(path),
            str(quantized),
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            op_types_to_quantize=["MatMul", "Gemm", "Gather"],
        )
    finally:
        root.setLevel(level)
    quantized.replace(path)


def move_weights_beside(path: Path) -> str:
    """Move a graph's initializers into ``<graph>.data`` beside it; return that file's name.

    Why: ONNX Runtime memory-maps external initializers instead of copying them out of the parsed
    protobuf, so the weights it does not repack (embedding tables read by ``Gather``, norms,
    biases) stay file-backed, paged in where touched and shared between replicas through the page
    cache. NLLB-600M int8 shape: 1331 -> 711 MB RSS, 4.95 -> 2.32 s to ready
    (bench/results/coldstart-amd-epyc-avx2.md). Greedy outputs are the same bytes of weights."""
    import onnx

    data = path.with_name(path.name + ".data")
    graph = onnx.load(str(path))  # with any external data it already has, read into memory
    data.unlink(missing_ok=True)  # the writer appends
    onnx.save_model(graph, str(path), save_as_external_data=True, location=data.name)
    data.chmod(path.stat().st_mode & 0o777)  # onnx creates it 0600; readable by whoever may read the graph
    return data.name


def session_for_check(path: Path) -> onnxruntime.InferenceSession:
    """A session to compare an exported graph with PyTorch (through the engine's session factory)."""
    from .._runtime import RuntimeOptions, create_session

    return create_session(path, RuntimeOptions(), bundle=path.parent)


def run_for_cli(convert: Callable[[], Path]) -> int:
    """Run a converter from a command line: print where the bundle went, or a one-line error (exit 2)."""
    try:
        out = convert()
    except (OSError, ValueError) as exc:  # output exists, checkpoint not found, unusable checkpoint
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"bundle written to {out}")
    return 0
