"""Every benchmark script starts: its imports resolve and it explains itself (``--help``).

The benchmarks themselves are run by hand (they measure the machine); this keeps a refactor of
what they import from breaking them unnoticed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p.name for p in (ROOT / "bench").glob("[a-z]*.py"))


def test_the_benchmarks_are_all_here() -> None:
    assert {"engine.py", "load.py", "coldstart.py", "soak.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_script_starts_and_prints_its_usage(script: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage:"), result.stdout[:500]
