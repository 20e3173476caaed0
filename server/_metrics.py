"""Prometheus metrics for one app — or, with several worker processes, for all of them.

One process (the default): a registry owned by the app (no process-global collectors), gauges that
read the scheduler at scrape time, and the standard ``process_*`` metrics of this process.

Several workers (``liuyi serve --workers N``): every scrape lands on one worker, yet must describe
the whole server. ``serve`` points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory before the
workers start; prometheus-client then keeps each worker's values in memory-mapped files there and
``/metrics`` in any worker adds them up (counters and histograms summed over all workers, living or
dead, so they never go backwards). Differences from one process, deliberate:

- ``liuyi_active_streams`` / ``liuyi_queued_streams`` are ``livesum`` gauges: each worker copies its
  scheduler's numbers into its file every second (callback gauges cannot work across processes),
  and a dead worker's share is dropped (``mark_process_dead``) at the next scrape.
- ``process_*`` metrics carry a ``pid`` label, one series per living worker (read from
  ``/proc/<pid>``): memory and CPU are per process facts, and a sum would hide a leaking worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client import values as prometheus_values
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

MULTIPROCESS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus-client itself, at import
_LOAD_REFRESH_SECONDS = 1.0
_PID_IN_FILE = re.compile(r"_(\d+)\.db$")

_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_STEP = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)
_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Metrics:
    CONTENT_TYPE = CONTENT_TYPE_LATEST

    def __init__(self, *, multiprocess_dir: str | None = None) -> None:
        """Arguments:
        multiprocess_dir: aggregate over worker processes through this directory; default: the
            ``PROMETHEUS_MULTIPROC_DIR`` variable, which prometheus-client reads too (at import) to
            decide where values live, so the two always agree.

        Raises:
            RuntimeError: a directory is given but prometheus-client was imported without it.
        """
        self.multiprocess_dir = multiprocess_dir or os.environ.get(MULTIPROCESS_DIR_VARIABLE) or None
        if self.multiprocess_dir and not getattr(prometheus_values.ValueClass, "_multiprocess", False):
            raise RuntimeError(f"{MULTIPROCESS_DIR_VARIABLE} must be set before prometheus_client loads")
        self.registry = CollectorRegistry()
        r = None if self.multiprocess_dir else self.registry  # multiprocess values live in files
        if r is not None:
            ProcessCollector(registry=r)
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
        self.input_tokens = Counter(
            "liuyi_input_tokens",
            "Source tokens of decoded translations (cache hits excluded)",
            ["model"],
            registry=r,
        )
        self.cache = Counter("liuyi_cache_lookups", "Translation cache lookups", ["result"], registry=r)
        self.cache_errors = Counter(
            "liuyi_cache_errors", "Shared (Redis) cache failures, served without it", registry=r
        )
        self.cancellations = Counter(
            "liuyi_cancellations", "Translations stopped before the end", ["reason"], registry=r
        )
        self.errors = Counter("liuyi_errors", "Errors sent to clients, by code", ["code"], registry=r)
        self.active = Gauge(
            "liuyi_active_streams",
            "Sequences being decoded",
            ["model"],
            registry=r,
            multiprocess_mode="livesum",
        )
        self.queued = Gauge(
            "liuyi_queued_streams",
            "Sequences waiting for a place",
            ["model"],
            registry=r,
            multiprocess_mode="livesum",
        )
        self._load: dict[str, tuple[Callable[[], int], Callable[[], int]]] = {}
        self._refresher: asyncio.TimerHandle | None = None

    def track_load(self, model: str, active: Callable[[], int], queued: Callable[[], int]) -> None:
        """Gauges read the scheduler at scrape time instead of being updated on every change; with
        several workers, each worker copies the numbers every second (see the module docstring)."""
        if not self.multiprocess_dir:
            self.active.labels(model).set_function(active)
            self.queued.labels(model).set_function(queued)
            return
        self._load[model] = (active, queued)
        self._refresh_load()
        with contextlib.suppress(RuntimeError):  # no running loop: refreshed at scrapes only
            self._schedule_refresh(asyncio.get_running_loop())

    def render(self) -> bytes:
        """The text exposition of this app's registry, or of all workers' files."""
        if not self.multiprocess_dir:
            return generate_latest(self.registry)
        self._refresh_load()
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        registry.register(_WorkerProcesses(self._living_workers()))
        return generate_latest(registry)

    def markdown_table(self) -> str:
        """The metrics as the document lists them: name as exposed, type, meaning."""
        suffixes = {"counter": "_total", "histogram": "_bucket`, `_sum`, `_count"}
        rows = [
            f"| `{m.name}{suffixes.get(m.type, '')}` | {m.type} | {m.documentation} |"
            for m in self.registry.collect()
        ]
        return "\n".join(["| metric | type | meaning |", "|---|---|---|", *rows]) if rows else ""

    def _schedule_refresh(self, loop: asyncio.AbstractEventLoop) -> None:
        def tick() -> None:
            self._refresh_load()
            self._refresher = loop.call_later(_LOAD_REFRESH_SECONDS, tick)

        self._refresher = loop.call_later(_LOAD_REFRESH_SECONDS, tick)

    def _refresh_load(self) -> None:
        for model, (active, queued) in self._load.items():
            self.active.labels(model).set(active())
            self.queued.labels(model).set(queued())

    def _living_workers(self) -> list[int]:
        """Pids that wrote metric files and are still running; dead ones lose their live gauges."""
        assert self.multiprocess_dir is not None
        pids = set()
        for path in Path(self.multiprocess_dir).glob("*.db"):
            match = _PID_IN_FILE.search(path.name)
            if match:
                pids.add(int(match.group(1)))
        living = []
        for pid in sorted(pids):
            if _is_running(pid):
                living.append(pid)
            else:
                mark_process_dead(pid, self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return living


def _is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, belongs to someone else
        return True
    return True


class _WorkerProcesses(Collector):
    """The standard ``process_*`` metrics of each worker, labelled with its pid."""

    def __init__(self, pids: Iterable[int]) -> None:
        self._pids = list(pids)

    def collect(self) -> Iterable[Metric]:
        merged: dict[str, Metric] = {}
        for pid in self._pids:
            collector = ProcessCollector(pid=lambda pid=pid: pid, registry=None)  # type: ignore[misc]
            for family in collector.collect():
                into = merged.setdefault(family.name, Metric(family.name, family.documentation, family.type))
                for sample in family.samples:
                    into.add_sample(sample.name, {**sample.labels, "pid": str(pid)}, sample.value)
        return merged.values()
