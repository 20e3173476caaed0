"""What ``liuyi pull`` shows while it works: stage lines and download bytes, on a terminal only.

huggingface_hub reports bytes through a tqdm-like class it instantiates per file; ``bar_class``
builds one bound to this reporter, so the hub's own bars (and their log-level rules) stay out.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, TextIO


class Progress:
    """Writes to ``stream`` when it is a terminal (or when forced); silent otherwise."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream  # None: quiet

    @classmethod
    def for_terminal(cls, stream: TextIO) -> Progress:
        return cls(stream if stream.isatty() else None)

    def stage(self, text: str) -> None:
        if self.stream is not None:
            self.stream.write(f"liuyi: {text}\n")
            self.stream.flush()

    def bar_class(self, name: str) -> type[Any]:
        """A class huggingface_hub can use as ``tqdm_class`` for the download of file ``name``."""
        return _bar_class(self.stream, name)


def human_bytes(count: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(count) < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} GB"


def _bar_class(stream: TextIO | None, name: str) -> type[Any]:
    class ByteBar:
        """One file's download: redraws ``name  done / total  pct%`` in place, once per percent."""

        def __init__(self, *, total: int | None = None, initial: int = 0, **_: Any) -> None:
            self.total, self.n = total, initial  # huggingface_hub's ``desc`` is the URL: not shown
            self._shown = -1

        def __enter__(self) -> ByteBar:
            self._draw(force=True)
            return self

        def __exit__(
            self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
        ) -> None:
            self.close()

        def update(self, n: int = 1) -> None:
            self.n += n
            self._draw(force=False)

        def close(self) -> None:
            if stream is not None and self._shown != -2:
                stream.write("\n")
                stream.flush()
                self._shown = -2

        def _draw(self, *, force: bool) -> None:
            if stream is None or self._shown == -2:
                return
            percent = int(100 * self.n / self.total) if self.total else 0
            if percent == self._shown and not force:
                return
            self._shown = percent
            total = f" / {human_bytes(self.total)}  {percent:3d}%" if self.total else ""
            stream.write(f"\rliuyi: downloading {name}  {human_bytes(self.n)}{total}")
            stream.flush()

    return ByteBar
