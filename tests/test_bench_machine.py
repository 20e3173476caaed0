"""bench/_machine.py: benchmark reports name their CPU, and peak memory is the measured process's own."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

from bench._machine import FEATURES, RssSampler, cpu_features, machine_report

ROOT = Path(__file__).resolve().parent.parent
CHILD = (
    "import json, resource, sys; sys.path.insert(0, sys.argv[1]); from bench._machine import peak_rss_mb; "
    "print(json.dumps([peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))"
)


def test_the_report_names_the_cpu_its_isa_features_and_versions() -> None:
    report = machine_report()
    assert report.startswith("Machine: **") and "cores" in report and "onnxruntime" in report
    assert set(cpu_features()) <= set(FEATURES.values())
    assert all(feature in report for feature in cpu_features())


def test_a_worker_s_peak_memory_does_not_include_its_parent_s() -> None:
    ballast = bytearray(400 << 20)  # the orchestrator holds 400 MB (as it did after building models)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page so it is resident
    parent_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ROOT)], stdout=subprocess.PIPE, text=True
    ) as child:
        sampler = RssSampler(child.pid, interval=0.005)
        own_peak, maxrss = json.loads(child.communicate()[0])
        sampled = sampler.stop()
    del ballast
    assert parent_peak > 400
    assert own_peak < 100, "VmHWM counts only the child's own address space"
    assert sampled <= own_peak * 1.1  # the outside view never sees more than the child's peak
    assert maxrss > 400, "why ru_maxrss is not used: getrusage(2) keeps it across fork and execve"
