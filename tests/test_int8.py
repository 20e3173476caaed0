"""int8 bundles: much smaller, greedy output close to float32, and safe on every x86 CPU class."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from decoding import Bundle, DecodeOptions, load_bundle
from decoding.export.marian import MarianExportOptions, convert
from tests.test_marian_parity import INPUTS


@pytest.fixture(scope="module")
def int8_bundle(tiny_marian_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    out = tmp_path_factory.mktemp("int8") / "tiny-int8"
    return load_bundle(convert(tiny_marian_dir, out, options=MarianExportOptions(int8=True)))


def test_int8_bundle_is_marked_and_much_smaller(int8_bundle: Bundle, tiny_marian_bundle: Bundle) -> None:
    assert int8_bundle.manifest.quantization == "int8"
    assert tiny_marian_bundle.manifest.quantization is None

    def graph_bytes(bundle: Bundle) -> int:
        graphs = ("encoder.onnx", "decoder.onnx")
        return sum(size.bytes for name, size in bundle.manifest.files.items() if name.startswith(graphs))

    # on the tiny model fixed costs (positions, scales) weigh more; opus-mt-sized graphs shrink ~3x
    assert graph_bytes(int8_bundle) < 0.65 * graph_bytes(tiny_marian_bundle)


def test_int8_agrees_with_fp32_for_most_tokens(int8_bundle: Bundle, tiny_marian_bundle: Bundle) -> None:
    options = DecodeOptions(max_new_tokens=16)
    same = total = 0
    for text in INPUTS:
        fp32 = tiny_marian_bundle.translate(text, options=options).segments[0].token_ids
        int8 = int8_bundle.translate(text, options=options).segments[0].token_ids
        same += sum(a == b for a, b in zip(fp32, int8, strict=False))
        total += max(len(fp32), len(int8))
    assert same / total >= 0.8, f"only {same}/{total} tokens agree"


def test_int8_weights_use_seven_bits_so_cpus_without_vnni_do_not_saturate(int8_bundle: Bundle) -> None:
    """The property behind agreement on AVX2-only CPUs, checked on the file itself (so it holds
    whatever CPU runs the test): every int8 matrix used by a quantized matmul lies in [-64, 64]
    (255 * 64 * 2 = 32640 fits a saturating int16 lane; 255 * 127 * 2 does not)."""
    checked = 0
    for graph in ("encoder.onnx", "decoder.onnx"):
        model = onnx.load(str(int8_bundle.path / graph))
        initializers = {t.name: t for t in model.graph.initializer}
        matmul_inputs = {
            name
            for node in model.graph.node
            if node.op_type in ("MatMulInteger", "DynamicQuantizeMatMul")
            for name in node.input
        }
        for name in matmul_inputs & initializers.keys():
            values = numpy_helper.to_array(initializers[name])
            if values.dtype == np.int8 and values.ndim == 2:
                checked += 1
                assert int(np.abs(values.astype(np.int32)).max()) <= 64, f"{graph}:{name} uses 8 bits"
    assert checked >= 4, "no quantized matmul weights found"
