"""Randomly initialised NLLB-200 and M2M100 checkpoints, built offline, for tests and benchmarks.

Writes what a ``facebook/nllb-200-*`` download holds, in miniature: ``config.json``
(``model_type: m2m_100``), ``generation_config.json``, ``model.safetensors``, the SentencePiece BPE
model ``sentencepiece.bpe.model`` (trained here on the built-in zh/en corpus; fairseq layout
``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2) and ``tokenizer.json``/``tokenizer_config.json`` as
transformers' ``NllbTokenizer`` saves them (ids = SentencePiece ids + 1, language codes such as
``zho_Hans`` and ``eng_Latn`` as added tokens). Needs torch and transformers (the ``[export]`` extra).

With ``tokenizer="m2m100"`` the tokenizer is a ``facebook/m2m100_418M`` download's instead:
``vocab.json`` (``<s>``, ``<pad>``, ``</s>``, ``<unk>``, then the pieces in an order of its own,
a few left out so that they become ``<unk>``), ``tokenizer_config.json`` and
``special_tokens_map.json`` (the ``__xx__`` language tokens) as on the hub; the model's vocabulary
holds vocab.json, the 100 language tokens and 8 made-up words, as the real one does.

    python -m decoding.export.synthetic_nllb OUT                 # tiny
    python -m decoding.export.synthetic_nllb OUT --arch nllb-600M  # d_model 1024, 12+12 layers
    python -m decoding.export.synthetic_nllb OUT --tokenizer m2m100
    python -m decoding.export.synthetic_nllb OUT --arch m2m100-418M --tokenizer m2m100  # vocab 128112
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._common import prepare_output_dir
from .synthetic import CORPUS, build_from_cli, cli_parser, config_shape, train_sentencepiece

# a few of NLLB's 202 codes: the two liuyi serves and one it does not
LANGUAGE_CODES = ("eng_Latn", "fra_Latn", "zho_Hans")
TOKENIZERS = ("nllb", "m2m100")
M2M100_MADEUP_WORDS = 8  # model ids after M2M100's language tokens that no tokenizer maps
M2M100_DROPPED_PIECES = 3  # SentencePiece pieces left out of vocab.json (they encode as <unk>)
NLLB_SPM: dict[str, Any] = {
    "model_type": "bpe",
    "byte_fallback": False,
    "unk_id": 0,
    "bos_id": 1,
    "eos_id": 2,
}


@dataclass(frozen=True, kw_only=True)
class Architecture:
    d_model: int
    layers: int  # encoder and decoder each
    heads: int
    ffn: int
    max_positions: int
    spm_pieces: int
    # None: the tokenizer's size; else the model's vocabulary is padded to it (NLLB-200: 256206;
    # M2M100: vocab.json is padded with filler pieces so that vocab.json, the language tokens and
    # the made-up words add up to it, which puts the language tokens at the real model's ids)
    vocab_size: int | None


ARCHITECTURES = {
    "tiny": Architecture(
        d_model=32, layers=2, heads=4, ffn=64, max_positions=128, spm_pieces=400, vocab_size=None
    ),
    # facebook/nllb-200-distilled-600M's shape (its real vocabulary has 256206 entries)
    "nllb-600M": Architecture(
        d_model=1024, layers=12, heads=16, ffn=4096, max_positions=1024, spm_pieces=400, vocab_size=256206
    ),
    # facebook/m2m100_418M's shape: 128004 vocab.json entries + 100 language tokens + 8 made-up words
    "m2m100-418M": Architecture(
        d_model=1024, layers=12, heads=16, ffn=4096, max_positions=1024, spm_pieces=400, vocab_size=128112
    ),
}


def build(
    output_dir: Path,
    *,
    arch: str = "tiny",
    seed: int = 0,
    eos_bias: float = 0.0,
    tokenizer: str = "nllb",
    force: bool = False,
) -> Path:
    """Write a random NLLB (or M2M100) checkpoint directory.

    Arguments:
        output_dir: directory to create.
        arch: a key of ``ARCHITECTURES``.
        seed: torch seed for the weights.
        eos_bias: moves eos's embedding row (tied to the output layer) towards the decoder's final
            layer-norm bias, so that random models sometimes stop on their own.
        tokenizer: "nllb" or "m2m100" (a key of ``TOKENIZERS``): whose tokenizer files to write.
        force: replace an existing directory.

    Returns:
        ``output_dir``.
    """
    import torch
    from transformers import GenerationConfig, M2M100Config, M2M100ForConditionalGeneration

    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZERS)}")
    shape = ARCHITECTURES[arch]
    output_dir = prepare_output_dir(output_dir, force=force)
    if tokenizer == "m2m100":
        tokens = _write_m2m100_tokenizer(output_dir, shape.spm_pieces, seed, shape.vocab_size)
    else:
        tokens = _write_nllb_tokenizer(output_dir, shape.spm_pieces)
    config = M2M100Config(
        vocab_size=shape.vocab_size or tokens,
        activation_function="relu",
        scale_embedding=True,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        **config_shape(shape, tiny=arch == "tiny"),
    )
    torch.manual_seed(seed)
    model = M2M100ForConditionalGeneration(config).eval()
    with torch.no_grad():
        # NLLB has no logits bias: make eos likelier through its embedding row (tied to lm_head)
        norm_bias = model.model.decoder.layer_norm.bias
        norm_bias += 0.1 * torch.randn_like(norm_bias)
        model.model.shared.weight[2] += eos_bias * norm_bias / norm_bias.norm()
    model.generation_config = GenerationConfig(
        bos_token_id=0, decoder_start_token_id=2, eos_token_id=2, pad_token_id=1, max_length=200
    )
    model.save_pretrained(str(output_dir))
    licence, name = ("mit", "M2M100") if tokenizer == "m2m100" else ("cc-by-nc-4.0", "NLLB-200")
    (output_dir / "README.md").write_text(
        f"---\nlicense: {licence}\nlanguage:\n- zh\n- en\n---\n"
        f"Randomly initialised {name}-architecture checkpoint built by liuyi for tests.\n",
        encoding="utf-8",
    )
    return output_dir


def _write_nllb_tokenizer(output_dir: Path, pieces: int) -> int:
    """NLLB's tokenizer files, as transformers saves them; returns the tokenizer's size."""
    from transformers import NllbTokenizer

    with tempfile.TemporaryDirectory() as scratch:
        train_sentencepiece(Path(scratch) / "sentencepiece.bpe.model", CORPUS, pieces, NLLB_SPM)
        tokenizer = NllbTokenizer.from_pretrained(
            scratch, src_lang="zho_Hans", tgt_lang="eng_Latn", extra_special_tokens=list(LANGUAGE_CODES)
        )
        tokenizer.save_pretrained(str(output_dir))
        (output_dir / "sentencepiece.bpe.model").write_bytes(
            (Path(scratch) / "sentencepiece.bpe.model").read_bytes()
        )
    return len(tokenizer)


def _write_m2m100_tokenizer(output_dir: Path, pieces: int, seed: int, vocab_size: int | None) -> int:
    """M2M100's tokenizer files, as ``facebook/m2m100_418M`` ships them; returns the model's vocabulary
    size (vocab.json, the language tokens, the made-up words). With ``vocab_size``, vocab.json is
    padded with filler pieces (SentencePiece never yields them) to make that size: the tokenizer then
    numbers the language tokens as the real model does, and converters that count the vocabulary
    (CTranslate2's) find the embedding's size."""
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    spm_pieces = train_sentencepiece(output_dir / "sentencepiece.bpe.model", CORPUS, pieces, NLLB_SPM)
    words = [p for p in spm_pieces if p not in ("<unk>", "<s>", "</s>")]
    random.Random(seed).shuffle(words)  # vocab.json's ids do not follow SentencePiece's
    words = words[M2M100_DROPPED_PIECES:]
    vocab = {word: i for i, word in enumerate(["<s>", "<pad>", "</s>", "<unk>", *words])}
    languages = FAIRSEQ_LANGUAGE_CODES["m2m100"]
    if vocab_size is not None:
        fillers = vocab_size - len(languages) - M2M100_MADEUP_WORDS - len(vocab)
        if fillers < 0:
            raise ValueError(f"vocab_size {vocab_size} is smaller than the tokenizer's vocabulary")
        vocab.update({f"<filler_{i}>": len(vocab) + i for i in range(fillers)})
    specials = {
        "bos_token": "<s>",
        "eos_token": "</s>",
        "sep_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
    }
    files = {
        "vocab.json": vocab,
        "special_tokens_map.json": {**specials, "additional_special_tokens": [f"__{c}__" for c in languages]},
        "tokenizer_config.json": {
            **specials,
            "src_lang": None,
            "tgt_lang": None,
            "language_codes": "m2m100",
            "sp_model_kwargs": {},
            "num_madeup_words": M2M100_MADEUP_WORDS,
            "model_max_length": 1024,
            "tokenizer_class": "M2M100Tokenizer",
        },
    }
    for name, data in files.items():
        (output_dir / name).write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return len(vocab) + len(languages) + M2M100_MADEUP_WORDS


def main(argv: list[str] | None = None) -> int:
    parser = cli_parser(
        "python -m decoding.export.synthetic_nllb", __doc__.split("\n")[0], list(ARCHITECTURES)
    )
    parser.add_argument("--tokenizer", choices=TOKENIZERS, default="nllb", help="whose tokenizer files")
    args = parser.parse_args(argv)
    return build_from_cli(build, args, tokenizer=args.tokenizer)


if __name__ == "__main__":
    sys.exit(main())
