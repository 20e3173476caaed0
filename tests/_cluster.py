"""Test helpers for the deployment tests: ``deploy/local-cluster.sh`` as a child process (nginx in
front of replicas, with or without the replicas and redis it starts itself) and a steady load of
streaming clients that records how every request ended.

Every process started here is stopped in ``__exit__``, and a cluster's processes are checked to be
gone afterwards: a test that leaves nginx or a replica running fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests._live import ServerProcess, require_binary

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "deploy" / "local-cluster.sh"
GOLDEN = json.loads((Path(__file__).parent / "data" / "cn2en_golden.json").read_text(encoding="utf-8"))


def free_port_block(size: int) -> int:
    """A port P such that P ... P+size-1 are all free on 127.0.0.1 right now."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + size >= 65535:
            continue
        sockets: list[socket.socket] = []
        try:
            for offset in range(1, size):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", base + offset))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError("no block of free ports")


def nginx_binary() -> str:
    """Debian installs nginx in /usr/sbin, which is not on every PATH (local-cluster.sh looks there too)."""
    found = shutil.which("nginx")
    if found is None and Path("/usr/sbin/nginx").exists():
        found = "/usr/sbin/nginx"
    return found or require_binary("nginx")


def started_at(pid: int) -> str | None:
    """The kernel's start time of process ``pid`` (None: gone, or exited and not yet reaped).

    Comparing start times tells "still running" apart from "the pid now belongs to someone else"."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if fields[0] == "Z" else fields[19]


def alive(pid: int, started: str | None = None) -> bool:
    """Whether ``pid`` runs (and, given ``started``, is still the process that started then)."""
    now = started_at(pid)
    return now is not None and (started is None or now == started)


class Cluster:
    """``bash deploy/local-cluster.sh`` with its own run directory and free loopback ports.

    ``upstreams`` given: only nginx, in front of replicas the test runs itself. Otherwise the
    script starts ``replicas`` replicas and a redis-server too. ``stop_signal`` is how the test
    ends it (SIGINT is what Ctrl-C sends).
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        replicas: int = 2,
        upstreams: Sequence[str] = (),
        trust_forwarded_for: str | None = None,
        environment: Mapping[str, str] | None = None,
        stop_signal: int = signal.SIGTERM,
    ) -> None:
        nginx_binary()
        if not upstreams:
            require_binary("redis-server")
        self.run_dir = run_dir
        self.port = free_port_block(replicas + 2)
        self.stop_signal = stop_signal
        self.command = ["bash", str(SCRIPT), "--port", str(self.port), "--run-dir", str(run_dir)]
        if upstreams:
            self.command += [arg for upstream in upstreams for arg in ("--upstream", upstream)]
        else:
            self.command += ["--replicas", str(replicas)]
        if trust_forwarded_for:
            self.command += ["--trust-forwarded-for", trust_forwarded_for]
        # the replicas run the `liuyi` of the interpreter running the tests
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        self.env = {**os.environ, "PATH": path, **(environment or {})}
        self.process: subprocess.Popen[bytes] | None = None
        self.info: dict[str, str] = {}
        self._started: dict[str, str | None] = {}
        self.returncode: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def output(self) -> str:
        """What the script printed (stdout and stderr)."""
        path = self.run_dir / "cluster.out"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def pids(self) -> dict[str, int]:
        return {name: int(value) for name, value in self.info.items() if name.endswith("_PID")}

    def still_running(self) -> list[str]:
        """Names (REPLICA_1_PID, NGINX_PID, ...) of the cluster's processes that still run."""
        return [name for name, pid in self.pids().items() if alive(pid, self._started.get(name))]

    def __enter__(self) -> Cluster:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with (self.run_dir / "cluster.out").open("wb") as out:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        env_file = self.run_dir / "cluster.env"
        deadline = time.monotonic() + 90
        while not env_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"local-cluster.sh did not come up:\n{self.output}")
            time.sleep(0.05)  # polling for a file another process writes when it is ready
        lines = env_file.read_text(encoding="utf-8").splitlines()
        self.info = dict(line.split("=", 1) for line in lines if "=" in line)
        self._started = {name: started_at(pid) for name, pid in self.pids().items()}
        return self

    def stop(self) -> int:
        """Signal the script and wait for it; its return code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(self.stop_signal)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.returncode = self.process.returncode
        return self.returncode

    def __exit__(self, *exc: object) -> None:
        if self.process is None:
            return
        self.stop()
        leftovers = self.still_running()
        for name in leftovers:  # never leave a process behind, even when the script failed to
            os.kill(self.pids()[name], signal.SIGKILL)
        assert not leftovers, f"local-cluster.sh left running: {leftovers}\n{self.output}"


@dataclass(frozen=True)
class Outcome:
    """How one request of the load ended."""

    started: float  # time.monotonic() when it was sent
    ended: float
    ok: bool  # 200, a complete stream ending in `done`
    streaming: bool  # the response had begun (status 200 received)
    error: str  # what went wrong ("" when ok)


class SteadyLoad:
    """``clients`` threads, each streaming one translation after another through ``url`` until
    stopped (or ``max_each`` requests): a bounded, steady load whose every request is recorded."""

    def __init__(self, url: str, *, clients: int = 10, max_each: int = 400, timeout: float = 20) -> None:
        self.url = url
        self.max_each = max_each
        self.timeout = timeout
        self.outcomes: list[Outcome] = []
        self._lock = threading.Lock()
        self._progress = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)
        ]

    def __enter__(self) -> SteadyLoad:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> bool:
        """Stop sending and wait for the requests in flight; False if a client is still stuck."""
        self._stop.set()
        deadline = time.monotonic() + self.timeout + 10
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def wait_for(self, completed: int, timeout: float = 60) -> bool:
        """Block until at least ``completed`` requests have ended (however they ended)."""
        with self._progress:
            return self._progress.wait_for(lambda: len(self.outcomes) >= completed, timeout)

    def _client(self, index: int) -> None:
        with httpx.Client(timeout=self.timeout) as client:
            for n in range(self.max_each):
                if self._stop.is_set():
                    return
                text = GOLDEN[(index * 37 + n) % len(GOLDEN)]["text"]
                outcome = self._one(client, text)
                with self._progress:
                    self.outcomes.append(outcome)
                    self._progress.notify_all()

    def _one(self, client: httpx.Client, text: str) -> Outcome:
        started = time.monotonic()
        streaming = False
        try:
            with client.stream("POST", f"{self.url}/v1/translate/stream", json={"text": text}) as response:
                if response.status_code != 200:
                    response.read()
                    error = f"status {response.status_code}: {response.text[:200]}"
                    return Outcome(started, time.monotonic(), False, False, error)
                streaming = True  # the answer has begun: from here on nginx cannot retry it
                last: dict[str, object] = {}
                for line in response.iter_lines():
                    last = json.loads(line)
                if last.get("type") != "done":
                    return Outcome(started, time.monotonic(), False, True, f"stream ended with {last}")
                return Outcome(started, time.monotonic(), True, True, "")
        except httpx.HTTPError as exc:
            return Outcome(started, time.monotonic(), False, streaming, f"{type(exc).__name__}: {exc}")


class Replica(ServerProcess):
    """A ``liuyi serve`` process; ``port`` given: on that port (a restarted replica keeps its address)."""

    def __init__(self, port: int | None = None, **environment: str) -> None:
        super().__init__(**environment)
        if port is not None:
            self.port = port
            self.env["LIUYI_PORT"] = str(port)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"
