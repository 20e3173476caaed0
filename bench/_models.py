"""Benchmark models, built offline on first use and cached under bench/out/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "out"


def load_for_bench(path: Path, threads: int) -> Any:
    """A bundle loaded as the server loads it (one process-wide ONNX Runtime pool of ``threads``),
    without the sha256 pass: benchmarks time decoding, and their bundles were just built here."""
    from decoding import LoadOptions, RuntimeOptions, load_bundle

    runtime = RuntimeOptions(intra_op_num_threads=threads, shared_thread_pool=True)
    return load_bundle(path, options=LoadOptions(runtime=runtime, verify_checksums=False))


def opus_mt_checkpoint() -> Path:
    """A random-weight Hugging Face checkpoint with opus-mt-zh-en's architecture."""
    from decoding.export.synthetic import build

    path = OUT / "opus-mt-zh-en-random"
    if not (path / "config.json").is_file():
        build(path, arch="opus-mt", seed=0, force=True)
    return path


def opus_mt_bundle(*, int8: bool) -> Path:
    """That checkpoint converted by liuyi's torch-free converter (fp32 or int8)."""
    return _converted(opus_mt_checkpoint(), int8=int8)


def _converted(checkpoint: Path, *, int8: bool) -> Path:
    """``checkpoint`` converted once to ``<its name>[-int8]-bundle`` beside it."""
    from decoding.export import convert_checkpoint

    path = checkpoint.with_name(f"{checkpoint.name}{'-int8' if int8 else ''}-bundle")
    if not (path / "manifest.json").is_file():
        convert_checkpoint(checkpoint, path, int8=int8, force=True)
    return path


def nllb_checkpoint() -> Path:
    """A random-weight checkpoint with facebook/nllb-200-distilled-600M's shape (vocab 256206,
    d_model 1024, 12+12 layers, 16 heads, ffn 4096); ~2.4 GB, built once."""
    from decoding.export.synthetic_nllb import build

    path = OUT / "nllb-200-600M-random"
    if not (path / "config.json").is_file():
        build(path, arch="nllb-600M", seed=0, force=True)
    return path


def nllb_bundle(*, int8: bool) -> Path:
    """That checkpoint converted by liuyi's torch-free converter (one bundle, both directions)."""
    return _converted(nllb_checkpoint(), int8=int8)


def m2m100_checkpoint() -> Path:
    """A random-weight checkpoint with facebook/m2m100_418M's shape and tokenizer files (vocab 128112,
    d_model 1024, 12+12 layers, 16 heads, ffn 4096); ~1.9 GB, built once."""
    from decoding.export.synthetic_nllb import build

    path = OUT / "m2m100-418M-random"
    if not (path / "config.json").is_file():
        build(path, arch="m2m100-418M", tokenizer="m2m100", seed=0, force=True)
    return path


def m2m100_bundle(*, int8: bool) -> Path:
    """That checkpoint converted by liuyi's torch-free converter (one bundle, both directions)."""
    return _converted(m2m100_checkpoint(), int8=int8)


# --model NAME -> (checkpoint, bundle); every engine measures zh->en on it
MODELS = {
    "opus-mt": (opus_mt_checkpoint, opus_mt_bundle),
    "nllb-600M": (nllb_checkpoint, nllb_bundle),
    "m2m100-418M": (m2m100_checkpoint, m2m100_bundle),
}


def reference(model: str) -> tuple[Any, Any, dict[str, Any], list[str] | None]:
    """(transformers model, tokenizer encoding zh, generate() extras, CTranslate2 target prefix)."""
    from transformers import AutoTokenizer, M2M100ForConditionalGeneration, M2M100Tokenizer, MarianMTModel

    checkpoint = str(MODELS[model][0]())
    if model == "nllb-600M":
        tokenizer = AutoTokenizer.from_pretrained(checkpoint, src_lang="zho_Hans")
        forced = tokenizer.convert_tokens_to_ids("eng_Latn")
        hf = M2M100ForConditionalGeneration.from_pretrained(checkpoint).eval()
        return hf, tokenizer, {"forced_bos_token_id": forced}, ["eng_Latn"]
    if model == "m2m100-418M":
        tokenizer = M2M100Tokenizer.from_pretrained(checkpoint, src_lang="zh", tgt_lang="en")
        forced = tokenizer.convert_tokens_to_ids("__en__")
        hf = M2M100ForConditionalGeneration.from_pretrained(checkpoint).eval()
        return hf, tokenizer, {"forced_bos_token_id": forced}, ["__en__"]
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    return MarianMTModel.from_pretrained(checkpoint).eval(), tokenizer, {}, None
