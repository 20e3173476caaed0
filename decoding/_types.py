"""What a translation stream yields: deltas, segment ends, and one final result.

A stream yields, in order::

    Delta*  (per segment:  Delta* SegmentDone)  ...  Result

``"".join(delta.text for every Delta) == result.translation`` always holds, including the layout
text between sentences (deltas with ``token_id is None``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

FinishReason = Literal["stop", "length", "cancelled"]


@dataclass(frozen=True, slots=True)
class SourceSegment:
    """One piece of the input sent to the model on its own (a sentence, or part of a long one)."""

    index: int
    start: int  # character span [start, end) in the original input
    end: int
    text: str  # the source text of the span
    separator: str  # layout text emitted before this segment's translation ("", " ", "\n", "\n\n", ...)


@dataclass(frozen=True, slots=True)
class Delta:
    """Text that is final: it will never change, and never holds half a character."""

    text: str
    token_id: int | None  # None for layout text between segments
    index: int  # index of the token inside its segment (-1 for layout text)
    segment: int


@dataclass(frozen=True, slots=True)
class SegmentDone:
    """A segment has finished decoding."""

    index: int
    start: int
    end: int
    translation: str  # this segment's translation (no layout text)
    input_tokens: int
    output_tokens: int  # tokens generated, eos included
    finish_reason: FinishReason
    token_ids: tuple[int, ...] = ()  # the generated ids, eos included (for parity checks and debugging)


@dataclass(slots=True)
class Timings:
    """Wall-clock milliseconds per stage, summed over segments."""

    queue_ms: float = 0.0  # waiting for a place in the batch (scheduler only)
    tokenize_ms: float = 0.0
    encode_ms: float = 0.0
    first_token_ms: float = 0.0  # from the request's creation to its first generated token
    decode_ms: float = 0.0  # decoder steps
    detokenize_ms: float = 0.0
    total_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class Result:
    """The end of a stream: the whole translation and what it cost."""

    translation: str
    segments: tuple[SegmentDone, ...]
    input_tokens: int
    output_tokens: int
    unknown_source_chars: int  # input characters the model's vocabulary cannot represent
    finish_reason: FinishReason
    timings: Timings = field(default_factory=Timings)


Event = Delta | SegmentDone | Result
