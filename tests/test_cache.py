"""The in-process translation cache is bounded in bytes: what it holds never exceeds --cache-bytes,
measured both by its own accounting and by the Python allocator."""

from __future__ import annotations

import gc
import tracemalloc

from server._cache import CachedTranslation, TranslationCache, cache_key
from server._metrics import Metrics


def record(text: str, deltas: int = 1) -> CachedTranslation:
    """A finished translation as the server records it: span, delta + segment events, done."""
    events = [{"type": "delta", "text": text, "index": i, "segment": 0} for i in range(deltas)]
    events.append({"type": "segment", "index": 0, "start": 0, "end": 4, "translation": text * deltas})
    done = {"type": "done", "translation": text * deltas, "finish_reason": "stop", "cached": False}
    return CachedTranslation(segments=[{"index": 0, "start": 0, "end": 4}], events=events, done=done)


async def test_entries_are_evicted_oldest_first_to_stay_under_the_byte_budget() -> None:
    budget = 256 << 10
    cache = TranslationCache(size=10_000, max_bytes=budget, metrics=Metrics())
    for i in range(400):  # ~9 KB each: ~3.6 MB offered to a 256 KB cache
        await cache.put(cache_key(i), record(f"sentence {i} ", deltas=100))
        assert cache.memory_bytes <= budget
    assert 10 < len(cache) < 400
    assert await cache.get(cache_key(399)) is not None  # the newest stay
    assert await cache.get(cache_key(0)) is None  # the oldest went


async def test_the_allocator_agrees_with_the_cache_s_own_accounting() -> None:
    budget = 512 << 10
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = TranslationCache(size=10_000, max_bytes=budget, metrics=Metrics())
        for i in range(600):
            await cache.put(cache_key(i), record(f"第{i}句话。", deltas=80))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cache.memory_bytes <= budget
    assert held <= budget + (64 << 10), f"the cache holds {held} bytes for a {budget}-byte budget"
    assert held >= cache.memory_bytes * 0.8  # the accounting does not hide what is really kept


async def test_a_record_larger_than_a_sixteenth_of_the_budget_is_not_kept_and_evicts_nothing() -> None:
    cache = TranslationCache(size=100, max_bytes=160 << 10, metrics=Metrics())
    await cache.put("small", record("ok"))
    await cache.put("huge", record("x" * 1000, deltas=20))  # ~20 KB > 10 KB
    assert await cache.get("huge") is None
    assert await cache.get("small") is not None


async def test_a_long_translation_costs_kilobytes_not_megabytes() -> None:
    cache = TranslationCache(size=10, max_bytes=64 << 20, metrics=Metrics())
    await cache.put("long", record("词 ", deltas=2500))  # a 5,000-character text: ~2,500 deltas
    assert cache.memory_bytes < 200 << 10
    replayed = await cache.get("long")
    assert replayed is not None and len(replayed.events) == 2501


async def test_zero_bytes_or_zero_entries_turn_the_memory_level_off() -> None:
    for cache in (
        TranslationCache(size=0, metrics=Metrics()),
        TranslationCache(size=100, max_bytes=0, metrics=Metrics()),
    ):
        await cache.put("k", record("ok"))
        assert await cache.get("k") is None and not cache.enabled
