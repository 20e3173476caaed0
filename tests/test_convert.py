"""The torch-free converter: what it needs, what it refuses, and that it really needs no torch."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from decoding import DecodeOptions, load_bundle
from decoding.export import cn2en, convert_checkpoint, m2m100, marian, marian_torch
from tests import _parity
from tests.test_marian_parity import INPUTS

REPO = Path(__file__).resolve().parent.parent
BLOCKER = """
import importlib.abc
import sys


class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ImportError(f"{name} is blocked: the converter must not need it")
        return None


sys.meta_path.insert(0, _Blocked())
"""


def test_converter_runs_where_torch_and_transformers_cannot_be_imported(
    tiny_marian_dir: Path, tiny_tc_big_dir: Path, tiny_nllb_dir: Path, tiny_m2m100_dir: Path, tmp_path: Path
) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    sources = [str(d) for d in (tiny_marian_dir, tiny_tc_big_dir, tiny_nllb_dir, tiny_m2m100_dir)]
    script = textwrap.dedent(
        f"""
        import sys
        for blocked in ("torch", "transformers"):
            try:
                __import__(blocked)
            except ImportError:
                pass
            else:
                raise SystemExit(blocked + " was importable: the blocker is not active")
        from decoding import load_bundle
        from decoding.export import convert_checkpoint
        for source in {sources!r}:
            out = {str(tmp_path)!r} + "/" + source.rsplit("/", 1)[-1]
            convert_checkpoint(source, out, int8=True)
            print(load_bundle(out).translate("你好，世界。").finish_reason)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) <= {"stop", "length"} and len(done.stdout.split()) == 4


@pytest.mark.parametrize(
    "convert",
    [convert_checkpoint, marian.convert, m2m100.convert, marian_torch.convert, cn2en.convert],
    ids=["convert_checkpoint", "marian", "m2m100", "marian_torch", "cn2en"],
)
def test_every_converter_takes_source_then_output_dir_then_keyword_force(convert: object) -> None:
    parameters = list(inspect.signature(convert).parameters.values())  # type: ignore[arg-type]
    assert [(p.name, p.kind) for p in parameters[:2]] == [
        ("source", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("output_dir", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    ]
    force = inspect.signature(convert).parameters["force"]  # type: ignore[arg-type]
    assert (force.kind, force.default) == (inspect.Parameter.KEYWORD_ONLY, False)


def test_cn2en_converter_takes_the_source_first_and_refuses_anything_but_the_wheel(tmp_path: Path) -> None:
    (tmp_path / "model.pth").write_bytes(b"not cn2en")
    with pytest.raises(ValueError, match=r"input_lang\.pkl is missing: the source must be the extracted"):
        cn2en.convert(tmp_path, tmp_path / "out")
    assert cn2en.main([str(tmp_path / "nothing.txt"), str(tmp_path / "out")]) != 0
    assert not (tmp_path / "out").exists()


def test_checkpoint_without_safetensors_is_refused_with_the_torch_command(
    tiny_marian_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "opus-mt-zh-en-bin"
    shutil.copytree(tiny_marian_dir, source)
    (source / "model.safetensors").rename(source / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"no model\.safetensors.*python -m decoding\.export\.marian_torch"):
        convert_checkpoint(source, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_unknown_family_is_refused_by_name(tiny_marian_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "bert"
    shutil.copytree(tiny_marian_dir, source)
    config = json.loads((source / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, "model_type": "bert"}))
    with pytest.raises(ValueError, match="model_type 'bert' is not supported"):
        convert_checkpoint(source, tmp_path / "out")


def test_head_width_not_a_multiple_of_8_is_refused(tiny_marian_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "opus-mt-zh-en-odd"
    shutil.copytree(tiny_marian_dir, source)
    config = json.loads((source / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, "decoder_attention_heads": 8}))  # 32/8 = 4
    with pytest.raises(ValueError, match="head width that is a multiple of 8"):
        convert_checkpoint(source, tmp_path / "out")


def test_languages_licence_and_name_come_from_the_checkpoint_unless_overridden(
    tiny_marian_bundle_dir: Path, tiny_marian_dir: Path, tmp_path: Path
) -> None:
    manifest = load_bundle(tiny_marian_bundle_dir).manifest
    assert (manifest.direction, manifest.license, manifest.name) == ("zh-en", "mit", "opus-mt-zh-en-tiny")
    out = convert_checkpoint(
        tiny_marian_dir, tmp_path / "b", name="mine", license="cc-by-4.0", attribution="me", source_lang="zh"
    )
    manifest = load_bundle(out).manifest
    assert (manifest.name, manifest.license, manifest.attribution) == ("mine", "cc-by-4.0", "me")


def test_torch_exporter_for_bin_checkpoints_matches_the_torch_free_bundle(
    tiny_marian_dir: Path, tiny_marian_bundle_dir: Path, tmp_path: Path
) -> None:
    from decoding.export.marian_torch import convert

    torch_bundle = load_bundle(convert(tiny_marian_dir, tmp_path / "torch"))
    free_bundle = load_bundle(tiny_marian_bundle_dir)
    options = DecodeOptions(max_new_tokens=16)
    for text in INPUTS[:10]:
        expected = _parity.engine_ids(free_bundle, text, options)
        assert _parity.engine_ids(torch_bundle, text, options) == expected, text


def test_every_graph_keeps_its_weights_beside_it_for_onnx_runtime_to_map(
    tiny_nllb_dir: Path, tmp_path: Path
) -> None:
    """ONNX Runtime memory-maps external initializers instead of copying them (smaller RSS, faster
    start: bench/coldstart.py), and NLLB-600M's decoder exceeds protobuf's 2 GiB anyway: float32 and
    int8 bundles keep each graph's weights in ``<graph>.data``, listed and checksummed in the
    manifest. (The parity tests prove these bundles decode like transformers.)"""
    import onnx

    for int8 in (False, True):
        out = convert_checkpoint(tiny_nllb_dir, tmp_path / f"int8-{int8}", int8=int8)
        bundle = load_bundle(out)
        for graph in ("encoder.onnx", "decoder.onnx"):
            assert f"{graph}.data" in bundle.manifest.files
            assert (out / f"{graph}.data").stat().st_mode == (out / graph).stat().st_mode, "same readers"
            weights = onnx.load(str(out / graph), load_external_data=False).graph.initializer
            inline = [w.name for w in weights if w.data_location != onnx.TensorProto.EXTERNAL]
            assert all(len(w.raw_data) < 4096 for w in weights if w.name in inline), (int8, graph)
            assert len(inline) < len(weights), (int8, graph)
        assert bundle.for_direction("zh-en").translate("你好，世界。").segments


def test_a_hub_cache_snapshot_is_named_after_its_repository(tiny_marian_dir: Path, tmp_path: Path) -> None:
    snapshot = tmp_path / "hub" / "models--Helsinki-NLP--opus-mt-en-zh" / "snapshots" / ("0123abcd" * 5)
    shutil.copytree(tiny_marian_dir, snapshot)
    manifest = load_bundle(convert_checkpoint(snapshot, tmp_path / "out")).manifest
    assert (manifest.name, manifest.direction) == ("opus-mt-en-zh", "en-zh")


def test_self_attention_projects_query_key_and_value_in_one_int8_matmul(
    tiny_marian_dir: Path, tmp_path: Path
) -> None:
    """One quantization of the layer's input and one wide integer matmul per step, not three: the
    attention op gets query|key|value packed, in both the float32 and the int8 bundle."""
    import onnx

    for int8 in (False, True):
        bundle = convert_checkpoint(tiny_marian_dir, tmp_path / f"int8-{int8}", int8=int8)
        graph = onnx.load(str(bundle / "decoder.onnx")).graph
        attention = [node for node in graph.node if node.op_type == "GroupQueryAttention"]
        layers = sum(1 for node in graph.input if node.name.startswith("cache_key_"))
        assert len(attention) == layers
        assert all(list(node.input[1:3]) == ["", ""] for node in attention)
        produced_by = {out: node for node in graph.node for out in node.output}
        weights = {init.name: list(init.dims) for init in graph.initializer}
        for node in attention:
            producer = produced_by[node.input[0]]
            while producer.op_type in ("Add", "Sub", "Mul", "Cast"):  # bias, int8 rescaling
                producer = produced_by[producer.input[0]]
            assert producer.op_type == ("MatMulInteger" if int8 else "MatMul")
            width, packed = weights[producer.input[1]]
            assert packed == 3 * width  # query, key and value columns side by side


def test_checkpoint_tensors_are_read_as_views_of_the_mapped_file_equal_to_safetensors_own(
    tiny_marian_dir: Path, tmp_path: Path
) -> None:
    """float32 weights are not copied into memory (the converter writes each once); other float
    types are widened to float32, bfloat16 included (which numpy cannot hold)."""
    import numpy as np
    import torch
    from safetensors.numpy import load_file
    from safetensors.torch import save_file

    from decoding.export._checkpoint import map_safetensors

    path = tiny_marian_dir / "model.safetensors"
    expected, mapped = load_file(str(path)), map_safetensors(path)
    assert expected.keys() == mapped.keys()
    for name, array in expected.items():
        assert mapped[name].dtype == array.dtype and np.array_equal(mapped[name], array), name
        assert isinstance(mapped[name], np.memmap) and not mapped[name].flags.writeable
    mixed = {
        "bf16": torch.randn(3, 5, dtype=torch.bfloat16),
        "f16": torch.randn(4, dtype=torch.float16),
        "i64": torch.arange(6).reshape(2, 3),
    }
    save_file(mixed, str(tmp_path / "mixed.safetensors"))
    read = map_safetensors(tmp_path / "mixed.safetensors")
    assert read["bf16"].dtype == np.float32 and np.array_equal(read["bf16"], mixed["bf16"].float().numpy())
    assert np.array_equal(read["f16"], mixed["f16"].numpy()) and np.array_equal(
        read["i64"], mixed["i64"].numpy()
    )
    (tmp_path / "broken.safetensors").write_bytes((5).to_bytes(8, "little") + b"nope!")
    with pytest.raises(ValueError, match="not a safetensors file"):
        map_safetensors(tmp_path / "broken.safetensors")


def test_weights_are_written_in_c_order_block_by_block_whatever_the_view() -> None:
    """A transposed weight goes to the data file in blocks of rows (no whole copy), byte for byte
    what ``tobytes()`` gives."""
    import io

    import numpy as np

    from decoding.export._onnx import write_c_order

    matrix = np.arange(7 * 5, dtype=np.float32).reshape(7, 5)
    for view in (matrix, matrix.T, matrix[:, ::2]):
        stream = io.BytesIO()
        write_c_order(stream, view, block_bytes=16)  # a few rows per block
        assert stream.getvalue() == view.tobytes()
