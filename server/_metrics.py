"""Prometheus metrics, in a registry owned by one app (no process-global collectors)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_STEP = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)
_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Metrics:
    CONTENT_TYPE = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "liuyi_requests", "HTTP requests by route and status", ["route", "status"], registry=r
        )
        self.request_duration = Histogram(
            "liuyi_request_duration_seconds",
            "Request duration, to the last byte",
            ["route"],
            buckets=_LATENCY,
            registry=r,
        )
        self.ttft = Histogram(
            "liuyi_time_to_first_token_seconds",
            "Arrival to first generated text",
            ["model"],
            buckets=_LATENCY,
            registry=r,
        )
        self.inter_token = Histogram(
            "liuyi_inter_token_latency_seconds",
            "Time between consecutive deltas",
            ["model"],
            buckets=_STEP,
            registry=r,
        )
        self.queue_wait = Histogram(
            "liuyi_queue_wait_seconds",
            "Wait for a place in the decoding batch",
            ["model"],
            buckets=_LATENCY,
            registry=r,
        )
        self.output_tokens = Histogram(
            "liuyi_output_tokens", "Generated tokens per translation", ["model"], buckets=_TOKENS, registry=r
        )
        self.cache = Counter("liuyi_cache_lookups", "Translation cache lookups", ["result"], registry=r)
        self.cache_errors = Counter(
            "liuyi_cache_errors", "Shared (Redis) cache failures, served without it", registry=r
        )
        self.cancellations = Counter(
            "liuyi_cancellations", "Translations stopped before the end", ["reason"], registry=r
        )
        self.errors = Counter("liuyi_errors", "Errors sent to clients, by code", ["code"], registry=r)
        self.active = Gauge("liuyi_active_streams", "Sequences being decoded", ["model"], registry=r)
        self.queued = Gauge("liuyi_queued_streams", "Sequences waiting for a place", ["model"], registry=r)

    def track_load(self, model: str, active: Callable[[], int], queued: Callable[[], int]) -> None:
        """Gauges read the scheduler at scrape time instead of being updated on every change."""
        self.active.labels(model).set_function(active)
        self.queued.labels(model).set_function(queued)

    def render(self) -> bytes:
        return generate_latest(self.registry)
