"""Loading a bundle validates everything and names the bundle, the file and the problem."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from decoding import (
    BundleError,
    BundleFileMissingError,
    BundleNotFoundError,
    ChecksumMismatchError,
    GraphMismatchError,
    ManifestError,
    bundled_models,
    load_bundle,
)
from decoding._manifest import sha256_file


@pytest.fixture
def bundle_copy(tiny_marian_bundle_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_marian_bundle_dir, tmp_path / "copy"))


def edit_manifest(bundle: Path, **changes: object) -> None:
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        target = manifest
        for key in parents:
            target = target[key]
        if value is None:
            del target[leaf]
        else:
            target[leaf] = value
    path.write_text(json.dumps(manifest))


def refresh_checksum(bundle: Path, name: str) -> None:
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["files"][name] = {"sha256": sha256_file(bundle / name), "bytes": (bundle / name).stat().st_size}
    path.write_text(json.dumps(manifest))


def test_the_default_bundle_ships_inside_the_package() -> None:
    assert [p.name for p in bundled_models()] == ["cn2en-zh-en"]
    bundle = load_bundle()
    assert (bundle.name, bundle.direction) == ("cn2en-gru-zh-en", "zh-en")
    assert bundle.manifest.license == "MIT"


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(BundleNotFoundError, match="no such bundle directory"):
        load_bundle(tmp_path / "nope")


def test_missing_manifest(bundle_copy: Path) -> None:
    (bundle_copy / "manifest.json").unlink()
    with pytest.raises(BundleFileMissingError, match=r"manifest\.json"):
        load_bundle(bundle_copy)


def test_manifest_that_is_not_json(bundle_copy: Path) -> None:
    (bundle_copy / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON"):
        load_bundle(bundle_copy)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tokens__eos": None}, "tokens.eos: missing"),
        ({"tokens__eos": "0"}, "tokens.eos: expected an integer, got str"),
        ({"limits__max_source_tokens": True}, "got a boolean"),
        ({"source_lang": "fr"}, "source_lang: 'fr' is not one of zh, en"),
        ({"target_lang": "zh"}, "target_lang: must differ"),
        ({"format": "liuyi-bundle/99"}, "format: 'liuyi-bundle/99' is not supported"),
        ({"tokenizer__kind": "bpe"}, "tokenizer.kind 'bpe' is unknown"),
        ({"encoder__file": "other.onnx"}, "encoder.file: 'other.onnx' is not listed in files"),
        (
            {
                "decoder__state": [
                    {
                        "input": "past_key_0",
                        "output": "present_key_0",
                        "batch_axis": 0,
                        "time_axis": 2,
                        "initial": "magic",
                    }
                ]
            },
            "must be 'empty' or 'encoder:",
        ),
    ],
)
def test_invalid_manifest_fields_are_named(
    bundle_copy: Path, change: dict[str, object], message: str
) -> None:
    edit_manifest(bundle_copy, **change)
    with pytest.raises(ManifestError) as info:
        load_bundle(bundle_copy)
    assert message in str(info.value)
    assert "manifest.json" in str(info.value) and str(bundle_copy) in str(info.value)


def test_missing_graph_file(bundle_copy: Path) -> None:
    (bundle_copy / "decoder.onnx").unlink()
    with pytest.raises(
        BundleFileMissingError, match=r"file 'decoder.onnx': listed in the manifest but missing"
    ):
        load_bundle(bundle_copy)


def test_corrupted_file_fails_its_checksum(bundle_copy: Path) -> None:
    data = bytearray((bundle_copy / "vocab.json").read_bytes())
    data[10] ^= 1
    (bundle_copy / "vocab.json").write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatchError, match=r"file 'vocab.json': sha256 differs"):
        load_bundle(bundle_copy)


def test_truncated_file_fails_its_size_check(bundle_copy: Path) -> None:
    (bundle_copy / "encoder.onnx").write_bytes((bundle_copy / "encoder.onnx").read_bytes()[:100])
    with pytest.raises(ChecksumMismatchError, match=r"encoder\.onnx"):
        load_bundle(bundle_copy)


def test_graph_that_is_not_onnx(bundle_copy: Path) -> None:
    (bundle_copy / "decoder.onnx").write_bytes(b"garbage" * 10)
    refresh_checksum(bundle_copy, "decoder.onnx")
    with pytest.raises(BundleError, match=r"decoder.onnx'?: cannot load ONNX graph"):
        load_bundle(bundle_copy)


def test_graph_inputs_that_do_not_match_the_manifest(bundle_copy: Path) -> None:
    edit_manifest(bundle_copy, decoder__position_ids="positions")
    with pytest.raises(GraphMismatchError) as info:
        load_bundle(bundle_copy)
    assert "missing inputs ['positions']" in str(info.value)
    assert "unexpected inputs ['position_ids']" in str(info.value)


def test_every_bundle_error_has_a_stable_code() -> None:
    codes = {
        cls.code
        for cls in (
            BundleNotFoundError,
            BundleFileMissingError,
            ChecksumMismatchError,
            ManifestError,
            GraphMismatchError,
        )
    }
    assert len(codes) == 5 and all(code.startswith("bundle_") for code in codes)
