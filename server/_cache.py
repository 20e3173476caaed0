"""Finished translations, kept so a repeated request replays instantly.

Two levels: an in-process LRU, and — when a Redis URL is configured — Redis, shared by every worker
and replica (entries expire after ``cache_ttl``). A record is the whole event sequence of a finished
translation, so a hit streams exactly what the original stream sent, marked ``cached: true``.

The in-process level is bounded in **bytes**, not only in entries: it keeps each record serialized
(compact JSON, what Redis stores too), and counts what those objects cost. As live Python objects a
5,000-character translation took ~2.3 MB, so 1,024 entries could reach gigabytes; serialized it is
~60 KB. A record larger than a sixteenth of the budget is not kept in memory (one huge text must not
evict everything else); it still goes to Redis.

Redis is an optimisation, never a dependency: when it fails, the request is served without it, the
failure is logged and counted, and Redis is left alone for a few seconds (so a dead Redis costs one
timeout every few seconds, not one per request).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ._metrics import Metrics

logger = logging.getLogger("liuyi.cache")
_REDIS_PREFIX = "liuyi:tr:"
_REDIS_TIMEOUT = 0.25  # seconds; a cache slower than this is not worth waiting for
_REDIS_BACKOFF = 5.0  # seconds to skip Redis after a failure


@dataclass(frozen=True, slots=True)
class CachedTranslation:
    segments: list[dict[str, int]]  # the start event's spans
    events: list[dict[str, Any]]  # delta and segment wire events, in order
    done: dict[str, Any]  # the done event (timings of the original run)

    def to_json(self) -> str:
        return json.dumps(
            {"segments": self.segments, "events": self.events, "done": self.done},
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, data: str | bytes) -> CachedTranslation:
        raw = json.loads(data)
        return cls(segments=raw["segments"], events=raw["events"], done=raw["done"])


def cache_key(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()  # ASCII: any str hashes


class TranslationCache:
    def __init__(
        self,
        *,
        size: int,
        metrics: Metrics,
        max_bytes: int = 64 << 20,
        redis_url: str | None = None,
        ttl: int = 86400,
    ) -> None:
        self._size = size if max_bytes > 0 else 0
        self._max_bytes = max_bytes
        self._memory: OrderedDict[str, bytes] = OrderedDict()  # key -> serialized record
        self._bytes = 0  # what the entries in _memory cost, see _cost
        self._metrics = metrics
        self._ttl = ttl
        self._redis: Any = None
        self._redis_down_until = 0.0
        if redis_url:
            import redis.asyncio

            self._redis = redis.asyncio.Redis.from_url(
                redis_url, socket_timeout=_REDIS_TIMEOUT, socket_connect_timeout=_REDIS_TIMEOUT
            )

    @property
    def memory_bytes(self) -> int:
        """Bytes the in-process entries take (keys, serialized records, and the LRU's own links)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._memory)

    @property
    def enabled(self) -> bool:
        return self._size > 0 or self._redis is not None

    async def get(self, key: str) -> CachedTranslation | None:
        data = self._memory.get(key)
        if data is not None:
            self._memory.move_to_end(key)
        elif self._redis_usable():
            try:
                data = await self._redis.get(_REDIS_PREFIX + key)
            except Exception as exc:
                self._redis_failed("get", exc)
            else:
                if data is not None:
                    self._remember(key, data)
        if self.enabled:
            self._metrics.cache.labels("hit" if data is not None else "miss").inc()
        return None if data is None else CachedTranslation.from_json(data)

    async def put(self, key: str, record: CachedTranslation) -> None:
        data = record.to_json().encode()
        self._remember(key, data)
        if self._redis_usable():
            try:
                await self._redis.set(_REDIS_PREFIX + key, data, ex=self._ttl or None)
            except Exception as exc:
                self._redis_failed("set", exc)

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()

    def _remember(self, key: str, data: bytes) -> None:
        cost = _cost(key, data)
        if self._size <= 0 or cost > self._max_bytes // 16:
            return
        previous = self._memory.pop(key, None)
        if previous is not None:
            self._bytes -= _cost(key, previous)
        self._memory[key] = data
        self._bytes += cost
        while len(self._memory) > self._size or self._bytes > self._max_bytes:
            old_key, old_data = self._memory.popitem(last=False)
            self._bytes -= _cost(old_key, old_data)

    def _redis_usable(self) -> bool:
        return self._redis is not None and time.monotonic() >= self._redis_down_until

    def _redis_failed(self, operation: str, exc: Exception) -> None:
        self._metrics.cache_errors.inc()
        self._redis_down_until = time.monotonic() + _REDIS_BACKOFF
        logger.warning(
            "redis %s failed (%s: %s); serving without the shared cache for %.0f s",
            operation,
            type(exc).__name__,
            exc,
            _REDIS_BACKOFF,
        )


_LINK_BYTES = 112  # an OrderedDict entry: hash-table slot plus its linked-list node (CPython 3.11)


def _cost(key: str, data: bytes) -> int:
    return sys.getsizeof(key) + sys.getsizeof(data) + _LINK_BYTES
