"""Test helpers: a real uvicorn server on 127.0.0.1, and a gate that holds decoder steps.

``LiveServer`` runs uvicorn in a thread of the test process, so tests reach it through a real
socket (curl, browsers, official client libraries) while still being able to hold the decoder
with a ``StepGate``. Ordering is proven by the gate, never by sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import httpx
import uvicorn

from decoding import Bundle
from server import Settings, create_app
from server._serving import PROTOCOL, ServerConfig


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LiveServer:
    """uvicorn serving ``create_app(settings, bundles=...)`` on a free loopback port."""

    def __init__(self, settings: Settings, bundles: Sequence[Bundle] | None = None) -> None:
        self.port = free_port()
        self.settings = Settings(**{**settings.__dict__, "host": "127.0.0.1", "port": self.port})
        self.app = create_app(self.settings, bundles=bundles)
        config = ServerConfig(  # liuyi's own connection handling (header and keep-alive timeouts)
            self.app,
            header_timeout=self.settings.header_timeout,
            http=PROTOCOL,
            timeout_keep_alive=self.settings.keep_alive_timeout,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
            ws="none",
            timeout_graceful_shutdown=2,
        )
        self.server = uvicorn.Server(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._serve, name="uvicorn", daemon=True)

    def _serve(self) -> None:
        """``uvicorn.Server.run``, keeping the loop so :meth:`call_in_loop` can reach it."""
        with asyncio.Runner(loop_factory=self.server.config.get_loop_factory()) as runner:
            self._loop = runner.get_loop()
            runner.run(self.server.serve())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)  # polling a flag that uvicorn sets, not synchronising with the test
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(15)

    @property
    def state(self) -> Any:
        """app.state: service, metrics, lifecycle (for assertions on the server's side)."""
        return self.app.state

    def call_in_loop(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` on the server's event loop (e.g. ``lifecycle.begin_drain``)."""
        assert self._loop is not None, "the server is not running"
        self._loop.call_soon_threadsafe(fn, *args)


class StepGate:
    """Holds every decoder step of a bundle until the test lets it through.

    ``allow(n)`` lets n more steps run; ``open()`` lets everything run; ``wait_for_steps(n)`` blocks
    until n steps have *started* (i.e. the decoder is waiting at the gate or has passed it).
    """

    def __init__(self, bundle: Bundle) -> None:
        self._bundle = bundle
        self._original = bundle.graphs.run_bound
        self._permits = threading.Semaphore(0)
        self._opened = threading.Event()
        self._started = 0
        self._cond = threading.Condition()

    def run_bound(self, binding: Any) -> Any:
        with self._cond:
            self._started += 1
            self._cond.notify_all()
        if not self._opened.is_set():
            while not self._permits.acquire(timeout=0.05):
                if self._opened.is_set():
                    break
        return self._original(binding)

    @property
    def started(self) -> int:
        return self._started

    def allow(self, steps: int = 1) -> None:
        for _ in range(steps):
            self._permits.release()

    def open(self) -> None:
        self._opened.set()

    def wait_for_steps(self, count: int, timeout: float = 30.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._started >= count, timeout)


@contextlib.contextmanager
def gated(bundle: Bundle) -> Iterator[StepGate]:
    """Install a gate on ``bundle`` for the duration of a test; always removed, always opened."""
    gate = StepGate(bundle)
    bundle.graphs.run_bound = gate.run_bound  # type: ignore[method-assign]
    try:
        yield gate
    finally:
        gate.open()
        del bundle.graphs.run_bound  # back to the class method


@contextlib.asynccontextmanager
async def asgi_client(settings: Settings, bundles: Sequence[Bundle]) -> AsyncIterator[httpx.AsyncClient]:
    """The app in process, lifespan running, behind httpx's ASGI transport (which buffers bodies:
    good for content, useless for timing or disconnects)."""
    app = create_app(settings, bundles=bundles)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://liuyi") as client,
    ):
        yield client


def require_binary(name: str) -> str:
    """Path of a program the test drives for real. Missing: skip locally, fail under CI=true (CI
    installs everything in tests/apt-packages.txt, so a missing program there is a real failure)."""
    import os
    import shutil

    import pytest

    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (tests/run.sh installs it from tests/apt-packages.txt)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


class ServerProcess:
    """``python -m server serve`` in a subprocess on a free port, configured through LIUYI_* variables."""

    def __init__(self, **environment: str) -> None:
        import os

        self.port = free_port()
        self.env = {**os.environ, "LIUYI_PORT": str(self.port), "LIUYI_LOG_LEVEL": "info", **environment}
        self.process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServerProcess:
        import sys

        self.process = subprocess.Popen(
            [sys.executable, "-m", "server", "serve"],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not self.ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"server did not start: {self.process.stderr.read() if self.process.stderr else ''}"
                )
            time.sleep(0.05)  # polling readiness of another process
        return self

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, timeout: float = 30) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __exit__(self, *exc: object) -> None:
        self.stop()
        assert self.process is not None
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
