"""One translation as an iterator of events: deltas as tokens arrive, then the result.

Everything that can reject the request (empty or over-long text, bad options) happens when the
stream is *created*, before any event, so a server can still answer with an HTTP error status.
Iterating runs the model: per segment, the encoder once, then one decoder step per token.

Cancellation is cooperative: ``cancel()`` (or the ``cancel`` event passed in) is checked before
every decoder step, so a stream stops within one step; closing the iterator stops it at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._batch import DecodeBatch
from ._errors import EmptyInputError, InputTooLongError
from ._greedy import DecodeOptions, GreedySequence, resolve_lengths
from ._segment import plan_segments
from ._types import Delta, Event, FinishReason, Result, SegmentDone, SourceSegment, Timings
from .tokenizers import Encoding

if TYPE_CHECKING:
    from ._bundle import Bundle


@dataclass(frozen=True, slots=True)
class PlannedSegment:
    """A source segment, tokenized, with its length limits resolved."""

    source: SourceSegment
    encoding: Encoding
    max_new_tokens: int
    min_new_tokens: int


def plan(bundle: Bundle, text: str, options: DecodeOptions) -> list[PlannedSegment]:
    """Validate ``text`` and split it into model-sized segments.

    Raises:
        EmptyInputError: nothing but whitespace.
        InputTooLongError: more characters than the bundle accepts.
        InvalidOptionError: bad ``options``.
    """
    if not isinstance(text, str) or not text.strip():
        raise EmptyInputError()
    if len(text) > bundle.max_input_chars:
        raise InputTooLongError(len(text), bundle.max_input_chars)
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


class TranslationStream:
    """Iterate to translate; see the module docstring. Single use."""

    def __init__(
        self,
        bundle: Bundle,
        text: str,
        *,
        options: DecodeOptions | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self._created = time.perf_counter()
        self._bundle = bundle
        self._options = options or DecodeOptions()
        self._cancel = cancel or threading.Event()
        self.segments = plan(bundle, text, self._options)
        self.timings = Timings(tokenize_ms=_ms_since(self._created))
        self.steps = 0  # decoder steps run so far (tests use it to see that cancellation stopped work)
        self._events: Generator[Event, None, None] = self._run()

    @property
    def source_segments(self) -> list[SourceSegment]:
        return [planned.source for planned in self.segments]

    @property
    def input_tokens(self) -> int:
        return sum(len(planned.encoding.ids) for planned in self.segments)

    def cancel(self) -> None:
        """Stop before the next decoder step (thread-safe)."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        return next(self._events)

    def close(self) -> None:
        """Stop now; no further steps run."""
        self._cancel.set()
        self._events.close()

    def _run(self) -> Generator[Event, None, None]:
        bundle, timings = self._bundle, self.timings
        manifest = bundle.manifest
        pieces: list[str] = []
        done: list[SegmentDone] = []
        finish: FinishReason = "stop"
        output_tokens = 0
        for planned in self.segments:
            source = planned.source
            if source.separator and source.index > 0:
                pieces.append(source.separator)
                yield Delta(text=source.separator, token_id=None, index=-1, segment=source.index)
            started = time.perf_counter()
            encoded = bundle.graphs.encode(planned.encoding.ids)
            timings.encode_ms += _ms_since(started)
            sequence = GreedySequence(
                decoder_start=manifest.tokens.decoder_start,
                eos=manifest.tokens.eos,
                max_new_tokens=planned.max_new_tokens,
                min_new_tokens=planned.min_new_tokens,
                forced_eos_at_limit=manifest.generation.forced_eos_at_limit,
                no_repeat_ngram_size=self._options.no_repeat_ngram_size,
            )
            batch = DecodeBatch(bundle.graphs)
            batch.add(encoded, sequence)
            detokenizer = bundle.tokenizer.incremental_decoder()
            segment_text: list[str] = []
            while not sequence.finished:
                if self._cancel.is_set():
                    sequence.cancel()
                    break
                started = time.perf_counter()
                ((_, token),) = batch.step()
                self.steps += 1
                timings.decode_ms += _ms_since(started)
                if self.steps == 1:
                    timings.first_token_ms = _ms_since(self._created)
                if token == manifest.tokens.eos:
                    break
                started = time.perf_counter()
                text = detokenizer.decode(token)
                timings.detokenize_ms += _ms_since(started)
                if text:
                    segment_text.append(text)
                    yield Delta(
                        text=text, token_id=token, index=len(sequence.tokens) - 1, segment=source.index
                    )
            tail = detokenizer.flush()
            if tail:
                segment_text.append(tail)
                yield Delta(text=tail, token_id=None, index=len(sequence.tokens) - 1, segment=source.index)
            reason = sequence.finish_reason or "cancelled"
            output_tokens += len(sequence.tokens)
            translation = "".join(segment_text)
            pieces.append(translation)
            segment_done = SegmentDone(
                index=source.index,
                start=source.start,
                end=source.end,
                translation=translation,
                input_tokens=len(planned.encoding.ids),
                output_tokens=len(sequence.tokens),
                finish_reason=reason,
                token_ids=tuple(sequence.tokens),
            )
            done.append(segment_done)
            yield segment_done
            if reason == "cancelled":
                finish = "cancelled"
                break
            if reason == "length":
                finish = "length"
        timings.total_ms = _ms_since(self._created)
        yield Result(
            translation="".join(pieces),
            segments=tuple(done),
            input_tokens=self.input_tokens,
            output_tokens=output_tokens,
            unknown_source_chars=sum(planned.encoding.unknown_chars for planned in self.segments),
            finish_reason=finish,
            timings=timings,
        )


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0
