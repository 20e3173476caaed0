"""Randomly initialised Marian checkpoints, built offline, for tests and benchmarks.

Real opus-mt weights cannot be downloaded here, but the export path and the decoder must still be
exercised on the real architecture. This writes a normal Hugging Face checkpoint directory (config,
safetensors weights, ``source.spm``/``target.spm``/``vocab.json``) that ``MarianMTModel`` and
``MarianTokenizer`` load like any opus-mt download:

* the SentencePiece model is trained here on a small built-in zh/en corpus, with byte fallback, so
  rare characters become UTF-8 byte pieces (exactly what the incremental detokenizer must handle);
* the vocabulary follows opus-mt's layout: ``</s>`` = 0, ``<unk>`` = 1, pieces, filler, ``<pad>`` last;
* the generation config mirrors opus-mt's (pad banned, eos forced at the length limit).

    python -m decoding.export.synthetic OUT --arch opus-mt   # vocab 65001, d_model 512, 6+6 layers
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._common import prepare_output_dir

CORPUS = [
    "你好，世界。",
    "今天天气很好。",
    "我喜欢喝茶。",
    "他明天去北京。",
    "这本书很有意思。",
    "我们一起吃饭吧！",
    "请问火车站在哪里？",
    "汤姆在学校学习中文。",
    "她每天早上跑步。",
    "这个问题很难回答。",
    "你会说英语吗？",
    "我的朋友住在上海。",
    "周末我们去公园散步。",
    "他把钥匙忘在家里了。",
    "电脑坏了，需要修理。",
    "春天来了，花都开了。",
    "谢谢你的帮助。",
    "对不起，我迟到了。",
    "请再说一遍。",
    "我不知道他的名字。",
    "咖啡太烫了。",
    "我们下周见面。",
    "翻译服务应该很快。",
    "流式输出让用户更早看到结果。",
    "猫在桌子下面睡觉。",
    "Hello, world.",
    "The weather is nice today.",
    "I like drinking tea.",
    "He goes to Beijing tomorrow.",
    "This book is very interesting.",
    "Let's have dinner together!",
    "Where is the train station?",
    "Tom studies Chinese at school.",
    "She runs every morning.",
    "This question is hard to answer.",
    "Can you speak English?",
    "My friend lives in Shanghai.",
    "We walk in the park on weekends.",
    "He forgot his keys at home.",
    "The computer is broken and needs repair.",
    "Spring is here and flowers bloom.",
    "Thank you for your help.",
    "Sorry, I am late.",
    "Please say it again.",
    "I don't know his name.",
    "The coffee is too hot.",
    "See you next week.",
    "Translation should be fast.",
    "The cat sleeps under the table.",
    "Streaming lets users see results sooner.",
    "Numbers like 3.14 and 2024 appear too.",
    "Emoji 😀 and café.",
]


# tc-big style target-language tokens, at the front of a separate source vocabulary
LANGUAGE_TOKENS = (">>eng<<", ">>cmn_Hans<<")


@dataclass(frozen=True, kw_only=True)
class Architecture:
    vocab_size: int | None  # None: exactly the SentencePiece pieces + specials; else padded with filler
    d_model: int
    layers: int  # encoder and decoder each
    heads: int
    ffn: int
    max_positions: int
    spm_pieces: int  # SentencePiece vocabulary size (byte pieces included)


ARCHITECTURES = {
    # small enough to export and run in a fraction of a second; used by the parity tests
    "tiny": Architecture(
        vocab_size=None, d_model=32, layers=2, heads=4, ffn=64, max_positions=128, spm_pieces=600
    ),
    # Helsinki-NLP/opus-mt-zh-en's shape: vocab 65001, d_model 512, 6+6 layers, 8 heads, ffn 2048
    "opus-mt": Architecture(
        vocab_size=65001, d_model=512, layers=6, heads=8, ffn=2048, max_positions=512, spm_pieces=600
    ),
}


def build(
    output_dir: Path,
    *,
    arch: str = "tiny",
    seed: int = 0,
    eos_bias: float = 0.0,
    max_length: int = 512,
    separate_vocabs: bool = False,
    force: bool = False,
) -> Path:
    """Write a random Marian checkpoint directory.

    Arguments:
        output_dir: directory to create.
        arch: a key of ``ARCHITECTURES``.
        seed: torch seed for the weights (same seed, same model).
        eos_bias: added to eos's ``final_logits_bias`` so random models sometimes stop on their own.
        max_length: the generation config's max_length (the bundle's hard cap on output tokens).
        separate_vocabs: the tc-big/tc-bible layout: a source vocabulary (``vocab.json``, with
            target-language tokens such as ``>>eng<<``) and a smaller English-only target vocabulary
            (``target_vocab.json``, ``target.spm``), ``share_encoder_decoder_embeddings: false``.
        force: replace an existing directory.

    Returns:
        ``output_dir``.
    """
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    shape = ARCHITECTURES[arch]
    output_dir = prepare_output_dir(output_dir, force=force)
    source_pieces = train_sentencepiece(output_dir / "source.spm", CORPUS, shape.spm_pieces)
    if separate_vocabs:
        english = [line for line in CORPUS if line.isascii()]
        target_pieces = train_sentencepiece(output_dir / "target.spm", english, shape.spm_pieces * 3 // 4)
        vocab = _write_vocab(output_dir / "vocab.json", source_pieces, shape.vocab_size, LANGUAGE_TOKENS)
        target_vocab = _write_vocab(output_dir / "target_vocab.json", target_pieces, None, ())
    else:
        (output_dir / "target.spm").write_bytes((output_dir / "source.spm").read_bytes())
        vocab = target_vocab = _write_vocab(output_dir / "vocab.json", source_pieces, shape.vocab_size, ())
    pad = len(target_vocab) - 1  # also inside the (larger) source vocabulary, as nn.Embedding requires
    config = MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(target_vocab),
        activation_function="swish",
        scale_embedding=True,
        share_encoder_decoder_embeddings=not separate_vocabs,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
        **config_shape(shape, tiny=arch == "tiny"),
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias[0, 0] += eos_bias
    model.generation_config = GenerationConfig(
        bad_words_ids=[[pad]],
        bos_token_id=0,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_length=max_length,
        num_beams=1,
        pad_token_id=pad,
    )
    model.save_pretrained(str(output_dir))
    (output_dir / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "MarianTokenizer",
                "source_lang": "zh",
                "target_lang": "en",
                "separate_vocabs": separate_vocabs,
                "model_max_length": shape.max_positions,
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    (output_dir / "README.md").write_text(
        "---\nlicense: mit\n---\nRandomly initialised Marian checkpoint built by liuyi for tests.\n",
        encoding="utf-8",
    )
    return output_dir


# opus-mt's SentencePiece models: unigram with byte fallback, <unk> = 0, </s> = 1, no <s>
MARIAN_SPM: dict[str, Any] = {
    "model_type": "unigram",
    "byte_fallback": True,
    "unk_id": 0,
    "bos_id": -1,
    "eos_id": 1,
}


def train_sentencepiece(
    path: Path, corpus: list[str], pieces: int, settings: dict[str, Any] = MARIAN_SPM
) -> list[str]:
    """Train a SentencePiece model on ``corpus`` offline, write it to ``path``, return its pieces."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus * 4),
        model_writer=model,
        vocab_size=pieces,
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
        pad_id=-1,
        eos_piece="</s>",
        **settings,
    )
    path.write_bytes(model.getvalue())
    processor = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def _write_vocab(path: Path, pieces: list[str], size: int | None, extra: tuple[str, ...]) -> dict[str, int]:
    words = ["</s>", "<unk>", *extra, *[p for p in pieces if p not in ("<unk>", "</s>", "<s>")]]
    if size is not None:
        words += [f"<filler_{i}>" for i in range(size - 1 - len(words))]
    vocab = {word: index for index, word in enumerate([*words, "<pad>"])}
    path.write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return vocab


def config_shape(shape: Any, *, tiny: bool) -> dict[str, Any]:
    """Config keywords every synthetic encoder-decoder shares: sizes from ``shape``, no dropout, and
    large random weights for tiny models (so greedy outputs vary from token to token)."""
    return {
        "d_model": shape.d_model,
        "encoder_layers": shape.layers,
        "decoder_layers": shape.layers,
        "encoder_attention_heads": shape.heads,
        "decoder_attention_heads": shape.heads,
        "encoder_ffn_dim": shape.ffn,
        "decoder_ffn_dim": shape.ffn,
        "max_position_embeddings": shape.max_positions,
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "init_std": 0.3 if tiny else 0.02,
    }


def cli_parser(prog: str, description: str, architectures: list[str]) -> argparse.ArgumentParser:
    """The command line every synthetic checkpoint builder shares."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("output", type=Path)
    parser.add_argument("--arch", choices=sorted(architectures), default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eos-bias", type=float, default=0.0)
    parser.add_argument("--force", action="store_true")
    return parser


def build_from_cli(build: Callable[..., Path], args: argparse.Namespace, **extra: Any) -> int:
    """Build what :func:`cli_parser`'s arguments (and a builder's own, ``extra``) ask for; print where."""
    print(
        build(args.output, arch=args.arch, seed=args.seed, eos_bias=args.eos_bias, force=args.force, **extra)
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = cli_parser("python -m decoding.export.synthetic", __doc__.split("\n")[0], list(ARCHITECTURES))
    parser.add_argument("--separate-vocabs", action="store_true", help="the tc-big/tc-bible layout")
    args = parser.parse_args(argv)
    return build_from_cli(build, args, separate_vocabs=args.separate_vocabs)


if __name__ == "__main__":
    sys.exit(main())
