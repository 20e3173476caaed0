"""Tokenizers named by a bundle manifest's ``tokenizer.kind``.

kind                   class                       files
marian-sentencepiece   MarianSentencePieceTokenizer source_spm, target_spm, vocab[, target_vocab]
word-vocab             WordVocabTokenizer          source_vocab, target_vocab
nllb-sentencepiece     NllbSentencePieceTokenizer  spm
m2m100-sentencepiece   M2M100SentencePieceTokenizer spm, vocab
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .._errors import BundleFileMissingError, ManifestError
from .._manifest import SpecialTokens, TokenizerSpec
from ._base import Encoding, IncrementalDecoder, Tokenizer
from ._m2m100 import M2M100SentencePieceTokenizer
from ._marian import MarianSentencePieceTokenizer
from ._nllb import NllbSentencePieceTokenizer
from ._offsets import OffsetDetokenizer
from ._words import WordVocabTokenizer

Loader = Callable[[Path, TokenizerSpec, SpecialTokens], Tokenizer]

_LOADERS: dict[str, Loader] = {
    "m2m100-sentencepiece": M2M100SentencePieceTokenizer.load,
    "marian-sentencepiece": MarianSentencePieceTokenizer.load,
    "nllb-sentencepiece": NllbSentencePieceTokenizer.load,
    "word-vocab": WordVocabTokenizer.load,
}


def load_tokenizer(bundle_dir: Path, spec: TokenizerSpec, tokens: SpecialTokens) -> Tokenizer:
    """Build the tokenizer a manifest names.

    Raises:
        ManifestError: unknown kind, or a file role the kind needs is not declared.
        BundleFileMissingError: a declared file is absent.
    """
    loader = _LOADERS.get(spec.kind)
    if loader is None:
        raise ManifestError(
            bundle_dir,
            f"tokenizer.kind {spec.kind!r} is unknown (known: {', '.join(sorted(_LOADERS))})",
            file="manifest.json",
        )
    for role, name in spec.files.items():
        if not (bundle_dir / name).is_file():
            raise BundleFileMissingError(bundle_dir, f"tokenizer file for {role!r} is missing", file=name)
    return loader(bundle_dir, spec, tokens)


__all__ = [
    "Encoding",
    "IncrementalDecoder",
    "M2M100SentencePieceTokenizer",
    "MarianSentencePieceTokenizer",
    "NllbSentencePieceTokenizer",
    "OffsetDetokenizer",
    "Tokenizer",
    "WordVocabTokenizer",
    "load_tokenizer",
]
