"""One translation request as a state machine driven by generated tokens.

The *driver* owns the model calls: :class:`decoding.TranslationStream` steps a batch of one on the
caller's thread; :class:`decoding.BatchScheduler` steps many translations together on its own
thread. Both feed tokens to a :class:`Translation`, which turns them into the same events:

    per segment:  [layout Delta]  Delta*  SegmentDone          then one Result

Everything that can reject the request (empty or over-long text, bad options) happens in the
constructor, before any event, so a server can still answer with an HTTP error status.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ._errors import EmptyInputError, InputTooLongError
from ._greedy import DecodeOptions, GreedySequence, positive_int, resolve_lengths
from ._segment import plan_segments
from ._types import Delta, Event, FinishReason, Result, SegmentDone, SourceSegment, Timings
from .tokenizers import Encoding, IncrementalDecoder

if TYPE_CHECKING:
    from ._manifest import Manifest
    from .tokenizers import Tokenizer


class Model(Protocol):
    """What a translation reads of its bundle (``decoding.Bundle`` is one). A protocol, so this
    module does not import the bundle module, which imports the drivers that import this one."""

    @property
    def manifest(self) -> Manifest: ...

    @property
    def tokenizer(self) -> Tokenizer: ...

    @property
    def max_input_chars(self) -> int: ...


@dataclass(frozen=True, slots=True)
class PlannedSegment:
    """A source segment, tokenized, with its length limits resolved."""

    source: SourceSegment
    encoding: Encoding
    max_new_tokens: int
    min_new_tokens: int


def nonblank(text: object, field: str = "text") -> str:
    """``text`` if it is a string with a visible character: the one blank check of liuyi.

    Raises:
        EmptyInputError: nothing but whitespace (``field`` names the text in the error).
    """
    if not isinstance(text, str) or not text.strip():
        raise EmptyInputError(field)
    return text


def check_input(bundle: Model, text: str, options: DecodeOptions) -> None:
    """The checks of a request that need no tokenizer, so that a caller can make them before it
    answers from a cache: the same request is refused, cached or not.

    Raises:
        EmptyInputError: nothing but whitespace.
        InputTooLongError: more characters than the bundle (or ``options.max_input_chars``) accepts.
        InvalidOptionError: ``max_new_tokens`` is not a positive integer.
    """
    nonblank(text)
    limit = min(bundle.max_input_chars, options.max_input_chars or bundle.max_input_chars)
    if len(text) > limit:
        raise InputTooLongError(len(text), limit)
    if options.max_new_tokens is not None:
        positive_int("max_new_tokens", options.max_new_tokens)


def plan(bundle: Model, text: str, options: DecodeOptions) -> list[PlannedSegment]:
    """Validate ``text`` and split it into model-sized segments.

    Raises:
        EmptyInputError, InputTooLongError: see :func:`check_input`.
        InvalidOptionError: bad ``options``.
    """
    check_input(bundle, text, options)
    encodings: dict[str, Encoding] = {}

    def encode(piece: str) -> Encoding:
        if piece not in encodings:
            encodings[piece] = bundle.tokenizer.encode(piece)
        return encodings[piece]

    limit = bundle.manifest.limits.max_source_tokens
    try:
        segments = plan_segments(
            text, target_lang=bundle.manifest.target_lang, fits=lambda piece: len(encode(piece).ids) <= limit
        )
    except ValueError:  # one character alone tokenizes to more than the model's positions
        raise InputTooLongError(len(text), limit, unit="tokens in a single character") from None
    planned = []
    for segment in segments:
        encoding = encode(segment.text)
        max_new, min_new = resolve_lengths(options, len(encoding.ids), bundle.manifest)
        planned.append(
            PlannedSegment(source=segment, encoding=encoding, max_new_tokens=max_new, min_new_tokens=min_new)
        )
    return planned


class Translation:
    """The events of one translation, produced as its driver reports tokens."""

    def __init__(
        self,
        bundle: Model,
        text: str,
        *,
        options: DecodeOptions | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.created = time.perf_counter()
        self.bundle = bundle
        self.options = options or DecodeOptions()
        self.cancel_event = cancel or threading.Event()
        self.segments = plan(bundle, text, self.options)
        self.timings = Timings(tokenize_ms=_ms_since(self.created))
        self.steps = 0  # decoder steps run for this translation (tests check cancellation with it)
        self.result: Result | None = None
        self._next = 0  # index of the next segment to open
        self._pieces: list[str] = []  # the translation so far, layout included
        self._done: list[SegmentDone] = []
        self._finish: FinishReason = "stop"
        # the open segment
        self._sequence: GreedySequence | None = None
        self._detokenizer: IncrementalDecoder | None = None
        self._segment_text: list[str] = []
        self._outbox: list[Event] = []  # events of advance() not yet taken by the driver

    @property
    def source_segments(self) -> list[SourceSegment]:
        return [planned.source for planned in self.segments]

    @property
    def input_tokens(self) -> int:
        return sum(len(planned.encoding.ids) for planned in self.segments)

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def cancel(self) -> None:
        """Ask the driver to stop before its next decoder step (thread-safe)."""
        self.cancel_event.set()

    @property
    def finished(self) -> bool:
        return self.result is not None

    def open_segment(self) -> tuple[PlannedSegment, list[Event]] | None:
        """Start the next segment: the driver encodes ``planned.encoding.ids`` and adds this
        translation to a batch as the row's owner. None when there is nothing left (then
        :attr:`result` is set)."""
        if self.result is not None:
            return None
        if self._next >= len(self.segments) or self.cancelled:
            self._finish_translation()
            return None
        planned = self.segments[self._next]
        self._next += 1
        manifest = self.bundle.manifest
        self._sequence = GreedySequence(
            decoder_start=manifest.tokens.decoder_start,
            eos=manifest.tokens.eos,
            max_new_tokens=planned.max_new_tokens,
            min_new_tokens=planned.min_new_tokens,
            forced_eos_at_limit=manifest.generation.forced_eos_at_limit,
            no_repeat_ngram_size=self.options.no_repeat_ngram_size,
            forced_first=manifest.generation.forced_first_tokens.get(manifest.target_lang),
        )
        self._detokenizer = self.bundle.tokenizer.incremental_decoder()
        self._segment_text = []
        source = planned.source
        events: list[Event] = []
        if source.separator and source.index > 0:
            self._pieces.append(source.separator)
            events.append(Delta(text=source.separator, token_id=None, index=-1, segment=source.index))
        return planned, events

    def record_encode(self, milliseconds: float) -> None:
        self.timings.encode_ms += milliseconds

    @property
    def needs_logits(self) -> bool:
        return self._sequence is not None and self._sequence.needs_logits

    def advance(self, top_ids: np.ndarray, logits: np.ndarray | None, step_ms: float) -> int | None:
        """The open segment's row took a decoder step (``decoding._batch.Stepper``): choose the token,
        turn it into text, and close the segment when its sequence ended. The events wait in
        :meth:`take_events`.

        Returns:
            The next input token, or None when the segment ended (its row leaves the batch).
        """
        sequence, detokenizer = self._sequence, self._detokenizer
        assert sequence is not None and detokenizer is not None
        token = sequence.choose(top_ids, logits)
        self.steps += 1
        self.timings.decode_ms += step_ms
        if self.steps == 1:
            self.timings.first_token_ms = _ms_since(self.created)
        if not (sequence.finished and token == self.bundle.manifest.tokens.eos):  # eos is never text
            started = time.perf_counter()
            text = detokenizer.decode(token)
            self.timings.detokenize_ms += _ms_since(started)
            if text:
                self._segment_text.append(text)
                segment = self.segments[self._next - 1].source.index
                self._outbox.append(
                    Delta(text=text, token_id=token, index=len(sequence.tokens) - 1, segment=segment)
                )
        if sequence.finished:
            self._outbox.extend(self.close_segment())
            return None
        return token

    def take_events(self) -> list[Event]:
        """What the last steps produced, in order (the driver hands them on)."""
        events, self._outbox = self._outbox, []
        return events

    def close_segment(self) -> list[Event]:
        """The open segment's sequence finished (or was cancelled): flush and report it."""
        assert self._sequence is not None and self._detokenizer is not None
        sequence, planned = self._sequence, self.segments[self._next - 1]
        if not sequence.finished:
            sequence.cancel()
        events: list[Event] = []
        tail = self._detokenizer.flush()
        if tail:
            self._segment_text.append(tail)
            events.append(
                Delta(text=tail, token_id=None, index=len(sequence.tokens) - 1, segment=planned.source.index)
            )
        reason = sequence.finish_reason or "cancelled"
        translation = "".join(self._segment_text)
        self._pieces.append(translation)
        done = SegmentDone(
            index=planned.source.index,
            start=planned.source.start,
            end=planned.source.end,
            translation=translation,
            input_tokens=len(planned.encoding.ids),
            output_tokens=len(sequence.tokens),
            finish_reason=reason,
            token_ids=tuple(sequence.tokens),
        )
        self._done.append(done)
        events.append(done)
        if reason == "cancelled":
            self._finish = "cancelled"
        elif reason == "length" and self._finish == "stop":
            self._finish = "length"
        self._sequence = self._detokenizer = None
        return events

    def _finish_translation(self) -> None:
        if self.cancelled and len(self._done) < len(self.segments):
            self._finish = "cancelled"
        self.timings.total_ms = _ms_since(self.created)
        self.result = Result(
            translation="".join(self._pieces),
            segments=tuple(self._done),
            input_tokens=self.input_tokens,
            output_tokens=sum(done.output_tokens for done in self._done),
            unknown_source_chars=sum(planned.encoding.unknown_chars for planned in self.segments),
            finish_reason=self._finish,
            timings=self.timings,
        )


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0
