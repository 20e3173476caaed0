"""bench/tokenize_cost.py measures what the event loop pays for planning, on texts that are real work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.tokenize_cost import LENGTHS, text_of
from decoding import Bundle, Translation

ROOT = Path(__file__).resolve().parent.parent


def test_its_texts_have_the_asked_length_and_no_sentence_twice(default_bundle: Bundle) -> None:
    """Planning encodes each distinct sentence once: repeated sentences would measure nothing."""
    for length in LENGTHS:
        text = text_of(length)
        assert len(text) == length
        pieces = [segment.source.text for segment in Translation(default_bundle, text).segments]
        assert len(set(pieces)) == len(pieces)
    assert len(Translation(default_bundle, text_of(5000)).segments) > 200


def test_it_prints_the_hop_and_one_row_per_length() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "tokenize_cost.py"), "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.startswith("Machine: **") and "thread hop" in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [int(row.split("|")[1]) for row in rows] == list(LENGTHS)
