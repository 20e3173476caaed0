"""Marian (opus-mt) tokenization without transformers: SentencePiece + the model's vocab.json.

This mirrors ``transformers.MarianTokenizer`` exactly (the parity tests compare the two) so that the
server needs neither transformers nor torch at run time:

* encode: SentencePiece (source model) splits the text into pieces; ``vocab.json`` maps pieces to
  model ids (unknown pieces become ``<unk>``); ``</s>`` is appended. Multilingual-target models
  (opus-mt-en-zh) need a target-language token such as ``>>cmn_Hans<<`` first: the manifest names it.
* decode: special ids (eos, pad, unk) are skipped, ids become pieces, SentencePiece joins them.
  transformers decodes a shared-vocabulary model with the *source* SentencePiece model; the manifest
  records which one to use so both agree.
* separate vocabularies (opus-mt-tc-big/-bible): ``vocab.json`` maps source pieces, the optional
  ``target_vocab.json`` maps target ids back to pieces (decoded with ``target.spm``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import sentencepiece

from .._errors import ManifestError
from .._manifest import SpecialTokens, TokenizerSpec
from ._base import Encoding, IncrementalDecoder
from ._offsets import OffsetDetokenizer
from ._piece_vocab import SPIECE_UNDERLINE, PieceVocabulary, read_vocab


class MarianSentencePieceTokenizer:
    def __init__(
        self,
        *,
        source_spm: sentencepiece.SentencePieceProcessor,
        decode_spm: sentencepiece.SentencePieceProcessor,
        vocab: dict[str, int],
        tokens: SpecialTokens,
        target_language_code: str | None = None,
        target_vocab: dict[str, int] | None = None,
    ) -> None:
        if tokens.unk is None:
            raise ValueError("a Marian vocabulary needs an unk token")
        self._source_spm = source_spm
        self._decode_spm = decode_spm
        self._vocabulary = PieceVocabulary(vocab, unk=tokens.unk, target_vocab=target_vocab)
        self._eos = tokens.eos
        self._skip = {t for t in (tokens.eos, tokens.pad, tokens.unk) if t is not None}
        self._prefix: list[int] = []
        if target_language_code is not None:
            if target_language_code not in vocab:
                raise ValueError(f"target language code {target_language_code!r} is not in the vocabulary")
            self._prefix = [vocab[target_language_code]]

    @classmethod
    def load(
        cls, bundle_dir: Path, spec: TokenizerSpec, tokens: SpecialTokens
    ) -> MarianSentencePieceTokenizer:
        files = spec.files
        for role in ("source_spm", "target_spm", "vocab"):
            if role not in files:
                raise ManifestError(bundle_dir, f"tokenizer.files.{role} is missing", file="manifest.json")
        decode_with = spec.options.get("decode_spm", "target")
        if decode_with not in ("source", "target"):
            raise ManifestError(
                bundle_dir, "tokenizer.options.decode_spm must be 'source' or 'target'", file="manifest.json"
            )
        source = _load_spm(bundle_dir / files["source_spm"])
        target = _load_spm(bundle_dir / files["target_spm"])
        vocab = read_vocab(bundle_dir, files["vocab"])
        target_vocab = read_vocab(bundle_dir, files["target_vocab"]) if "target_vocab" in files else None
        try:
            return cls(
                source_spm=source,
                decode_spm=source if decode_with == "source" else target,
                vocab=vocab,
                tokens=tokens,
                target_language_code=spec.options.get("target_language_code"),
                target_vocab=target_vocab,
            )
        except ValueError as exc:
            raise ManifestError(bundle_dir, str(exc), file=files["vocab"]) from None

    def encode(self, text: str) -> Encoding:
        ids, unknown = self._vocabulary.ids(self._source_spm.encode(text, out_type=str))
        return Encoding(ids=[*self._prefix, *ids, self._eos], unknown_chars=unknown)

    def decode(self, ids: Sequence[int]) -> str:
        pieces = [self._piece(i) for i in ids if i not in self._skip]
        text: str = self._decode_spm.decode_pieces(pieces)
        return text.replace(SPIECE_UNDERLINE, " ").strip()

    def for_direction(self, source_lang: str, target_lang: str) -> MarianSentencePieceTokenizer:
        return self  # one direction per bundle

    def incremental_decoder(self) -> IncrementalDecoder:
        return OffsetDetokenizer(self.decode)

    def _piece(self, index: int) -> str:
        piece = self._vocabulary.piece(index)
        if piece is None:  # same fallback as transformers: ask SentencePiece itself
            piece = self._decode_spm.IdToPiece(index) or "<unk>"
        return piece


def _load_spm(path: Path) -> sentencepiece.SentencePieceProcessor:
    processor = sentencepiece.SentencePieceProcessor()
    processor.Load(str(path))
    return processor
