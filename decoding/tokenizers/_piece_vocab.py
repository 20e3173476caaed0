"""A checkpoint's ``vocab.json``: SentencePiece pieces -> model ids, and back.

transformers' Marian and M2M100 tokenizers both let SentencePiece split the text into pieces and
then look each piece up in ``vocab.json``, whose ids do not follow SentencePiece's own: a piece
missing from it becomes ``<unk>``. Decoding maps ids back to pieces for SentencePiece to join.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from .._errors import ManifestError

SPIECE_UNDERLINE = "▁"


def unknown_chars(piece: str) -> int:
    """How many characters of the text a piece that became ``<unk>`` stood for."""
    return len(piece.replace(SPIECE_UNDERLINE, ""))


def read_vocab(bundle_dir: Path, name: str) -> dict[str, int]:
    """A bundle's ``vocab.json``-style file.

    Raises:
        ManifestError: not JSON, or not an object of piece -> integer id.
    """
    try:
        vocab = json.loads((bundle_dir / name).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(bundle_dir, f"not valid JSON ({exc})", file=name) from None
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise ManifestError(bundle_dir, "must map pieces to integer ids", file=name)
    return vocab


class PieceVocabulary:
    """Pieces -> ids for encoding (``vocab``), ids -> pieces for decoding (``target_vocab`` when the
    target side has its own vocabulary, else ``vocab``)."""

    def __init__(self, vocab: Mapping[str, int], *, unk: int, target_vocab: Mapping[str, int] | None = None):
        self._ids = vocab
        self._unk = unk
        self._pieces = {index: piece for piece, index in (target_vocab or vocab).items()}

    def get(self, piece: str) -> int | None:
        return self._ids.get(piece)

    def ids(self, pieces: Iterable[str]) -> tuple[list[int], int]:
        """The ids of ``pieces`` (``<unk>`` for a piece not in the vocabulary), and how many
        characters of the text became ``<unk>``."""
        ids: list[int] = []
        unknown = 0
        for piece in pieces:
            index = self._ids.get(piece)
            if index is None:
                index = self._unk
                unknown += unknown_chars(piece)
            ids.append(index)
        return ids, unknown

    def piece(self, index: int) -> str | None:
        """The piece of a target id; None for an id the vocabulary does not hold."""
        return self._pieces.get(index)
