"""A server subprocess whose stderr (JSON log lines) is read as it is written: the pipe never fills
up under load, and tests can wait for a log record instead of sleeping."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from tests._live import ServerProcess


class LoggedServer(ServerProcess):
    """``ServerProcess`` plus its log: ``records`` (parsed JSON lines) and ``raw`` (every line)."""

    def __init__(self, **environment: str) -> None:
        super().__init__(**environment)
        self.raw: list[str] = []
        self._changed = threading.Condition()
        self._reader: threading.Thread | None = None

    def __enter__(self) -> LoggedServer:
        super().__enter__()
        assert self.process is not None and self.process.stderr is not None
        self._reader = threading.Thread(target=self._read, args=(self.process.stderr,), daemon=True)
        self._reader.start()
        return self

    def _read(self, stream: Any) -> None:
        for line in stream:
            with self._changed:
                self.raw.append(line.rstrip("\n"))
                self._changed.notify_all()

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every log line so far, parsed (a line that is not JSON fails the test here)."""
        with self._changed:
            return [json.loads(line) for line in self.raw if line]

    def wait_for(
        self, matches: Callable[[dict[str, Any]], bool], count: int = 1, timeout: float = 30
    ) -> bool:
        """Block until ``count`` records match (True) or ``timeout`` seconds pass (False)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while sum(1 for line in self.raw if line and matches(json.loads(line))) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def stop(self, timeout: float = 30) -> int:
        code = super().stop(timeout)
        if self._reader is not None:
            self._reader.join(10)  # EOF follows the exit; join before the pipe is closed
        return code

    def access_records(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r["logger"] == "liuyi.access"]
