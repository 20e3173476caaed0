"""M2M100 tokenization without transformers: NLLB's language handling, Marian's ``vocab.json``.

Mirrors transformers' ``M2M100Tokenizer`` (the parity tests compare the two) for
``facebook/m2m100_418M`` and its siblings:

* ids: SentencePiece splits the text into pieces and ``vocab.json`` maps them to model ids (its
  ids do not follow SentencePiece's; a piece it lacks becomes ``<unk>``). The language tokens
  ``__zh__``, ``__en__``, ... come after it: ``len(vocab.json)`` + the language's index in the
  tokenizer's language list; the manifest lists the ids of those liuyi uses.
* encode: ``__src__ pieces </s>``; as with NLLB the target's token is forced as the decoder's
  first (``generation.forced_first_tokens``), and :meth:`for_direction` picks the source's.
* decode: special ids and language tokens are skipped; an id ``vocab.json`` does not hold (the
  "made-up words" after the languages) becomes the text ``<unk>``, which transformers puts between
  the SentencePiece-decoded runs around it; the result is stripped.

Deliberate difference: a text containing ``__en__`` literally is encoded as text; transformers
(when the checkpoint lists the language tokens as special) would turn it into the language token.
liuyi's NLLB tokenizer does the same with ``eng_Latn``: client text never steers the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import sentencepiece

from .._errors import ManifestError
from .._manifest import SpecialTokens, TokenizerSpec
from ._nllb import NllbSentencePieceTokenizer, load_multilingual
from ._piece_vocab import PieceVocabulary, read_vocab


class M2M100SentencePieceTokenizer(NllbSentencePieceTokenizer):
    def __init__(
        self,
        *,
        spm: sentencepiece.SentencePieceProcessor,
        vocab: dict[str, int],
        tokens: SpecialTokens,
        language_codes: dict[str, int],
        special_ids: frozenset[int],
        source_lang: str | None = None,
    ) -> None:
        super().__init__(
            spm=spm,
            tokens=tokens,
            language_codes=language_codes,
            special_ids=special_ids,
            source_lang=source_lang,
        )
        self._vocabulary = PieceVocabulary(vocab, unk=self._unk)
        self._unk_text = self._vocabulary.piece(self._unk) or "<unk>"

    @classmethod
    def load(
        cls, bundle_dir: Path, spec: TokenizerSpec, tokens: SpecialTokens
    ) -> M2M100SentencePieceTokenizer:
        if "vocab" not in spec.files:
            raise ManifestError(bundle_dir, "tokenizer.files.vocab is missing", file="manifest.json")
        spm, codes, special = load_multilingual(bundle_dir, spec)
        vocab = read_vocab(bundle_dir, spec.files["vocab"])
        return cls(spm=spm, vocab=vocab, tokens=tokens, language_codes=codes, special_ids=special)

    def _text_ids(self, text: str) -> tuple[list[int], int]:
        return self._vocabulary.ids(self._spm.encode(text, out_type=str))

    def decode(self, ids: Sequence[int]) -> str:
        text = ""
        run: list[str] = []  # pieces since the last id vocab.json does not hold
        for index in ids:
            if index in self._skip:
                continue
            piece = self._vocabulary.piece(index)
            if piece is None:  # transformers' "<unk>" token string, never handed to SentencePiece
                text += self._spm.decode(run) + self._unk_text
                run = []
            else:
                run.append(piece)
        decoded: str = self._spm.decode(run)
        return (text + decoded).strip()
