"""``/metrics`` of a server with several worker processes describes the whole server: whichever
worker answers a scrape, counters are the sums over all workers and never go backwards, not even
when a worker dies."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests._logged import LoggedServer
from tests.test_live_server import wait_until

MODEL = "cn2en-gru-zh-en"
TEXTS = ["你好。", "今天天气很好。", "我喜欢喝茶。", "他们明天去北京。"]


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = httpx.get(f"{url}/metrics", timeout=10)
    assert response.status_code == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_two_workers_report_summed_monotonic_counters_whoever_answers_the_scrape() -> None:
    with LoggedServer(LIUYI_WORKERS="2", LIUYI_CACHE_SIZE="0") as server:
        sent, input_tokens = 0, 0
        with ThreadPoolExecutor(8) as pool, httpx.Client(base_url=server.url, timeout=30) as client:
            # each request on its own connection, in concurrent batches, until both workers served
            def translate(text: str) -> httpx.Response:
                return httpx.post(f"{server.url}/v1/translate", json={"text": text}, timeout=30)

            for _ in range(30):  # stops as soon as both workers have served
                batch = list(pool.map(translate, TEXTS * 4))
                assert all(r.status_code == 200 for r in batch)
                sent += len(batch)
                input_tokens += sum(r.json()["usage"]["input_tokens"] for r in batch)
                if len({r["pid"] for r in server.access_records()}) >= 2:
                    break
            assert client.get("/healthz").status_code == 200
        assert server.wait_for(lambda r: r["logger"] == "liuyi.access", count=sent + 1)
        serving_pids = {r["pid"] for r in server.access_records()}
        assert len(serving_pids) == 2, "both workers served requests"

        # live gauges: each worker refreshes its share every second
        assert wait_until(lambda: value(scrape(server.url), "liuyi_active_streams", model=MODEL) == 0)
        scrapes = [scrape(server.url) for _ in range(30)]

    translated = [value(s, "liuyi_requests_total", route="/v1/translate", status="200") for s in scrapes]
    assert translated == [sent] * len(scrapes)
    # each scrape counts the scrapes before it, whichever worker served those
    counted = [value(s, "liuyi_requests_total", route="/metrics", status="200") for s in scrapes]
    assert counted == [counted[0] + i for i in range(len(scrapes))]
    model = MODEL
    assert all(value(s, "liuyi_input_tokens_total", model=model) == input_tokens for s in scrapes)
    assert all(value(s, "liuyi_output_tokens_count", model=model) == sent for s in scrapes)
    assert all(value(s, "liuyi_active_streams", model=model) == 0 for s in scrapes)
    for pid in serving_pids:  # process metrics: one series per living worker
        assert all(value(s, "process_resident_memory_bytes", pid=str(pid)) > 0 for s in scrapes)


def process_pids(samples: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> set[int]:
    return {int(dict(labels)["pid"]) for name, labels in samples if name == "process_resident_memory_bytes"}


def test_a_dead_workers_counts_stay_and_its_process_series_go() -> None:
    with LoggedServer(LIUYI_WORKERS="2", LIUYI_CACHE_SIZE="0") as server:
        for text in TEXTS:
            reply = httpx.post(f"{server.url}/v1/translate", json={"text": text}, timeout=30)
            assert reply.status_code == 200
        before = scrape(server.url)
        workers = process_pids(before)
        assert len(workers) == 2
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        # uvicorn's supervisor starts a replacement; the scrape notices the death by itself
        assert wait_until(lambda: len(process_pids(scrape(server.url)) - workers) == 1, 60)
        after = scrape(server.url)
    assert victim not in process_pids(after) and len(process_pids(after)) == 2
    served = value(before, "liuyi_requests_total", route="/v1/translate", status="200")
    assert served == len(TEXTS)
    assert value(after, "liuyi_requests_total", route="/v1/translate", status="200") == served
    assert value(after, "liuyi_active_streams", model=MODEL) == 0
