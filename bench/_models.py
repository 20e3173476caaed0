"""Benchmark models, built offline on first use and cached under bench/out/."""

from __future__ import annotations

from pathlib import Path

OUT = Path(__file__).parent / "out"


def opus_mt_checkpoint() -> Path:
    """A random-weight Hugging Face checkpoint with opus-mt-zh-en's architecture."""
    from decoding.export.synthetic import build

    path = OUT / "opus-mt-zh-en-random"
    if not (path / "config.json").is_file():
        build(path, arch="opus-mt", seed=0, force=True)
    return path


def opus_mt_bundle(*, int8: bool) -> Path:
    """That checkpoint converted by liuyi's torch-free converter (fp32 or int8)."""
    from decoding.export import convert_checkpoint

    path = OUT / ("opus-mt-zh-en-random-int8" if int8 else "opus-mt-zh-en-random")
    path = path.with_name(path.name + "-bundle")
    if not (path / "manifest.json").is_file():
        convert_checkpoint(opus_mt_checkpoint(), path, int8=int8, force=True)
    return path
