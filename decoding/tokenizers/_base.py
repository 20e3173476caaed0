"""The tokenizer contract every bundle's tokenizer fulfils."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Encoding:
    """A source text turned into model input."""

    ids: list[int]  # encoder input ids, eos (and any language prefix) included
    unknown_chars: int  # characters of the text the vocabulary cannot represent (dropped or <unk>)


class IncrementalDecoder(Protocol):
    """Turns target ids into text one id at a time.

    ``"".join(decode(i) for i in ids) + flush() == tokenizer.decode(ids)`` exactly, and ``decode``
    never returns half a character (text is held back until it is whole).
    """

    def decode(self, token_id: int) -> str: ...

    def flush(self) -> str: ...


class Tokenizer(Protocol):
    def encode(self, text: str) -> Encoding:
        """Source text -> encoder ids (eos appended)."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Target ids -> text, special tokens skipped (the reference for incremental decoding)."""
        ...

    def incremental_decoder(self) -> IncrementalDecoder:
        """A fresh decoder for one target sequence."""
        ...

    def for_direction(self, source_lang: str, target_lang: str) -> Tokenizer:
        """The tokenizer for one direction of a multilingual bundle (itself when nothing changes)."""
        ...
