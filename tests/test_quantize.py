"""The streaming int8 quantizer writes onnxruntime's int8 graph without ever holding the model.

onnxruntime's ``quantize_dynamic`` (decoding/export/_quantize_reference.py) is the reference: with
``activations="per-tensor"`` the same nodes in the same order, the same initializers bit for bit, the
same greedy tokens. Bundles quantize activations per row instead (tests/test_int8.py).
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from decoding import DecodeOptions, load_bundle
from decoding.export import convert_checkpoint
from decoding.export._quantize import quantize_graph
from decoding.export._quantize_reference import quantize_graph_with_onnxruntime
from tests import _parity
from tests.test_marian_parity import INPUTS

GRAPHS = ("encoder.onnx", "decoder.onnx")


@pytest.fixture(scope="module")
def float_bundles(
    tiny_marian_bundle_dir: Path,
    tiny_marian_dir: Path,
    tiny_tc_big_dir: Path,
    tiny_nllb_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Path]:
    """float32 bundles of every graph shape the converters write; the torch-exported one keeps its
    weights inline and projects to the vocabulary with a Gemm over the embedding table itself."""
    from decoding.export import marian_torch

    root = tmp_path_factory.mktemp("float32")
    return {
        "marian": tiny_marian_bundle_dir,
        "tc-big": convert_checkpoint(tiny_tc_big_dir, root / "tc-big"),
        "nllb": convert_checkpoint(tiny_nllb_dir, root / "nllb"),
        "marian-torch": marian_torch.convert(tiny_marian_dir, root / "marian-torch"),
    }


def _copy_graph(bundle: Path, graph: str, to: Path) -> Path:
    to.mkdir(parents=True)
    for name in (graph, f"{graph}.data"):
        if (bundle / name).exists():
            shutil.copy(bundle / name, to / name)
    return to / graph


def _without_weight_bytes(model: onnx.ModelProto) -> onnx.ModelProto:
    """The graph as a protobuf with every initializer's values and storage left out."""
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    for tensor in bare.graph.initializer:
        for field in ("external_data", "data_location", "raw_data", "float_data", "int32_data"):
            tensor.ClearField(field)
    return bare


@pytest.mark.parametrize("family", ["marian", "tc-big", "nllb", "marian-torch"])
@pytest.mark.parametrize("graph", GRAPHS)
def test_streaming_quantizer_writes_the_graph_onnxruntime_writes(
    float_bundles: dict[str, Path], family: str, graph: str, tmp_path: Path
) -> None:
    reference_path = _copy_graph(float_bundles[family], graph, tmp_path / "onnxruntime")
    streamed_path = _copy_graph(float_bundles[family], graph, tmp_path / "streamed")
    quantize_graph_with_onnxruntime(reference_path)
    # blocks of 1 KiB: every weight of the tiny model is read and quantized in several pieces
    assert quantize_graph(streamed_path, block_bytes=1024, activations="per-tensor") == f"{graph}.data"

    reference, streamed = onnx.load(str(reference_path)), onnx.load(str(streamed_path))
    assert _without_weight_bytes(streamed) == _without_weight_bytes(reference)  # nodes, order, names
    for ours, theirs in zip(streamed.graph.initializer, reference.graph.initializer, strict=True):
        a, b = numpy_helper.to_array(ours), numpy_helper.to_array(theirs)
        assert (a.dtype, a.shape, a.tobytes()) == (b.dtype, b.shape, b.tobytes()), ours.name
    ops = [node.op_type for node in streamed.graph.node]
    assert ops.count("MatMulInteger") >= 4 and "MatMul" not in ops and "Gemm" not in ops
    assert ops.count("DequantizeLinear") >= 1  # an embedding table read as uint8, rescaled after the lookup


def test_quantized_weights_sit_beside_the_graph_page_aligned(
    float_bundles: dict[str, Path], tmp_path: Path
) -> None:
    """ONNX Runtime maps ``<graph>.data`` (bundles share it through the page cache); small
    tensors stay in the protobuf."""
    path = _copy_graph(float_bundles["nllb"], "decoder.onnx", tmp_path / "nllb")
    quantize_graph(path)
    assert sorted(p.name for p in tmp_path.joinpath("nllb").iterdir()) == [
        "decoder.onnx",
        "decoder.onnx.data",
    ]
    weights = onnx.load(str(path), load_external_data=False).graph.initializer
    external = [w for w in weights if w.data_location == onnx.TensorProto.EXTERNAL]
    offsets = [int(next(e.value for e in w.external_data if e.key == "offset")) for w in external]
    assert external and all(offset % 4096 == 0 for offset in offsets)
    assert all(len(w.raw_data) < 4096 for w in weights if w not in external)
    assert {w.name for w in external} >= {"lm_head.weight_t_quantized", "decoder.embed_tokens_quantized"}


def test_quantizer_reads_each_weight_in_blocks_and_never_loads_the_model_whole(
    float_bundles: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What keeps NLLB-1.3B convertible on a 16 GB laptop: the float32 weights are only ever seen
    through memory maps of one block each; onnx's loaders of external data (what onnxruntime's
    whole-model quantizer goes through) must not run at all."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the whole model's weights were loaded")

    monkeypatch.setattr(onnx, "load_external_data_for_model", refuse)
    monkeypatch.setattr(onnx.external_data_helper, "load_external_data_for_model", refuse)
    monkeypatch.setattr(onnx.external_data_helper, "load_external_data_for_tensor", refuse)
    maps: list[tuple[str, int]] = []
    real_memmap = np.memmap

    def recording_memmap(filename: Any, *args: Any, **kwargs: Any) -> Any:
        mapped = real_memmap(filename, *args, **kwargs)
        maps.append((Path(filename).name, mapped.nbytes))
        return mapped

    monkeypatch.setattr(np, "memmap", recording_memmap)
    path = _copy_graph(float_bundles["nllb"], "decoder.onnx", tmp_path / "nllb")
    float_bytes = path.with_name("decoder.onnx.data").stat().st_size
    quantize_graph(path, block_bytes=2048)

    assert maps and all(name == "decoder.onnx.data" and size <= 2048 for name, size in maps)
    assert sum(size for _, size in maps) >= float_bytes / 2  # the weights were read through the maps


def test_int8_bundle_with_per_tensor_activations_decodes_the_tokens_of_onnxruntimes_quantizer(
    tiny_marian_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "decoding.export._seq2seq.quantize_graph", functools.partial(quantize_graph, activations="per-tensor")
    )
    streamed = load_bundle(convert_checkpoint(tiny_marian_dir, tmp_path / "streamed", int8=True))
    monkeypatch.setattr("decoding.export._seq2seq.quantize_graph", quantize_graph_with_onnxruntime)
    reference = load_bundle(convert_checkpoint(tiny_marian_dir, tmp_path / "onnxruntime", int8=True))
    options = DecodeOptions(max_new_tokens=16)
    for text in INPUTS:
        expected = _parity.engine_ids(reference, text, options)
        assert _parity.engine_ids(streamed, text, options) == expected, text


def test_torch_exported_int8_bundle_lists_the_weights_beside_its_graphs(
    tiny_marian_dir: Path, tmp_path: Path
) -> None:
    """Its float32 graphs keep their weights inline; int8 moves them to ``<graph>.data``, which the
    manifest must list and checksum like any other file of the bundle."""
    from decoding.export import ConvertOptions, marian_torch

    out = marian_torch.convert(tiny_marian_dir, tmp_path / "torch-int8", options=ConvertOptions(int8=True))
    bundle = load_bundle(out)
    assert {"encoder.onnx.data", "decoder.onnx.data"} <= set(bundle.manifest.files)
    assert bundle.translate("你好，世界。").segments
