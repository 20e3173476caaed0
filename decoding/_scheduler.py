"""Continuous batching: one thread steps every active translation of a bundle together.

    submit() ──► pending (FIFO, bounded) ──► admitted at a step boundary: encoder pass, joins the batch
                                                   │
                       ┌───────────────────────────┘
                       ▼   (first_step_alone: the newcomers' first step runs on their rows only)
               advance_batch(batch) ── one decoder call ──► each row's Translation picks its token ──► events
                       │                                                              │
                       └── finished rows leave; a translation with more segments       └─► emit(event)
                           re-joins with its next one at once; cancelled rows are dropped

``emit`` is called on the scheduler thread for every event, in order, and must not block (the
server hands events to its event loop with ``call_soon_threadsafe``). A decoder failure ends every
translation in the batch with the exception passed to ``emit`` instead of an event.

Why a newcomer's first step runs alone (``first_step_alone``): its first token would otherwise wait
for a full batch step after its encoder call; a step of only the joining rows costs a fraction of
that (a small step is memory-bound), so time to first token under load stays near the idle one.
Rows are independent, so the tokens are the same either way.

Why a single thread per bundle: ONNX Runtime parallelises inside a call; two threads stepping two
half-batches would only fight for the same two cores and double the per-call overhead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ._batch import DecodeBatch, advance_batch
from ._bundle import Bundle
from ._errors import DecodingError, EngineBusyError, InferenceError
from ._job import Translation
from ._types import Event

Emit = Callable[[Event | DecodingError], None]
logger = logging.getLogger("liuyi.scheduler")


@dataclass(eq=False)
class _Entry:
    translation: Translation
    sink: Emit
    submitted: float

    def emit(self, item: Event | DecodingError) -> None:
        """Hand over one event; a consumer that fails loses its translation, never the scheduler."""
        try:
            self.sink(item)
        except Exception:
            logger.exception("event consumer failed; cancelling its translation")
            self.translation.cancel()


class BatchScheduler:
    """Steps up to ``max_batch_size`` translations per decoder call; up to ``max_queue`` wait.
    ``first_step_alone``: newcomers take their first step on their own rows, right after joining."""

    def __init__(
        self, bundle: Bundle, *, max_batch_size: int = 16, max_queue: int = 64, first_step_alone: bool = True
    ) -> None:
        if max_batch_size < 1 or max_queue < 0:
            raise ValueError("max_batch_size must be >= 1 and max_queue >= 0")
        self.bundle = bundle
        self.max_batch_size = max_batch_size
        self.max_queue = max_queue
        self.first_step_alone = first_step_alone
        self._batch = DecodeBatch(bundle.graphs)
        self._pending: deque[_Entry] = deque()
        self._lock = threading.Condition()
        self._closed = False
        self._joining = 0  # admitted, encoder running, not in the batch yet
        self._thread = threading.Thread(target=self._run, name=f"liuyi-scheduler-{bundle.name}", daemon=True)
        self._thread.start()

    @property
    def active(self) -> int:
        """Translations in the batch (or joining it)."""
        return len(self._batch.rows) + self._joining

    @property
    def queued(self) -> int:
        """Translations waiting for a place in the batch."""
        return len(self._pending)

    def submit(self, translation: Translation, emit: Emit) -> None:
        """Queue a translation; its events go to ``emit`` (on the scheduler thread).

        Raises:
            EngineBusyError: the queue is full (the batch is full too).
        """
        with self._lock:
            if self._closed:
                raise EngineBusyError("the scheduler is shutting down")
            if len(self._pending) + self.active >= self.max_batch_size + self.max_queue:
                raise EngineBusyError(
                    f"{self.active} translations running and {len(self._pending)} queued; try again shortly"
                )
            self._pending.append(_Entry(translation=translation, sink=emit, submitted=time.perf_counter()))
            self._lock.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is running or queued (graceful shutdown, tests). False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: not self.active and not self._pending, timeout)

    def close(self, timeout: float | None = 5.0) -> None:
        """Cancel everything, stop the thread."""
        with self._lock:
            self._closed = True
            for entry in self._pending:
                entry.translation.cancel()
            for row in self._batch.rows:
                row.tag.translation.cancel()
            self._lock.notify_all()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            try:
                if not self._run_once():
                    return
            except Exception:  # a bug must not kill the thread every translation depends on
                logger.exception("scheduler step failed; ending the translations in the batch")
                self._fail_batch(InferenceError("internal error while decoding"))

    def _run_once(self) -> bool:
        """Admit, drop cancelled, step once. False when closed and drained."""
        with self._lock:
            while not self._pending and not self._batch.rows and not self._closed:
                self._lock.wait()
            if self._closed and not self._pending and not self._batch.rows:
                return False
            admitted: list[_Entry] = []
            while self._pending and len(self._batch.rows) + len(admitted) < self.max_batch_size:
                admitted.append(self._pending.popleft())
            self._joining = len(admitted)
        now = time.perf_counter()
        for entry in admitted:
            entry.translation.timings.queue_ms = (now - entry.submitted) * 1000
        self._join(admitted)
        with self._lock:
            self._joining = 0
        self._drop_cancelled()
        if self._batch.rows:
            self._step()
        with self._lock:
            if not self.active and not self._pending:
                self._lock.notify_all()  # wake wait_idle()
        return True

    def _fail_batch(self, exc: DecodingError) -> None:
        rows, self._batch = self._batch.rows, DecodeBatch(self.bundle.graphs)
        for row in rows:
            row.tag.translation.cancel()
            row.tag.emit(exc)

    def _join(self, entries: list[_Entry]) -> None:
        """Open each entry's next segment and add it to the batch (one encoder call for all of them),
        or finish translations that have no segment left."""
        opening = []
        for entry in entries:
            translation = entry.translation
            opened = translation.open_segment()
            if opened is None:
                assert translation.result is not None
                entry.emit(translation.result)
                continue
            planned, events = opened
            for event in events:
                entry.emit(event)
            opening.append((entry, planned))
        if not opening:
            return
        started = time.perf_counter()
        try:
            encoded = self.bundle.graphs.encode_many([planned.encoding.ids for _, planned in opening])
        except DecodingError as exc:
            for entry, _ in opening:
                entry.translation.cancel()
                entry.emit(exc)
            return
        share = (time.perf_counter() - started) * 1000 / len(opening)
        for (entry, planned), source in zip(opening, encoded, strict=True):
            entry.translation.record_encode(share)
            self._batch.add(source, max_new_tokens=planned.max_new_tokens, owner=entry.translation, tag=entry)
        if self.first_step_alone and len(self._batch.rows) > len(opening):
            self._step(newest=len(opening))  # the rows just added are the last ones

    def _drop_cancelled(self) -> None:
        cancelled = [row for row in self._batch.rows if row.tag.translation.cancelled]
        if not cancelled:
            return
        self._batch.remove(cancelled)
        for row in cancelled:
            self._close_segment(row.tag)
        self._join([row.tag for row in cancelled])  # a cancelled translation opens nothing: it finishes

    def _close_segment(self, entry: _Entry) -> None:
        """Report a finished (or cancelled) segment; the caller re-joins the entry for what follows."""
        for event in entry.translation.close_segment():
            entry.emit(event)

    def _step(self, newest: int | None = None) -> None:
        """Step the batch (or only its ``newest`` rows) and emit what the stepped rows produced."""
        try:
            stepped = advance_batch(self._batch, newest=newest)
        except InferenceError as exc:
            self._fail_batch(exc)
            return
        rejoining: list[_Entry] = []
        for row, ended in stepped:
            entry: _Entry = row.tag
            for event in entry.translation.take_events():
                entry.emit(event)
            if ended:
                rejoining.append(entry)
        self._join(rejoining)  # next segments share one encoder call; finished translations report
