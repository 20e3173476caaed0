"""int8 bundles: much smaller, and greedy output stays close to float32."""

from __future__ import annotations

from pathlib import Path

import pytest

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
        return sum(bundle.manifest.files[name].bytes for name in ("encoder.onnx", "decoder.onnx"))

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
