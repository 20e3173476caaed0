"""The bundled default model reproduces the cn2en reference implementation token for token.

tests/data/cn2en_golden.json was written by tests/data/make_cn2en_golden.py, which runs the
package's own PyTorch ``model.py``; here the ONNX bundle runs through liuyi's public stream API.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decoding import Bundle, Delta, Result

GOLDEN: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "cn2en_golden.json").read_text(encoding="utf-8")
)


def test_golden_file_is_varied_enough() -> None:
    assert len(GOLDEN) >= 50
    assert len({record["text"] for record in GOLDEN}) == len(GOLDEN)


@pytest.mark.parametrize("record", GOLDEN, ids=[r["text"] for r in GOLDEN])
def test_token_ids_equal_reference(default_bundle: Bundle, record: dict[str, Any]) -> None:
    events = list(default_bundle.stream(record["text"]))
    result = events[-1]
    assert isinstance(result, Result)
    (segment,) = result.segments
    eos = default_bundle.manifest.tokens.eos
    assert list(segment.token_ids) == [*record["target_ids"], eos]
    assert "".join(e.text for e in events if isinstance(e, Delta)) == result.translation


def test_default_model_renders_clean_english(default_bundle: Bundle) -> None:
    assert default_bundle.translate("我很好。").translation == "I'm very well."
    assert default_bundle.translate("你会说英语吗？").translation == "Do you speak English?"


def test_unknown_characters_are_reported(default_bundle: Bundle) -> None:
    result = default_bundle.translate("我很好😀😀。")
    assert result.unknown_source_chars == 2
