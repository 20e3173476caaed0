"""Incremental detokenization by prefix/read offsets (the technique text-generation-inference uses).

Subword tokenizers cannot decode one id at a time: a SentencePiece piece may be a single UTF-8 byte
of a Chinese character or an emoji, and the leading ``▁`` of a piece only becomes a space once a
word follows it. So we decode a small sliding *window* of ids twice — with and without the newest
ids — and emit only the difference, and only when it does not end in U+FFFD (which means a
character is still incomplete). Both decodes start at the same token, so whatever the tokenizer
does to the start of a text (stripping a leading space, say) cancels out.

Deliberate choice: the window restarts at the previously emitted token, so each step decodes two or
three tokens, not the whole output; per-token cost stays flat however long the translation grows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

REPLACEMENT = "\ufffd"


class OffsetDetokenizer:
    """Turns ids into final text deltas; ``decode`` per id, ``flush`` once at the end."""

    def __init__(self, decode: Callable[[Sequence[int]], str]) -> None:
        self._decode = decode
        self._ids: list[int] = []
        self._prefix_offset = 0  # window start: the first token of the last emitted delta's context
        self._read_offset = 0  # tokens before this are emitted

    def decode(self, token_id: int) -> str:
        """Add one id; return the text that became final (often "", never half a character)."""
        self._ids.append(token_id)
        prefix_text = self._decode(self._ids[self._prefix_offset : self._read_offset])
        new_text = self._decode(self._ids[self._prefix_offset :])
        if len(new_text) > len(prefix_text) and not new_text.endswith(REPLACEMENT):
            self._prefix_offset = self._read_offset
            self._read_offset = len(self._ids)
            return new_text[len(prefix_text) :]
        return ""

    def flush(self) -> str:
        """Return whatever was held back (e.g. bytes that never formed a character decode as U+FFFD,
        exactly as they do in the full decode)."""
        prefix_text = self._decode(self._ids[self._prefix_offset : self._read_offset])
        new_text = self._decode(self._ids[self._prefix_offset :])
        self._prefix_offset = self._read_offset = len(self._ids)
        return new_text[len(prefix_text) :] if len(new_text) > len(prefix_text) else ""
