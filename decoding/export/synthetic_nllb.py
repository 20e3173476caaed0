"""Randomly initialised NLLB-200 (M2M100 architecture) checkpoints, built offline, for tests and benchmarks.

Writes what a ``facebook/nllb-200-*`` download holds, in miniature: ``config.json``
(``model_type: m2m_100``), ``generation_config.json``, ``model.safetensors``, the SentencePiece BPE
model ``sentencepiece.bpe.model`` (trained here on the built-in zh/en corpus; fairseq layout
``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2) and ``tokenizer.json``/``tokenizer_config.json`` as
transformers' ``NllbTokenizer`` saves them (ids = SentencePiece ids + 1, language codes such as
``zho_Hans`` and ``eng_Latn`` as added tokens). Needs torch and transformers (the ``[export]`` extra).

    python -m decoding.export.synthetic_nllb OUT                 # tiny
    python -m decoding.export.synthetic_nllb OUT --arch nllb-600M  # d_model 1024, 12+12 layers
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._common import prepare_output_dir
from .synthetic import CORPUS, cli_parser, config_shape, train_sentencepiece

# a few of NLLB's 202 codes: the two liuyi serves and one it does not
LANGUAGE_CODES = ("eng_Latn", "fra_Latn", "zho_Hans")
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
    vocab_size: int | None  # None: the tokenizer's size; else padded (NLLB-200: 256206)


ARCHITECTURES = {
    "tiny": Architecture(
        d_model=32, layers=2, heads=4, ffn=64, max_positions=128, spm_pieces=400, vocab_size=None
    ),
    # facebook/nllb-200-distilled-600M's shape (its real vocabulary has 256206 entries)
    "nllb-600M": Architecture(
        d_model=1024, layers=12, heads=16, ffn=4096, max_positions=1024, spm_pieces=400, vocab_size=256206
    ),
}


def build(
    output_dir: Path, *, arch: str = "tiny", seed: int = 0, eos_bias: float = 0.0, force: bool = False
) -> Path:
    """Write a random NLLB checkpoint directory.

    Arguments:
        output_dir: directory to create.
        arch: a key of ``ARCHITECTURES``.
        seed: torch seed for the weights.
        eos_bias: moves eos's embedding row (tied to the output layer) towards the decoder's final
            layer-norm bias, so that random models sometimes stop on their own.
        force: replace an existing directory.

    Returns:
        ``output_dir``.
    """
    import torch
    from transformers import GenerationConfig, M2M100Config, M2M100ForConditionalGeneration, NllbTokenizer

    shape = ARCHITECTURES[arch]
    output_dir = prepare_output_dir(output_dir, force=force)
    with tempfile.TemporaryDirectory() as scratch:
        train_sentencepiece(Path(scratch) / "sentencepiece.bpe.model", CORPUS, shape.spm_pieces, NLLB_SPM)
        tokenizer = NllbTokenizer.from_pretrained(
            scratch, src_lang="zho_Hans", tgt_lang="eng_Latn", extra_special_tokens=list(LANGUAGE_CODES)
        )
        tokenizer.save_pretrained(str(output_dir))
        (output_dir / "sentencepiece.bpe.model").write_bytes(
            (Path(scratch) / "sentencepiece.bpe.model").read_bytes()
        )
    config = M2M100Config(
        vocab_size=shape.vocab_size or len(tokenizer),
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
    (output_dir / "README.md").write_text(
        "---\nlicense: cc-by-nc-4.0\nlanguage:\n- zh\n- en\n---\n"
        "Randomly initialised NLLB-200-architecture checkpoint built by liuyi for tests.\n",
        encoding="utf-8",
    )
    return output_dir


def main(argv: list[str] | None = None) -> int:
    parser = cli_parser(
        "python -m decoding.export.synthetic_nllb", __doc__.split("\n")[0], list(ARCHITECTURES)
    )
    args = parser.parse_args(argv)
    print(build(args.output, arch=args.arch, seed=args.seed, eos_bias=args.eos_bias, force=args.force))
    return 0


if __name__ == "__main__":
    sys.exit(main())
