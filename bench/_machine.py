"""What a benchmark report must say about where it ran, and honest memory numbers.

Every report starts with :func:`machine_report`: the CPU model, the ISA features that change which
int8 kernels run (AVX2, AVX-512, VNNI, AMX), the core count and the engines' versions — a number
without its CPU means nothing here (the same code is 3x slower on an AVX2-only EPYC).

Peak memory: ``getrusage(RUSAGE_SELF).ru_maxrss`` is *not* used. On Linux a child's ``ru_maxrss``
starts from its parent's RSS at fork and survives ``exec``, so a worker started by an orchestrator
that had just built a model with torch reported the orchestrator's 2 GB. ``VmHWM`` in
``/proc/self/status`` belongs to the process's current address space, which ``exec`` replaces; and
:class:`RssSampler` cross-checks it from outside by polling ``VmRSS`` of the worker's pid.
"""

from __future__ import annotations

import os
import platform
import subprocess
import threading
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

FEATURES = {  # /proc/cpuinfo flag -> what it means for int8 matmuls
    "avx2": "AVX2",
    "fma": "FMA",
    "avx512f": "AVX-512F",
    "avx512bw": "AVX-512BW",
    "avx512_vnni": "AVX512-VNNI",
    "avx_vnni": "AVX-VNNI",
    "amx_tile": "AMX-TILE",
    "amx_int8": "AMX-INT8",
}
PACKAGES = ("onnxruntime", "ctranslate2", "torch", "transformers", "numpy")


def cpu_model() -> str:
    """The model name, with family/model numbers (VMs often say only "AMD EPYC")."""
    fields: dict[str, str] = {}
    for line in _cpuinfo().splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def cpu_features() -> list[str]:
    flags: set[str] = set()
    for line in _cpuinfo().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    return [name for flag, name in FEATURES.items() if flag in flags]


def machine_report() -> str:
    """One Markdown paragraph: CPU, ISA features, cores, memory, package versions."""
    versions = []
    for package in PACKAGES:
        try:
            versions.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            continue
    memory = _meminfo_gb()
    features = ", ".join(cpu_features()) or "none of " + ", ".join(FEATURES.values())
    return (
        f"Machine: **{cpu_model()}**, {os.cpu_count()} cores, {memory:.0f} GiB; ISA: {features}. "
        f"Python {platform.python_version()}; " + ", ".join(versions) + "."
    )


def peak_rss_mb(pid: int | str = "self") -> float:
    """Peak resident memory of a process's current address space (VmHWM), in MB."""
    return _status_kb(pid, "VmHWM") / 1024


class RssSampler:
    """Polls another process's VmRSS from outside (an independent check of its own VmHWM)."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid = pid
        self.peak_mb = 0.0
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.peak_mb = max(self.peak_mb, _status_kb(self.pid, "VmRSS") / 1024)
            except (OSError, ValueError):  # the process has exited
                return

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_mb


@dataclass(frozen=True)
class WorkerRun:
    returncode: int
    stdout: str
    stderr: str
    sampled_rss_mb: float  # the worker's peak VmRSS, polled from outside


def run_sampled(command: list[str], *, stderr: int | None = subprocess.PIPE, **popen: Any) -> WorkerRun:
    """Run a benchmark worker to its end while :class:`RssSampler` polls its memory (``stderr``:
    captured, or ``None`` to let the worker's own go through)."""
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, **popen) as worker:
        sampler = RssSampler(worker.pid)
        stdout, captured = worker.communicate()
        sampled = sampler.stop()
    return WorkerRun(worker.returncode, stdout, captured or "", sampled)


def _status_kb(pid: int | str, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise ValueError(f"{field} not in /proc/{pid}/status")


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def _meminfo_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return 0.0
