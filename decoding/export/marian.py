"""Convert a Hugging Face Marian checkpoint (opus-mt, opus-mt-tc-big/-bible) into a liuyi bundle, torch-free.

``convert(source, output_dir)`` reads ``model.safetensors`` with numpy, writes the encoder and
one-step decoder graphs with :mod:`decoding.export.transformer`, optionally quantizes them to int8,
copies the tokenizer files and writes the manifest. Needs ``onnx`` and ``safetensors`` (runtime
dependencies), never torch or transformers.

Both vocabulary layouts convert: one vocabulary shared by source and target (opus-mt-zh-en:
``vocab.json``), or separate ones (tc-big/tc-bible: ``vocab.json`` for the source,
``target_vocab.json`` for the target, ``share_encoder_decoder_embeddings: false``). Models with a
multilingual target side need a target-language token such as ``>>cmn_Hans<<`` before the source
text; the manifest names the one the bundle uses.

The math follows ``transformers.models.marian.modeling_marian`` (post-layer-norm blocks, scaled
embeddings, sinusoidal positions, ``final_logits_bias``); the parity tests hold the bundle to
transformers' greedy ``generate()`` token for token.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._manifest import Generation, Limits, SpecialTokens, TokenizerSpec
from ._checkpoint import Checkpoint, ConvertOptions, copy_card, language, load_weights, read_checkpoint
from ._common import prepare_output_dir
from ._hf_weights import Weights
from ._seq2seq import quantize_graphs, write_graphs, write_transformer_manifest
from .transformer import Transformer

MarianExportOptions = ConvertOptions  # the name callers used before the torch-free converter
# Where a target-language token is needed, the first of these found in the vocabulary is used.
TARGET_CODES = {"zh": (">>cmn_Hans<<", ">>zho_Hans<<", ">>cmn<<", ">>zho<<"), "en": (">>eng<<", ">>en<<")}
_NAME = re.compile(r"opus-mt-(?:tc-(?:big|bible-big)-)?([a-z]+)-([a-z]+)")


def convert(
    source: Path, output_dir: Path, *, force: bool = False, options: ConvertOptions | None = None
) -> Path:
    """Convert the Marian checkpoint directory ``source`` into a bundle in ``output_dir``.

    Arguments:
        source: a directory holding config.json, model.safetensors and the tokenizer files.
        output_dir: where the bundle goes; must not exist unless ``force``.
        force: replace an existing ``output_dir``.
        options: name, languages, int8, licence, attribution (None: read from the checkpoint).

    Returns:
        ``output_dir``.

    Raises:
        FileExistsError: ``output_dir`` exists and ``force`` is false.
        FileNotFoundError: ``source`` is not a checkpoint directory, or a tokenizer file is missing.
        ValueError: not usable: not Marian, no safetensors, unknown languages, head width not a
            multiple of 8.
    """
    options = options or ConvertOptions()
    checkpoint = read_checkpoint(Path(source))
    plan = plan_bundle(checkpoint, options, output_dir=Path(output_dir), force=force)
    model = transformer(checkpoint, load_weights(checkpoint), suppress=suppressed_ids(checkpoint))
    model.check_fused_kernels()
    output_dir = prepare_output_dir(output_dir, force=force)
    weight_files = write_graphs(model, output_dir)
    del model  # the float32 weights, before the quantizer needs its own memory
    if options.int8:
        weight_files = quantize_graphs(output_dir)
    finish_bundle(checkpoint, plan, output_dir, options, weight_files=weight_files)
    return output_dir


@dataclass(frozen=True)
class BundlePlan:
    """What a Marian bundle is, decided from the checkpoint's files before any weight is read."""

    source_lang: str
    target_lang: str
    separate_vocabs: bool
    tokenizer_files: dict[str, str]  # role -> file name (same name in checkpoint and bundle)
    vocab: dict[str, int]  # the source vocabulary


def plan_bundle(
    checkpoint: Checkpoint, options: ConvertOptions, *, output_dir: Path, force: bool
) -> BundlePlan:
    """Check everything that can be wrong with the checkpoint's metadata, before the slow part.

    Raises:
        FileExistsError, FileNotFoundError, ValueError: see :func:`convert`.
    """
    if checkpoint.model_type != "marian":
        raise ValueError(f"{checkpoint.path} is a {checkpoint.model_type!r} checkpoint, not Marian")
    if output_dir.exists() and not force:
        raise FileExistsError(f"{output_dir} exists; pass --force to replace it")
    source_lang, target_lang = languages(checkpoint, options)
    separate = not checkpoint.config.get("share_encoder_decoder_embeddings", True)
    files = {"source_spm": "source.spm", "target_spm": "target.spm", "vocab": "vocab.json"}
    if separate:
        files["target_vocab"] = "target_vocab.json"
    for name in files.values():
        if not (checkpoint.path / name).is_file():
            raise FileNotFoundError(f"{checkpoint.path} has no {name} (a Marian tokenizer file)")
    vocab = json.loads((checkpoint.path / "vocab.json").read_text(encoding="utf-8"))
    if "<unk>" not in vocab:
        raise ValueError(f"{checkpoint.path}/vocab.json has no <unk> token")
    return BundlePlan(source_lang, target_lang, separate, files, vocab)


def finish_bundle(
    checkpoint: Checkpoint,
    plan: BundlePlan,
    output_dir: Path,
    options: ConvertOptions,
    *,
    weight_files: list[str] | None = None,
) -> None:
    """Copy the tokenizer files and the model card next to the graphs and write the manifest."""
    for name in plan.tokenizer_files.values():
        shutil.copyfile(checkpoint.path / name, output_dir / name)
    tokenizer_options: dict[str, object] = {"decode_spm": "target" if plan.separate_vocabs else "source"}
    code = target_language_code(plan.vocab, plan.target_lang)
    if code is not None:
        tokenizer_options["target_language_code"] = code
    config = checkpoint.config
    eos, pad = int(config["eos_token_id"]), int(config["pad_token_id"])
    max_positions = int(config["max_position_embeddings"])
    write_transformer_manifest(
        output_dir,
        layers=int(config["decoder_layers"]),
        name=checkpoint.bundle_name(options),
        directions=(f"{plan.source_lang}-{plan.target_lang}",),
        family="marian",
        tokens=SpecialTokens(
            decoder_start=int(checkpoint.get("decoder_start_token_id", pad)),
            eos=eos,
            pad=pad,
            unk=int(plan.vocab["<unk>"]),
        ),
        limits=Limits(
            max_source_tokens=max_positions,
            max_target_tokens=min(int(checkpoint.get("max_length") or max_positions), max_positions),
        ),
        generation=Generation(
            forced_eos_at_limit=checkpoint.get("forced_eos_token_id") == eos,
            max_new_tokens_ratio=2.0,
            max_new_tokens_extra=10,
        ),
        tokenizer=TokenizerSpec(
            kind="marian-sentencepiece", files=plan.tokenizer_files, options=tokenizer_options
        ),
        files=[*plan.tokenizer_files.values(), *copy_card(checkpoint, output_dir), *(weight_files or [])],
        license=checkpoint.license(options),
        attribution=checkpoint.attribution(options),
        int8=options.int8,
    )


def transformer(
    checkpoint: Checkpoint, tensors: dict[str, np.ndarray], *, suppress: list[int]
) -> Transformer:
    """Marian's weights (Hugging Face names) as a :class:`Transformer`."""
    config = checkpoint.config
    width = int(config["d_model"])
    weights = Weights(tensors, checkpoint.path)
    # tied weights are saved once: model.shared (shared vocabulary), decoder.embed_tokens (lm_head)
    decoder_embed = weights.tensor("model.decoder.embed_tokens.weight", "model.shared.weight")
    lm_head = decoder_embed if config.get("tie_word_embeddings", True) else weights.tensor("lm_head.weight")
    bias = tensors.get("final_logits_bias", np.zeros((1, lm_head.shape[0]), np.float32))[0].copy()
    bias[suppress] = -np.inf  # e.g. <pad>: transformers bans it through bad_words_ids
    positions = sinusoids(int(config["max_position_embeddings"]), width)
    return Transformer(
        pre_norm=False,
        activation=str(config.get("activation_function", "swish")),
        encoder_heads=int(config["encoder_attention_heads"]),
        decoder_heads=int(config["decoder_attention_heads"]),
        embed_scale=float(np.sqrt(width)) if config.get("scale_embedding", False) else 1.0,
        encoder_embed=weights.tensor("model.encoder.embed_tokens.weight", "model.shared.weight"),
        decoder_embed=decoder_embed,
        lm_head=lm_head,
        logits_bias=bias,
        encoder_positions=tensors.get("model.encoder.embed_positions.weight", positions),
        decoder_positions=tensors.get("model.decoder.embed_positions.weight", positions),
        encoder_layers=weights.layers("model.encoder", int(config["encoder_layers"]), decoder=False),
        decoder_layers=weights.layers("model.decoder", int(config["decoder_layers"]), decoder=True),
    )


def sinusoids(positions: int, width: int) -> np.ndarray:
    """Marian's fixed position table (not saved in checkpoints): sin in the first half, cos in the second."""
    j = np.arange(width)
    angles = np.arange(positions)[:, None] / np.power(10000, 2 * (j // 2) / width)[None, :]
    half = width // 2 + width % 2
    table = np.empty((positions, width), dtype=np.float32)
    table[:, :half] = np.sin(angles[:, 0::2])
    table[:, half:] = np.cos(angles[:, 1::2])
    return table


def suppressed_ids(checkpoint: Checkpoint) -> list[int]:
    """Single-token ``bad_words_ids`` (opus-mt bans <pad>): their logits become -inf in the graph."""
    return sorted({int(ids[0]) for ids in checkpoint.get("bad_words_ids") or [] if len(ids) == 1})


def languages(checkpoint: Checkpoint, options: ConvertOptions) -> tuple[str, str]:
    """(source, target): the options, else the opus-mt name, else tokenizer_config.json.

    Raises:
        ValueError: neither tells zh/en languages.
    """
    match = next((m for m in map(_NAME.search, checkpoint.names) if m), None)
    named = (language(match.group(1)), language(match.group(2))) if match else (None, None)
    tc = checkpoint.tokenizer_config
    source = options.source_lang or named[0] or language(tc.get("source_lang"))
    target = options.target_lang or named[1] or language(tc.get("target_lang"))
    if source is None or target is None or source == target:
        raise ValueError(
            f"cannot tell the languages of {checkpoint.model_name} (zh->en or en->zh); "
            "pass --source-lang and --target-lang"
        )
    return source, target


def target_language_code(vocab: dict[str, int], target_lang: str) -> str | None:
    """The ``>>xxx<<`` token to put before the source, when the vocabulary has target-language tokens."""
    codes = [token for token in vocab if token.startswith(">>") and token.endswith("<<")]
    if not codes:
        return None
    wanted = TARGET_CODES[target_lang]
    chosen = next((code for code in wanted if code in vocab), None)
    if chosen is None and len(codes) > 1:
        raise ValueError(f"the model needs a target language token; none of {wanted} is in {codes[:10]}...")
    return chosen
