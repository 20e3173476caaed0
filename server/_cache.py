"""Finished translations, kept so a repeated request replays instantly.

Two levels: an in-process LRU, and — when a Redis URL is configured — Redis, shared by every worker
and replica (entries expire after ``cache_ttl``). A record is the whole event sequence of a finished
translation, so a hit streams exactly what the original stream sent, marked ``cached: true``.

Redis is an optimisation, never a dependency: when it fails, the request is served without it, the
failure is logged and counted, and Redis is left alone for a few seconds (so a dead Redis costs one
timeout every few seconds, not one per request).
"""

from __future__ import annotations

import hashlib
import json
import logging
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
        self, *, size: int, metrics: Metrics, redis_url: str | None = None, ttl: int = 86400
    ) -> None:
        self._size = size
        self._memory: OrderedDict[str, CachedTranslation] = OrderedDict()
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
    def enabled(self) -> bool:
        return self._size > 0 or self._redis is not None

    async def get(self, key: str) -> CachedTranslation | None:
        record = self._memory.get(key)
        if record is not None:
            self._memory.move_to_end(key)
        elif self._redis_usable():
            try:
                data = await self._redis.get(_REDIS_PREFIX + key)
            except Exception as exc:
                self._redis_failed("get", exc)
            else:
                if data is not None:
                    record = CachedTranslation.from_json(data)
                    self._remember(key, record)
        if self.enabled:
            self._metrics.cache.labels("hit" if record is not None else "miss").inc()
        return record

    async def put(self, key: str, record: CachedTranslation) -> None:
        self._remember(key, record)
        if self._redis_usable():
            try:
                await self._redis.set(_REDIS_PREFIX + key, record.to_json(), ex=self._ttl or None)
            except Exception as exc:
                self._redis_failed("set", exc)

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()

    def _remember(self, key: str, record: CachedTranslation) -> None:
        if self._size <= 0:
            return
        self._memory[key] = record
        self._memory.move_to_end(key)
        while len(self._memory) > self._size:
            self._memory.popitem(last=False)

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
