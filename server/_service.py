"""From a translate request to an async stream of wire events. Decoding runs on a scheduler thread;
of the translation work, only planning texts up to 1,000 characters (about 1.3 ms at most, see
:func:`_plan`) runs on the event loop.

    prepare()  ── resolve model ── cache lookup ── plan/tokenize ── scheduler.submit()   (may raise ApiError:
       │                                                                                 the route answers
       ▼                                                                                 with a status)
    PreparedStream.events()  ◄── asyncio.Queue ◄── call_soon_threadsafe ◄── scheduler thread (decoder steps)
       start, delta…, segment…, done | error      (pings while idle; timeout and shutdown become `error`)

The scheduler thread never waits for the event loop and the loop never waits on a thread: events
cross over through ``call_soon_threadsafe``. When the consumer goes away (client disconnect, timeout,
shutdown) the ``finally`` of :meth:`LiveStream.events` cancels the translation, which leaves the batch
before the next decoder step.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from decoding import (
    BatchScheduler,
    Bundle,
    DecodeOptions,
    DecodingError,
    Delta,
    ModelRegistry,
    Result,
    SegmentDone,
    Translation,
    check_input,
)

from ._cache import CachedTranslation, TranslationCache, cache_key
from ._error_codes import ErrorCode
from ._errors import ApiError, InternalError, Overloaded, RequestTimeout, to_api_error
from ._events import (
    PING,
    WireEvent,
    delta_event,
    done_event,
    error_event,
    segment_event,
    segment_spans,
    start_event,
)
from ._metrics import Metrics
from ._settings import Settings

logger = logging.getLogger("liuyi.service")
_DRAIN = object()  # queue sentinel: shutdown began, recompute deadlines


@dataclass(frozen=True, kw_only=True)
class TranslateRequest:
    text: str
    source: str = "auto"
    target: str | None = None
    max_new_tokens: int | None = None
    # What the client's API calls the engine's fields, when not the same (see _errors.to_api_error)
    names: Mapping[str, str] = field(default_factory=dict)


class Lifecycle:
    """Readiness and graceful shutdown, shared by every stream of one app."""

    def __init__(self) -> None:
        self.ready = False
        self.drain_deadline: float | None = None  # loop time when remaining streams get cut off
        self._streams: set[asyncio.Queue[Any]] = set()

    @property
    def draining(self) -> bool:
        return self.drain_deadline is not None

    def begin_drain(self, grace: float) -> None:
        """Stop admitting; running streams may finish within ``grace`` seconds (call on the loop)."""
        if self.drain_deadline is None:
            self.drain_deadline = asyncio.get_running_loop().time() + grace
            self.ready = False
            for queue in self._streams:
                queue.put_nowait(_DRAIN)

    def register(self, queue: asyncio.Queue[Any]) -> None:
        self._streams.add(queue)

    def unregister(self, queue: asyncio.Queue[Any]) -> None:
        self._streams.discard(queue)


@dataclass(kw_only=True)
class PreparedStream:
    """A request that passed every check; iterate :meth:`events` to run it."""

    request_id: str
    bundle: Bundle
    source: str
    target: str
    arrived: float  # perf_counter at arrival
    cached: bool
    error: ApiError | None = field(default=None)  # set when the stream ends with an error event
    # what the request's access-log line reports (model, cached, finish_reason, tokens, timings, error)
    log: dict[str, Any] = field(default_factory=dict)

    def _log_done(self, done: WireEvent) -> None:
        self.log.update(
            model=self.bundle.name,
            cached=done["cached"],
            finish_reason=done["finish_reason"],
            output_tokens=done["usage"]["output_tokens"],
            timings=done["timings"],
        )

    async def events(self) -> AsyncGenerator[WireEvent, None]:
        raise NotImplementedError  # pragma: no cover
        yield {}

    def cancel(self) -> None:
        """Stop the work behind this stream (idempotent)."""

    async def collect(self) -> tuple[WireEvent, list[WireEvent]]:
        """Run to the end (non-streaming endpoints): the ``done`` event and the ``segment`` events.

        Raises:
            ApiError: the stream ended with an error.
        """
        segments = []
        async with aclosing(self.events()) as events:
            async for event in events:
                if event["type"] == "segment":
                    segments.append({key: value for key, value in event.items() if key != "type"})
                elif event["type"] == "done":
                    return event, segments
        assert self.error is not None
        raise self.error


class TranslationService:
    def __init__(
        self,
        registry: ModelRegistry,
        settings: Settings,
        metrics: Metrics,
        cache: TranslationCache,
        lifecycle: Lifecycle,
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.metrics = metrics
        self.cache = cache
        self.lifecycle = lifecycle
        self.schedulers = {
            bundle.name: BatchScheduler(
                bundle, max_batch_size=settings.max_concurrent_streams, max_queue=settings.max_queued
            )
            for bundle in registry.bundles
        }
        for name, scheduler in self.schedulers.items():
            metrics.track_load(name, _reader(scheduler, "active"), _reader(scheduler, "queued"))

    async def warm_up(self) -> None:
        for bundle in self.registry.bundles:
            await asyncio.to_thread(bundle.warm_up)

    async def close(self) -> None:
        for scheduler in self.schedulers.values():
            await asyncio.to_thread(scheduler.close)
        await self.cache.close()

    async def prepare(
        self, request: TranslateRequest, *, request_id: str | None = None, log: dict[str, Any] | None = None
    ) -> PreparedStream:
        """Validate, resolve and admit a request; nothing has been sent to the client yet.

        Raises:
            ApiError: bad input (400/413), unknown direction (400), overload or shutdown (503).
        """
        arrived = time.perf_counter()
        if self.lifecycle.draining:
            raise _shutting_down(self.settings.retry_after)
        try:
            bundle = self.registry.resolve(request.source, request.target, request.text)
            # the server's limit, whatever the bundle's
            limit = self.settings.max_input_chars
            options = DecodeOptions(max_new_tokens=request.max_new_tokens, max_input_chars=limit)
            check_input(bundle, request.text, options)  # refused alike, cached or not
            common: dict[str, Any] = {
                "request_id": request_id or uuid.uuid4().hex[:16],
                "bundle": bundle,
                "source": bundle.manifest.source_lang,
                "target": bundle.manifest.target_lang,
                "arrived": arrived,
                "log": log if log is not None else {},
            }
            key = cache_key(
                bundle.model_id,  # the name, plus the direction for a multilingual bundle
                bundle.manifest.files[bundle.manifest.decoder.file].sha256,
                request.text,
                request.max_new_tokens,
            )
            if self.cache.enabled:
                record = await self.cache.get(key)
                if record is not None:
                    return ReplayStream(**common, cached=True, record=record)
            translation = await _plan(bundle, request.text, options)
            stream = LiveStream(**common, cached=False, translation=translation, service=self, cache_key=key)
            self.schedulers[bundle.name].submit(translation, stream.deliver)
        except DecodingError as exc:
            raise to_api_error(exc, retry_after=self.settings.retry_after, names=request.names) from None
        stream.watchdog = asyncio.get_running_loop().call_later(
            self.settings.request_timeout + 1.0, stream.cancel
        )
        return stream


# Planning a translation (sentence split + tokenization) costs about 1.3 µs per character: 0.08 ms
# for 40 characters, 1.3 ms for 1,000, 6-11 ms for 5,000; a hop to a worker thread costs ~0.08 ms
# (bench/tokenize_cost.py, bundled model, AMD EPYC; README "What runs on the event loop"). Texts
# up to 1,000 characters are planned on the event loop. Planning holds the GIL, so a thread does not
# free the loop: it still waits, up to CPython's 5 ms switch interval at a time.
_PLAN_ON_LOOP_CHARS = 1000


async def _plan(bundle: Bundle, text: str, options: DecodeOptions) -> Translation:
    if len(text) <= _PLAN_ON_LOOP_CHARS:
        return Translation(bundle, text, options=options)
    return await asyncio.to_thread(Translation, bundle, text, options=options)


def _shutting_down(retry_after: int) -> Overloaded:
    return Overloaded(
        "the server is shutting down",
        code=ErrorCode.SHUTTING_DOWN,
        headers={"Retry-After": str(retry_after)},
        details={"retry_after": retry_after},
    )


def _reader(scheduler: BatchScheduler, attribute: str) -> Callable[[], int]:
    def read() -> int:
        return int(getattr(scheduler, attribute))

    return read


@dataclass(kw_only=True)
class ReplayStream(PreparedStream):
    """A cache hit: the original stream's events, at once."""

    record: CachedTranslation

    async def events(self) -> AsyncGenerator[WireEvent, None]:
        yield start_event(
            request_id=self.request_id,
            model=self.bundle.name,
            source=self.source,
            target=self.target,
            cached=True,
            segments=self.record.segments,
        )
        for event in self.record.events:
            yield event
        elapsed = (time.perf_counter() - self.arrived) * 1000
        timings = {name: 0.0 for name in self.record.done["timings"]}
        timings.update(ttft_ms=round(elapsed, 3), total_ms=round(elapsed, 3))
        done = {**self.record.done, "cached": True, "timings": timings}
        self._log_done(done)
        yield done


@dataclass(kw_only=True)
class LiveStream(PreparedStream):
    """A translation running on a scheduler; its events arrive through an asyncio queue."""

    translation: Translation
    service: TranslationService
    cache_key: str
    watchdog: asyncio.TimerHandle | None = None
    _queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    _finished: bool = False

    def deliver(self, item: object) -> None:
        """Called on the scheduler thread for every event; never blocks."""
        self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def cancel(self) -> None:
        self.translation.cancel()
        if self.watchdog is not None:
            self.watchdog.cancel()

    async def events(self) -> AsyncGenerator[WireEvent, None]:
        service, metrics, model = self.service, self.service.metrics, self.bundle.name
        lifecycle, settings = service.lifecycle, service.settings
        loop = self._loop
        deadline = loop.time() + settings.request_timeout - (time.perf_counter() - self.arrived)
        recorded: list[WireEvent] = []
        last_delta: float | None = None
        lifecycle.register(self._queue)
        try:
            yield start_event(
                request_id=self.request_id,
                model=model,
                source=self.source,
                target=self.target,
                cached=False,
                segments=segment_spans(self.translation.source_segments),
            )
            while True:
                now = loop.time()
                limit = min(deadline, lifecycle.drain_deadline or deadline)
                try:
                    item = await asyncio.wait_for(
                        self._queue.get(), max(0.0, min(settings.heartbeat_interval, limit - now))
                    )
                except TimeoutError:
                    if loop.time() >= limit:
                        yield self._fail(
                            self._cut_off_error(deadline), "timeout" if limit == deadline else "shutdown"
                        )
                        return
                    yield PING
                    continue
                if item is _DRAIN:
                    continue  # the loop recomputes the limit with the drain deadline
                if isinstance(item, DecodingError):
                    yield self._fail(to_api_error(item), "error")
                    return
                if isinstance(item, Delta):
                    now_perf = time.perf_counter()
                    if last_delta is None:
                        metrics.ttft.labels(model).observe(now_perf - self.arrived)
                    else:
                        metrics.inter_token.labels(model).observe(now_perf - last_delta)
                    last_delta = now_perf
                    event = delta_event(item)
                elif isinstance(item, SegmentDone):
                    event = segment_event(item)
                elif isinstance(item, Result):
                    yield await self._finish(item, recorded)
                    return
                else:  # pragma: no cover - the scheduler only sends the types above
                    continue
                recorded.append(event)
                yield event
        except Exception:  # a bug must still end the stream with exactly one terminal record
            logger.exception("stream %s failed", self.request_id)
            yield self._fail(InternalError("internal server error"), "error")
        finally:
            lifecycle.unregister(self._queue)
            if not self._finished:
                self.cancel()
                metrics.cancellations.labels("disconnect").inc()

    def _cut_off_error(self, deadline: float) -> ApiError:
        if self._loop.time() >= deadline:
            return RequestTimeout(f"no result within {self.service.settings.request_timeout:g} s")
        return _shutting_down(self.service.settings.retry_after)

    def _fail(self, error: ApiError, reason: str) -> WireEvent:
        self._finished = True
        self.cancel()
        self.error = error
        self.log.update(model=self.bundle.name, error=error.code)
        metrics = self.service.metrics
        if reason in ("timeout", "shutdown"):
            metrics.cancellations.labels(reason).inc()
        metrics.errors.labels(error.code).inc()
        return error_event(error)

    async def _finish(self, result: Result, recorded: list[WireEvent]) -> WireEvent:
        self._finished = True
        if self.watchdog is not None:
            self.watchdog.cancel()
        metrics, model = self.service.metrics, self.bundle.name
        metrics.queue_wait.labels(model).observe(result.timings.queue_ms / 1000)
        metrics.output_tokens.labels(model).observe(result.output_tokens)
        metrics.input_tokens.labels(model).inc(result.input_tokens)
        if result.finish_reason == "cancelled":  # only the watchdog cancels a stream still being read
            return self._fail(RequestTimeout("the translation was stopped"), "timeout")
        done = done_event(result, model=model, cached=False)
        if self.service.cache.enabled:
            record = CachedTranslation(
                segments=segment_spans(self.translation.source_segments), events=recorded, done=done
            )
            await self.service.cache.put(self.cache_key, record)
        self._log_done(done)
        return done
