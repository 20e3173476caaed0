"""NLLB-200 tokenization without transformers: SentencePiece BPE with fairseq's id layout.

Mirrors transformers' ``NllbTokenizer`` (the parity tests compare the two):

* ids: fairseq reserves ``<s>`` = 0, ``<pad>`` = 1, ``</s>`` = 2, ``<unk>`` = 3 and shifts every
  SentencePiece id by one (``fairseq_offset``); SentencePiece's own ``<unk>`` (0) becomes 3. The
  language codes (``zho_Hans``, ``eng_Latn``, ...) come after the pieces; the manifest lists the
  ids of those liuyi uses.
* encode: ``[source language code] pieces </s>``; the *target* language code is not part of the
  source — the decoder is forced to start with it (``generation.forced_first_tokens``).
* decode: special ids and language codes are skipped, SentencePiece joins the rest.

One bundle serves both directions, so the tokenizer is made per source language:
:meth:`for_direction` returns a tokenizer sharing the SentencePiece model.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import sentencepiece

from .._errors import ManifestError
from .._manifest import SpecialTokens, TokenizerSpec
from ._base import Encoding, IncrementalDecoder
from ._offsets import OffsetDetokenizer
from ._piece_vocab import unknown_chars

FAIRSEQ_OFFSET = 1


class NllbSentencePieceTokenizer:
    def __init__(
        self,
        *,
        spm: sentencepiece.SentencePieceProcessor,
        tokens: SpecialTokens,
        language_codes: dict[str, int],
        special_ids: frozenset[int],
        source_lang: str | None = None,
    ) -> None:
        if tokens.unk is None:
            raise ValueError(f"{type(self).__name__} needs an unk token")
        self._spm = spm
        self._eos = tokens.eos
        self._unk = tokens.unk
        self._pieces = spm.get_piece_size()
        self._language_codes = language_codes
        self._skip = special_ids | set(language_codes.values())
        self._source_lang = source_lang

    @classmethod
    def load(cls, bundle_dir: Path, spec: TokenizerSpec, tokens: SpecialTokens) -> NllbSentencePieceTokenizer:
        spm, codes, special = load_multilingual(bundle_dir, spec)
        return cls(spm=spm, tokens=tokens, language_codes=codes, special_ids=special)

    def for_direction(self, source_lang: str, target_lang: str) -> Self:
        """This tokenizer encoding ``source_lang`` text (the target language does not change encoding)."""
        if source_lang not in self._language_codes:
            raise ValueError(f"no language code for {source_lang!r}")
        clone = copy.copy(self)  # shares the SentencePiece model
        clone._source_lang = source_lang
        return clone

    def encode(self, text: str) -> Encoding:
        if self._source_lang is None:
            raise ValueError("call for_direction() first: NLLB encodes the source language's code")
        ids, unknown = self._text_ids(text)
        return Encoding(ids=[self._language_codes[self._source_lang], *ids, self._eos], unknown_chars=unknown)

    def _text_ids(self, text: str) -> tuple[list[int], int]:
        """The text's ids without language code and eos, and how many characters became ``<unk>``."""
        ids: list[int] = []
        unknown = 0
        for piece in self._spm.encode(text, out_type=str):
            piece_id = self._spm.piece_to_id(piece)
            if piece_id == self._spm.unk_id():
                ids.append(self._unk)
                unknown += unknown_chars(piece)
            else:
                ids.append(piece_id + FAIRSEQ_OFFSET)
        return ids, unknown

    def decode(self, ids: Sequence[int]) -> str:
        pieces = [
            i - FAIRSEQ_OFFSET for i in ids if i not in self._skip and 0 < i - FAIRSEQ_OFFSET < self._pieces
        ]
        text: str = self._spm.decode(pieces)
        return text

    def incremental_decoder(self) -> IncrementalDecoder:
        return OffsetDetokenizer(self.decode)


def load_multilingual(
    bundle_dir: Path, spec: TokenizerSpec
) -> tuple[sentencepiece.SentencePieceProcessor, dict[str, int], frozenset[int]]:
    """What every multilingual SentencePiece bundle declares: the model (``files.spm``), each
    language's code token (``options.language_codes``) and the ids decoding skips (``special_ids``).

    Raises:
        ManifestError: a role or option is missing or has the wrong shape.
    """
    if "spm" not in spec.files:
        raise ManifestError(bundle_dir, "tokenizer.files.spm is missing", file="manifest.json")
    codes = spec.options.get("language_codes")
    special = spec.options.get("special_ids", [])
    if not isinstance(codes, dict) or not all(isinstance(v, int) for v in codes.values()):
        raise ManifestError(
            bundle_dir, "tokenizer.options.language_codes must map languages to ids", file="manifest.json"
        )
    if not isinstance(special, list) or not all(isinstance(v, int) for v in special):
        raise ManifestError(bundle_dir, "tokenizer.options.special_ids must list ids", file="manifest.json")
    processor = sentencepiece.SentencePieceProcessor()
    processor.Load(str(bundle_dir / spec.files["spm"]))
    return processor, dict(codes), frozenset(special)
