"""Convert an M2M100 or NLLB-200 checkpoint into a liuyi bundle, torch-free.

``facebook/nllb-200-distilled-600M``, ``facebook/m2m100_418M`` and their siblings are one model
for many languages: the source starts with its language token (NLLB's ``zho_Hans``, M2M100's
``__zh__``), and the decoder is forced to begin with the target's (transformers'
``forced_bos_token_id``). So one bundle serves both zh->en and en->zh: the manifest lists both
directions, the token of each language (tokenizer options) and the token each target language
starts with (``generation.forced_first_tokens``). The two differ only in their tokenizers
(:mod:`decoding.export._language_tokens` tells them apart).

Architecture differences from Marian, all in :class:`decoding.export.transformer.Transformer`'s
fields: layer norm *before* each block and once more after the last layer, ReLU, no logits bias,
and fairseq's sinusoidal positions, which start at ``padding_idx + 1`` and put sin and cos in
halves with a ``log(10000) / (half - 1)`` frequency step.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np

from .._manifest import Generation, Limits, SpecialTokens, TokenizerSpec
from ._checkpoint import Checkpoint, ConvertOptions, copy_card, load_weights, read_checkpoint
from ._common import prepare_output_dir
from ._hf_weights import Weights
from ._language_tokens import language_tokens
from ._seq2seq import quantize_graphs, write_graphs, write_transformer_manifest
from .transformer import Transformer


def convert(
    source: Path, output_dir: Path, *, force: bool = False, options: ConvertOptions | None = None
) -> Path:
    """Convert the M2M100/NLLB checkpoint directory ``source`` into a bundle in ``output_dir``.

    Arguments:
        source: a directory holding config.json, model.safetensors, sentencepiece.bpe.model and
            NLLB's tokenizer.json (or tokenizer_config.json with ``added_tokens_decoder``) or
            M2M100's vocab.json (and tokenizer_config.json naming its language list).
        output_dir: where the bundle goes; must not exist unless ``force``.
        force: replace an existing ``output_dir``.
        options: name, int8, licence, attribution; languages: both None for a bundle serving
            zh->en and en->zh, else the one direction given.

    Returns:
        ``output_dir``.

    Raises:
        FileExistsError: ``output_dir`` exists and ``force`` is false.
        FileNotFoundError: the SentencePiece model is missing.
        ValueError: not M2M100/NLLB, no safetensors, no zh/en language tokens (neither NLLB's
            codes nor M2M100's ``__zh__``/``__en__``), head width not a multiple of 8.
    """
    options = options or ConvertOptions()
    checkpoint = read_checkpoint(Path(source))
    if checkpoint.model_type != "m2m_100":
        raise ValueError(f"{source} is a {checkpoint.model_type!r} checkpoint, not M2M100/NLLB")
    if Path(output_dir).exists() and not force:
        raise FileExistsError(f"{output_dir} exists; pass --force to replace it")
    languages = language_tokens(checkpoint)
    directions = _directions(options)
    model = transformer(checkpoint, load_weights(checkpoint))
    model.check_fused_kernels()
    layers = len(model.decoder_layers)

    output_dir = prepare_output_dir(output_dir, force=force)
    weight_files = write_graphs(model, output_dir)
    del model  # the float32 weights, before the quantizer needs its own memory
    if options.int8:
        weight_files = quantize_graphs(output_dir)
    for name in languages.files.values():
        shutil.copyfile(checkpoint.path / name, output_dir / name)
    config = checkpoint.config
    max_positions = int(config["max_position_embeddings"])
    write_transformer_manifest(
        output_dir,
        layers=layers,
        name=checkpoint.bundle_name(options),
        directions=directions,
        family="m2m100",
        tokens=SpecialTokens(
            decoder_start=int(checkpoint.get("decoder_start_token_id", 2)),
            eos=int(checkpoint.get("eos_token_id", 2)),
            pad=int(checkpoint.get("pad_token_id", 1)),
            unk=languages.unk,
        ),
        limits=Limits(
            max_source_tokens=max_positions,
            max_target_tokens=min(int(checkpoint.get("max_length") or max_positions), max_positions),
        ),
        generation=Generation(
            forced_eos_at_limit=checkpoint.get("forced_eos_token_id") == checkpoint.get("eos_token_id", 2),
            max_new_tokens_ratio=2.0,
            max_new_tokens_extra=10,
            forced_first_tokens=languages.ids,
        ),
        tokenizer=TokenizerSpec(
            kind=languages.kind,
            files=languages.files,
            options={"language_codes": languages.ids, "special_ids": languages.special_ids},
        ),
        files=[*languages.files.values(), *copy_card(checkpoint, output_dir), *weight_files],
        license=checkpoint.license(options),
        attribution=checkpoint.attribution(options),
        int8=options.int8,
    )
    return output_dir


def transformer(checkpoint: Checkpoint, tensors: dict[str, np.ndarray]) -> Transformer:
    """M2M100's weights (Hugging Face names) as a :class:`Transformer`."""
    config = checkpoint.config
    width = int(config["d_model"])
    weights = Weights(tensors, checkpoint.path)
    shared = weights.tensor("model.shared.weight", "model.encoder.embed_tokens.weight")
    lm_head = shared if config.get("tie_word_embeddings", True) else weights.tensor("lm_head.weight")
    pad = int(config.get("pad_token_id", 1))
    # fairseq positions: row padding_idx + 1 is the first token's; slice so row i is position i
    positions = sinusoids(int(config["max_position_embeddings"]) + pad + 1, width, pad)[pad + 1 :]
    return Transformer(
        pre_norm=True,
        activation=str(config.get("activation_function", "relu")),
        encoder_heads=int(config["encoder_attention_heads"]),
        decoder_heads=int(config["decoder_attention_heads"]),
        embed_scale=math.sqrt(width) if config.get("scale_embedding", False) else 1.0,
        encoder_embed=weights.tensor("model.encoder.embed_tokens.weight", "model.shared.weight"),
        decoder_embed=weights.tensor("model.decoder.embed_tokens.weight", "model.shared.weight"),
        lm_head=lm_head,
        logits_bias=np.zeros(lm_head.shape[0], dtype=np.float32),
        encoder_positions=positions,
        decoder_positions=positions,
        encoder_layers=weights.layers("model.encoder", int(config["encoder_layers"]), decoder=False),
        decoder_layers=weights.layers("model.decoder", int(config["decoder_layers"]), decoder=True),
        encoder_norm=weights.norm("model.encoder.layer_norm"),
        decoder_norm=weights.norm("model.decoder.layer_norm"),
    )


def sinusoids(positions: int, width: int, padding_idx: int) -> np.ndarray:
    """fairseq's table (M2M100SinusoidalPositionalEmbedding.get_embedding), row padding_idx zeroed."""
    half = width // 2
    step = math.log(10000) / (half - 1)
    frequencies = np.exp(np.arange(half, dtype=np.float32) * -step)
    angles = np.arange(positions, dtype=np.float32)[:, None] * frequencies[None, :]
    table = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
    if width % 2:
        table = np.concatenate([table, np.zeros((positions, 1), dtype=np.float32)], axis=1)
    table[padding_idx] = 0
    return table.astype(np.float32)


def _directions(options: ConvertOptions) -> tuple[str, ...]:
    source, target = options.source_lang, options.target_lang
    if source is None and target is None:
        return ("zh-en", "en-zh")
    source = source or ("en" if target == "zh" else "zh")
    target = target or ("en" if source == "zh" else "zh")
    if source == target:
        raise ValueError("source and target languages must differ")
    return (f"{source}-{target}",)
