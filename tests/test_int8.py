"""int8 bundles: much smaller, greedy output close to float32, and safe on every x86 CPU class."""

from __future__ import annotations

import functools
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from decoding import (
    Bundle,
    DecodeBatch,
    DecodeOptions,
    LoadOptions,
    RuntimeOptions,
    advance_batch,
    load_bundle,
)
from decoding.export import convert_checkpoint
from decoding.export._quantize import quantize_graph
from decoding.export.marian import MarianExportOptions, convert
from tests.test_batch import new_sequence
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


def _decoded_in_one_batch(bundle: Bundle, texts: list[str], max_new: int) -> list[list[int]]:
    """Every text joins one batch at once, as the scheduler admits a burst: one (padded) encoder
    call for all of them, then decoder steps over all rows."""
    batch = DecodeBatch(bundle.graphs)
    sources = bundle.graphs.encode_many([bundle.tokenizer.encode(text).ids for text in texts])
    rows = [
        batch.add(source, max_new_tokens=max_new, owner=new_sequence(bundle, max_new, max_new))
        for source in sources
    ]
    while batch.rows:
        advance_batch(batch)
    return [row.owner.tokens for row in rows]


@pytest.fixture(scope="module")
def per_tensor_int8_bundle(tiny_marian_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    """onnxruntime's own int8 graph: one activation scale for the whole batch."""
    out = tmp_path_factory.mktemp("int8-per-tensor") / "tiny-int8"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            "decoding.export._seq2seq.quantize_graph",
            functools.partial(quantize_graph, activations="per-tensor"),
        )
        convert(tiny_marian_dir, out, options=MarianExportOptions(int8=True))
    return load_bundle(_as_converted_before_per_row_scales(out))


def _as_converted_before_per_row_scales(bundle_dir: Path) -> Path:
    """The manifest as converters wrote it before 2026-12-03: no ``activation_scales``."""
    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    del manifest["activation_scales"]
    (bundle_dir / "manifest.json").write_text(json.dumps(manifest))
    return bundle_dir


def test_an_int8_sequence_decodes_the_same_tokens_whatever_shares_its_batch(
    int8_bundle: Bundle, per_tensor_int8_bundle: Bundle
) -> None:
    """A translation must not change with the server's load. With one activation scale per tensor
    (onnxruntime's quantizer) it does: the batch's largest value sets every row's precision."""
    texts, max_new = list(INPUTS), 12
    for bundle, invariant in ((int8_bundle, True), (per_tensor_int8_bundle, False)):
        together = _decoded_in_one_batch(bundle, texts, max_new)
        alone = [_decoded_in_one_batch(bundle, [text], max_new)[0] for text in texts]
        changed = [text for text, a, b in zip(texts, alone, together, strict=True) if a != b]
        assert (changed == []) is invariant, (bundle.path, changed)


def test_every_int8_activation_is_quantized_row_by_row(int8_bundle: Bundle) -> None:
    for graph in ("encoder.onnx", "decoder.onnx"):
        ops = [node.op_type for node in onnx.load(str(int8_bundle.path / graph)).graph.node]
        assert "DynamicQuantizeLinear" not in ops, graph  # one scale for the whole batch
        assert ops.count("QuantizeLinear") >= 2 and ops.count("MatMulInteger") >= ops.count("QuantizeLinear")


@pytest.fixture(scope="module")
def nllb_int8_bundle(tiny_nllb_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    """Pre-norm layers, ReLU, a final LayerNorm before the vocabulary: the other graph shape."""
    return load_bundle(
        convert_checkpoint(tiny_nllb_dir, tmp_path_factory.mktemp("nllb-int8") / "b", int8=True)
    )


@pytest.fixture(params=["marian", "nllb"])
def any_int8_bundle(request: pytest.FixtureRequest) -> Bundle:
    fixture = "int8_bundle" if request.param == "marian" else "nllb_int8_bundle"
    return request.getfixturevalue(fixture)  # type: ignore[no-any-return]


def test_nllb_int8_sequences_decode_the_same_tokens_whatever_shares_their_batch(
    nllb_int8_bundle: Bundle,
) -> None:
    texts, max_new = list(INPUTS), 12
    together = _decoded_in_one_batch(nllb_int8_bundle, texts, max_new)
    assert together == [_decoded_in_one_batch(nllb_int8_bundle, [text], max_new)[0] for text in texts]


def test_onnx_runtimes_fusions_compute_what_the_int8_graph_says(any_int8_bundle: Bundle) -> None:
    """The graph as written and the graph as ONNX Runtime fuses it give the same logits. It once
    did not: fused with its bias Add into one MatMulIntegerToFloat with a per-row scale, the bias
    came out wrong, and the eos logit (the only non-zero bias of the tiny Marian model) lost its +2."""
    unfused = load_bundle(
        any_int8_bundle.path, options=LoadOptions(runtime=RuntimeOptions(optimization_level="disable"))
    )
    for text in INPUTS[:8]:
        logits = [_first_step_logits(bundle, text) for bundle in (any_int8_bundle, unfused)]
        finite = np.isfinite(logits[1])
        assert np.array_equal(np.isfinite(logits[0]), finite)
        np.testing.assert_allclose(logits[0][finite], logits[1][finite], rtol=1e-4, atol=1e-4)


def _first_step_logits(bundle: Bundle, text: str) -> np.ndarray:
    batch = DecodeBatch(bundle.graphs)
    source = bundle.graphs.encode(bundle.tokenizer.encode(text).ids)
    batch.add(source, max_new_tokens=2, owner=new_sequence(bundle, 2, 2))
    return batch.step(with_logits=True)[0].logits.copy()


def test_a_bundle_says_how_it_scales_activations_and_an_old_one_warns_at_load(
    int8_bundle: Bundle, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert int8_bundle.manifest.activation_scales == "per-row" and int8_bundle.manifest.batch_invariant
    old = _as_converted_before_per_row_scales(shutil.copytree(int8_bundle.path, tmp_path / "old"))
    with caplog.at_level(logging.WARNING, logger="liuyi.bundle"):
        load_bundle(int8_bundle.path)
        assert caplog.records == []
        assert not load_bundle(old).manifest.batch_invariant
    assert [record.getMessage() for record in caplog.records] == [
        f"{old}: this int8 bundle scales activations per batch (converted before 2026-12-03), so a "
        "translation can change with the server's load; convert it again (liuyi pull NAME --int8 "
        "--force, or liuyi export ... --int8)"
    ]
