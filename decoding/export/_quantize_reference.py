"""onnxruntime's whole-model int8 quantizer, as liuyi called it before :mod:`._quantize`.

Kept as the reference the streaming quantizer must reproduce bit for bit (tests/test_quantize.py)
and the baseline it is measured against (bench/convert_memory.py). It loads the whole graph with its
weights and holds copies of them: ~10.5 GB RSS for NLLB-200-600M. Converters do not call it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ._common import move_weights_beside
from ._quantize import OP_TYPES


def quantize_graph_with_onnxruntime(path: Path) -> str:
    """Replace the float32 graph at ``path`` by ``quantize_dynamic``'s int8 version with the options
    :mod:`._quantize` documents, weights moved to ``<graph>.data``; returns that file's name."""
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
            op_types_to_quantize=list(OP_TYPES),
        )
    finally:
        root.setLevel(level)
    quantized.replace(path)
    path.with_name(f"{path.name}.data").unlink(missing_ok=True)  # the float32 weights
    return move_weights_beside(path)
