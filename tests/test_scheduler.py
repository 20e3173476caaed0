"""Continuous batching: many translations stepped together give exactly the single-stream events."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from decoding import (
    BatchScheduler,
    Bundle,
    DecodeOptions,
    DecodingError,
    Delta,
    EngineBusyError,
    Event,
    Result,
    SegmentDone,
    Translation,
)
from decoding.export.synthetic import CORPUS


class Collector:
    """Receives one translation's events on the scheduler thread."""

    def __init__(self, notify_after: int | None = None) -> None:
        self.events: list[Event | DecodingError] = []
        self.done = threading.Event()
        self.reached = threading.Event()
        self._notify_after = notify_after

    def __call__(self, item: Event | DecodingError) -> None:
        self.events.append(item)
        if self._notify_after is not None and len(self.events) >= self._notify_after:
            self.reached.set()
        if isinstance(item, Result | DecodingError):
            self.done.set()

    def result(self) -> Result:
        assert self.done.wait(30), "translation did not finish"
        last = self.events[-1]
        assert isinstance(last, Result), last
        return last


def comparable(events: list[Event | DecodingError]) -> list[object]:
    """Events without timings (wall-clock differs run to run)."""
    return [(e.translation, e.segments, e.finish_reason) if isinstance(e, Result) else e for e in events]


@pytest.fixture
def scheduler(tiny_marian_bundle: Bundle) -> Iterator[BatchScheduler]:
    scheduler = BatchScheduler(tiny_marian_bundle, max_batch_size=8, max_queue=32)
    yield scheduler
    scheduler.close()


def test_batched_events_equal_single_stream_events(
    tiny_marian_bundle: Bundle, scheduler: BatchScheduler
) -> None:
    texts = [CORPUS[i] + CORPUS[i + 1] for i in range(0, 20, 2)]  # two segments each
    options = [DecodeOptions(max_new_tokens=5 + 3 * i, min_new_tokens=i % 4) for i in range(len(texts))]
    collectors = []
    for text, opts in zip(texts, options, strict=True):
        collectors.append(Collector())
        scheduler.submit(Translation(tiny_marian_bundle, text, options=opts), collectors[-1])
    for text, opts, collector in zip(texts, options, collectors, strict=True):
        collector.result()
        expected = list(tiny_marian_bundle.stream(text, options=opts))
        assert comparable(collector.events) == comparable(list(expected))


def test_late_joiners_do_not_change_earlier_outputs(
    tiny_marian_bundle: Bundle, scheduler: BatchScheduler
) -> None:
    opts = DecodeOptions(max_new_tokens=40, min_new_tokens=30)
    first = Collector(notify_after=3)
    scheduler.submit(Translation(tiny_marian_bundle, "今天天气很好。", options=opts), first)
    assert first.reached.wait(30)  # the first translation is mid-flight
    late = [Collector() for _ in range(5)]
    for i, collector in enumerate(late):
        scheduler.submit(
            Translation(tiny_marian_bundle, CORPUS[i], options=DecodeOptions(max_new_tokens=6)), collector
        )
    assert first.result().segments == tiny_marian_bundle.translate("今天天气很好。", options=opts).segments
    for i, collector in enumerate(late):
        want = tiny_marian_bundle.translate(CORPUS[i], options=DecodeOptions(max_new_tokens=6))
        assert collector.result().segments == want.segments


def test_cancelled_translation_leaves_and_frees_its_place(default_bundle: Bundle) -> None:
    scheduler = BatchScheduler(default_bundle, max_batch_size=4)
    try:
        # word-level model: every token is a delta at once. The consumer holds the scheduler thread
        # on its first delta until the test has cancelled, so the order is certain without sleeps.
        long = Translation(
            default_bundle, "你好。", options=DecodeOptions(max_new_tokens=120, min_new_tokens=120)
        )
        watcher = Collector(notify_after=1)
        cancelled = threading.Event()

        def hold_first(item: Event | DecodingError) -> None:
            watcher(item)
            if len(watcher.events) == 1:
                cancelled.wait(30)

        scheduler.submit(long, hold_first)
        other = Collector()
        scheduler.submit(Translation(default_bundle, "我很好。"), other)
        assert watcher.reached.wait(30)
        long.cancel()
        cancelled.set()
        result = watcher.result()
        assert result.finish_reason == "cancelled"
        assert long.steps == 1  # the step whose delta was being delivered; none ran after cancel()
        assert isinstance(watcher.events[-2], SegmentDone) and watcher.events[-2].finish_reason == "cancelled"
        assert other.result().translation == default_bundle.translate("我很好。").translation
        assert scheduler.wait_idle(30)
        assert scheduler.active == 0 and scheduler.queued == 0
    finally:
        scheduler.close()


def test_full_queue_is_refused_then_accepts_again(default_bundle: Bundle) -> None:
    scheduler = BatchScheduler(default_bundle, max_batch_size=1, max_queue=1)
    try:
        gate = threading.Event()
        blocker = Collector(notify_after=1)

        def blocking(item: Event | DecodingError) -> None:
            blocker(item)
            gate.wait(30)  # holds the scheduler thread: the batch stays full

        # word-level model: the first delta comes at the first step, while the row is in the batch
        opts = DecodeOptions(max_new_tokens=4, min_new_tokens=4)
        scheduler.submit(Translation(default_bundle, "你好。", options=opts), blocking)
        assert blocker.reached.wait(30)
        queued = Collector()
        scheduler.submit(Translation(default_bundle, "你好。", options=opts), queued)
        with pytest.raises(EngineBusyError):
            scheduler.submit(Translation(default_bundle, "你好。", options=opts), Collector())
        gate.set()
        queued.result()
        blocker.result()
        again = Collector()
        scheduler.submit(Translation(default_bundle, "你好。", options=opts), again)
        assert again.result().output_tokens == 4
    finally:
        gate.set()
        scheduler.close()


def test_a_failing_consumer_loses_only_its_own_translation(
    tiny_marian_bundle: Bundle, scheduler: BatchScheduler
) -> None:
    def broken(item: Event | DecodingError) -> None:
        raise RuntimeError("consumer bug")

    scheduler.submit(
        Translation(tiny_marian_bundle, "你好。", options=DecodeOptions(max_new_tokens=50)), broken
    )
    healthy = Collector()
    scheduler.submit(
        Translation(tiny_marian_bundle, "你好。", options=DecodeOptions(max_new_tokens=5)), healthy
    )
    assert healthy.result().output_tokens <= 5


def test_gru_bundle_through_the_scheduler(default_bundle: Bundle) -> None:
    scheduler = BatchScheduler(default_bundle, max_batch_size=4)
    try:
        texts = ["我很好。", "你喜欢吃苹果吗？我不知道。", "我们走吧！", "汤姆在哪里？", "他是我的朋友。"]
        collectors = [Collector() for _ in texts]
        for text, collector in zip(texts, collectors, strict=True):
            scheduler.submit(Translation(default_bundle, text), collector)
        for text, collector in zip(texts, collectors, strict=True):
            assert collector.result().translation == default_bundle.translate(text).translation
    finally:
        scheduler.close()


@pytest.mark.parametrize("first_step_alone", [True, False])
def test_a_newcomer_gets_its_first_token_before_the_running_batch_steps_again(
    default_bundle: Bundle, first_step_alone: bool
) -> None:
    """With ``first_step_alone`` a joining translation's first step runs on its own row right after
    its encoder call, so its first token does not wait for a full batch step; without it, the
    running translation's next token comes first. The outputs are the same either way."""
    scheduler = BatchScheduler(default_bundle, max_batch_size=4, first_step_alone=first_step_alone)
    try:
        order: list[str] = []
        release = threading.Event()
        opts = DecodeOptions(max_new_tokens=20, min_new_tokens=20)
        running = Collector(notify_after=1)

        def hold_first(item: Event | DecodingError) -> None:
            running(item)
            if isinstance(item, Delta):
                order.append("running")
            if len(running.events) == 1:
                release.wait(30)  # the newcomer is submitted while this step's events are delivered

        newcomer = Collector()

        def record(item: Event | DecodingError) -> None:
            newcomer(item)
            if isinstance(item, Delta):
                order.append("newcomer")

        # word-level model: every token is a delta at once
        scheduler.submit(Translation(default_bundle, "你好。", options=opts), hold_first)
        assert running.reached.wait(30)
        scheduler.submit(Translation(default_bundle, "我很好。"), record)
        release.set()
        assert newcomer.result().translation == default_bundle.translate("我很好。").translation
        assert running.result().output_tokens == 20
        first_of_newcomer = order.index("newcomer")
        assert order[:first_of_newcomer] == ["running"] * (1 if first_step_alone else 2)
    finally:
        release.set()
        scheduler.close()
