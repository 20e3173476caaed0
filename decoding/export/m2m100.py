from __future__ import annotations

from pathlib import Path


def convert(source: Path, output_dir: Path, **kwargs: object) -> Path:
    raise ValueError("not yet")
