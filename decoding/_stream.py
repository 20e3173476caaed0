"""A translation as a plain iterator, decoded on the caller's thread (a batch of one).

This is the simplest driver of :class:`decoding._job.Translation`: per segment, run the encoder
once, then one decoder step per token, yielding events as text becomes final. The server uses
:class:`decoding.BatchScheduler` instead, which steps many translations in one call; both produce
the same events.

Cancellation is cooperative: ``cancel()`` (or the ``cancel`` event passed in) is checked before
every decoder step, so a stream stops within one step; ``close()`` stops it at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

from ._batch import DecodeBatch, advance_batch
from ._greedy import DecodeOptions
from ._job import PlannedSegment, Translation
from ._types import Event, SourceSegment, Timings

if TYPE_CHECKING:
    from ._bundle import Bundle


class TranslationStream:
    """Iterate to translate: ``Delta``/``SegmentDone`` events, then one ``Result``. Single use."""

    def __init__(
        self,
        bundle: Bundle,
        text: str,
        *,
        options: DecodeOptions | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.translation = Translation(bundle, text, options=options, cancel=cancel)
        self._graphs = bundle.graphs
        self._events: Generator[Event, None, None] = self._run()

    @property
    def segments(self) -> list[PlannedSegment]:
        return self.translation.segments

    @property
    def source_segments(self) -> list[SourceSegment]:
        return self.translation.source_segments

    @property
    def timings(self) -> Timings:
        return self.translation.timings

    @property
    def steps(self) -> int:
        """Decoder steps run so far."""
        return self.translation.steps

    @property
    def cancelled(self) -> bool:
        return self.translation.cancelled

    def cancel(self) -> None:
        """Stop before the next decoder step (thread-safe)."""
        self.translation.cancel()

    def close(self) -> None:
        """Stop now; no further steps run."""
        self.translation.cancel()
        self._events.close()

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        return next(self._events)

    def _run(self) -> Generator[Event, None, None]:
        job, graphs = self.translation, self._graphs
        while (opened := job.open_segment()) is not None:
            planned, events = opened
            yield from events
            started = time.perf_counter()
            encoded = graphs.encode(planned.encoding.ids)
            job.record_encode((time.perf_counter() - started) * 1000)
            batch = DecodeBatch(graphs)
            batch.add(encoded, max_new_tokens=planned.max_new_tokens, owner=job)
            while batch.rows and not job.cancelled:
                advance_batch(batch)  # the same step function as the scheduler's, with a batch of one
                yield from job.take_events()
            if batch.rows:  # cancelled mid-segment
                yield from job.close_segment()
        assert job.result is not None
        yield job.result
