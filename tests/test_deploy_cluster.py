"""Replicas as real processes behind a real nginx: the whole local cluster (redis-server, two
replicas, nginx) sharing its cache and stopping cleanly; a replica killed under a steady load of
10 streaming clients; a rolling restart under the same load with no failed request.

The load reports what happened (run with -s to see it); assertions are on how each request ended,
never on how long it took.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests._cluster import ROOT, SCRIPT, Cluster, Outcome, Replica, SteadyLoad
from tests.test_live_server import wait_until

# Replicas for load tests: no response cache (every request decodes), one ONNX thread each (two
# replicas, nginx and the clients share 2 cores), quiet logs, a short drain.
LOAD_REPLICA = {
    "LIUYI_CACHE_SIZE": "0",
    "LIUYI_THREADS": "1",
    "LIUYI_LOG_LEVEL": "warning",
    "LIUYI_SHUTDOWN_GRACE": "5",
}


def stream(url: str, text: str) -> list[dict[str, Any]]:
    response = httpx.post(f"{url}/v1/translate/stream", json={"text": text}, timeout=30)
    assert response.status_code == 200
    return [json.loads(line) for line in response.text.splitlines()]


def report(title: str, outcomes: list[Outcome], access_log: str) -> str:
    retried = re.findall(r"upstream=(\S+, \S+) upstream_status=(\S+, \S+)", access_log)
    failed = [o for o in outcomes if not o.ok]
    lines = [f"{title}: {len(outcomes)} requests, {len(failed)} failed, {len(retried)} retried by nginx"]
    lines += [f"  failed: {o.error[:160]}" for o in failed]
    lines += sorted({f"  retried: {status} ({addresses})" for addresses, status in retried})
    text = "\n".join(lines)
    print(text)
    return text


def test_local_cluster_shares_translations_through_redis_and_stops_everything(tmp_path: Path) -> None:
    run_dir = tmp_path / "cluster"
    with Cluster(run_dir, replicas=2, environment={"LIUYI_THREADS": "1"}) as cluster:
        made_on_1 = stream(cluster.info["REPLICA_1_URL"], "你喜欢吃苹果吗？")
        served_by_2 = stream(cluster.info["REPLICA_2_URL"], "你喜欢吃苹果吗？")
        through_nginx = stream(cluster.url, "你喜欢吃苹果吗？")
        for text in ("我很好。", "我不知道。", "我们走吧！", "他是我的朋友。", "我很好。", "谢谢！"):
            assert httpx.post(f"{cluster.url}/v1/translate", json={"text": text}).status_code == 200
        replica_urls = [cluster.info["REPLICA_1_URL"], cluster.info["REPLICA_2_URL"]]
        assert wait_until(lambda: sum(translations_counted(url) for url in replica_urls) == 6)
        per_replica = [translations_counted(url) for url in replica_urls]
        pids = cluster.pids()
        assert sorted(cluster.still_running()) == sorted(pids)
        code = cluster.stop()
        left_running = cluster.still_running()
    assert set(pids) == {"LOCAL_CLUSTER_PID", "REDIS_PID", "REPLICA_1_PID", "REPLICA_2_PID", "NGINX_PID"}
    assert code == 128 + signal.SIGTERM
    assert left_running == []
    assert not made_on_1[0]["cached"]
    assert served_by_2[0]["cached"] and served_by_2[-1]["cached"]  # replica 2 never decoded it: Redis had it
    assert through_nginx[-1]["cached"]
    assert made_on_1[-1]["translation"] == served_by_2[-1]["translation"] == "Do you like to eat?"
    for log in ("nginx-access.log", "nginx-error.log", "replica-1.log", "replica-2.log", "redis.log"):
        assert str(run_dir / log) in cluster.output and (run_dir / log).exists()
    assert "local-cluster: stopped" in cluster.output
    assert all(count > 0 for count in per_replica)  # least_conn spread them; each replica counts its own


def translations_counted(replica_url: str) -> float:
    """liuyi_requests_total for POST /v1/translate answered 200, scraped from one replica."""
    metrics = httpx.get(f"{replica_url}/metrics").text
    wanted = 'liuyi_requests_total{route="/v1/translate",status="200"}'
    return sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(wanted))


def test_prometheus_scrapes_each_replica_of_each_setup_directly() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text(encoding="utf-8"))
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    local = jobs["liuyi-local"]["static_configs"][0]["targets"]
    assert local == ["127.0.0.1:8081", "127.0.0.1:8082"]  # local-cluster.sh's defaults: 8080 + 1, + 2
    assert "port=8080" in SCRIPT.read_text() and "replicas=2" in SCRIPT.read_text()
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text(encoding="utf-8"))
    replicas = sorted(name for name in compose["services"] if name.startswith("replica-"))
    assert jobs["liuyi-compose"]["static_configs"][0]["targets"] == [f"{name}:8000" for name in replicas]
    keep = [rule for rule in jobs["liuyi-kubernetes"]["relabel_configs"] if rule.get("action") == "keep"]
    assert {rule["regex"] for rule in keep} == {"true", "liuyi"}  # annotated pods of the liuyi Deployment


def test_local_cluster_refuses_an_unknown_option_with_one_line() -> None:
    command = ["bash", str(SCRIPT), "--replica", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == "local-cluster: unknown option: --replica"


def test_killing_a_replica_under_load_fails_only_streams_it_was_sending(tmp_path: Path) -> None:
    with (
        Replica(**LOAD_REPLICA) as doomed,
        Replica(**LOAD_REPLICA) as survivor,
        Cluster(tmp_path / "cluster", upstreams=[doomed.address, survivor.address]) as cluster,
    ):
        with SteadyLoad(cluster.url, clients=10) as load:
            assert load.wait_for(60)
            assert doomed.process is not None
            killed_at = time.monotonic()
            doomed.process.kill()  # SIGKILL: no drain, connections cut mid-stream
            doomed.process.wait()
            assert load.wait_for(len(load.outcomes) + 120)
            assert load.stop(), "a client is stuck: some request never ended"
        outcomes = list(load.outcomes)
        access_log = (cluster.run_dir / "nginx-access.log").read_text()
    report("SIGKILL of one replica under 10 streaming clients", outcomes, access_log)
    failed = [o for o in outcomes if not o.ok]
    assert all(o.streaming and o.started < killed_at for o in failed)  # streams in flight at the kill
    assert len(failed) <= 10  # at most one request per client was in flight
    after = [o for o in outcomes if o.started > killed_at]
    assert len(after) >= 100 and all(o.ok for o in after)
    # requests nginx first sent to the dead replica went on to the other one
    assert f"upstream={doomed.address}, {survivor.address}" in access_log


def test_rolling_restart_under_load_fails_no_request(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        replicas = [stack.enter_context(Replica(**LOAD_REPLICA)) for _ in range(2)]
        addresses = [replica.address for replica in replicas]
        cluster = stack.enter_context(Cluster(tmp_path / "cluster", upstreams=addresses))
        load = stack.enter_context(SteadyLoad(cluster.url, clients=10))
        assert load.wait_for(40)
        for index, old in enumerate(replicas):
            assert old.stop() in (0, -signal.SIGTERM)  # SIGTERM: drains, then exits
            replicas[index] = stack.enter_context(Replica(port=old.port, **LOAD_REPLICA))
            assert load.wait_for(len(load.outcomes) + 60)  # the restarted replica takes load again
        assert load.stop(), "a client is stuck: some request never ended"
        access_log = (cluster.run_dir / "nginx-access.log").read_text()
    outcomes = list(load.outcomes)
    report("rolling restart of 2 replicas under 10 streaming clients", outcomes, access_log)
    assert [o.error for o in outcomes if not o.ok] == []
    assert len(outcomes) >= 160
    served = {address: access_log.count(f"upstream={address} ") for address in addresses}
    assert all(count > 0 for count in served.values())
