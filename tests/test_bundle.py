"""Loading a bundle validates everything and names the bundle, the file and the problem."""

from __future__ import annotations

import json
import os
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
    _checksums,
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


class TestChecksumsOncePerFileVersion:
    """A big bundle is hashed once; later loads hash only files that changed since (``_checksums.py``)."""

    @pytest.fixture
    def hashed(self, monkeypatch: pytest.MonkeyPatch) -> list[str]:
        """Every big-bundle rule applies to the tiny test bundle; the names of the files hashed."""
        names: list[str] = []

        def counting_sha256(path: Path) -> str:
            names.append(path.name)
            return sha256_file(path)

        monkeypatch.setattr(_checksums, "STAMP_FROM_BYTES", 0)
        monkeypatch.setattr(_checksums, "sha256_file", counting_sha256)
        return names

    def test_a_second_load_hashes_nothing(self, bundle_copy: Path, hashed: list[str]) -> None:
        load_bundle(bundle_copy)
        assert sorted(hashed) == sorted(json.loads((bundle_copy / "manifest.json").read_text())["files"])
        hashed.clear()
        load_bundle(bundle_copy)
        assert hashed == []

    def test_a_file_rewritten_with_its_old_size_and_mtime_is_hashed_again(
        self, bundle_copy: Path, hashed: list[str]
    ) -> None:
        load_bundle(bundle_copy)
        vocab = bundle_copy / "vocab.json"
        before = vocab.stat()
        data = bytearray(vocab.read_bytes())
        data[10] ^= 1
        vocab.write_bytes(bytes(data))
        os.utime(vocab, ns=(before.st_atime_ns, before.st_mtime_ns))  # ctime still moves
        hashed.clear()
        with pytest.raises(ChecksumMismatchError, match=r"file 'vocab.json': sha256 differs"):
            load_bundle(bundle_copy)
        assert hashed == ["vocab.json"]

    def test_a_stamp_that_cannot_be_written_or_read_only_costs_hashing(
        self, bundle_copy: Path, hashed: list[str]
    ) -> None:
        (bundle_copy / _checksums.STAMP_NAME).mkdir()  # as good as a read-only directory, even for root
        load_bundle(bundle_copy)
        first = len(hashed)
        load_bundle(bundle_copy)
        assert first > 0 and len(hashed) == 2 * first
        assert [p.name for p in bundle_copy.iterdir() if p.name.endswith(".tmp")] == []

    def test_small_bundles_get_no_stamp(self, bundle_copy: Path) -> None:
        load_bundle(bundle_copy)
        assert not (bundle_copy / _checksums.STAMP_NAME).exists()
