"""The hand-written ONNX greedy decoder agrees with transformers' own generate(), token for token."""

from __future__ import annotations

from typing import Any

import pytest

from decoding import Bundle, DecodeOptions, Delta, Result
from decoding.export.synthetic import CORPUS
from tests import _parity
from tests._parity import engine_ids

INPUTS = [*CORPUS[:26], "😀😀 龘靐 naïve", "1234567890", "a", "？！"]


def reference_ids(hf: tuple[Any, Any], text: str, **generate_kwargs: Any) -> list[int]:
    model, tokenizer = hf
    return _parity.reference_ids(model, tokenizer(text, return_tensors="pt"), **generate_kwargs)


@pytest.mark.parametrize("text", INPUTS[::3])
def test_step_logits_allclose_to_transformers(
    tiny_marian_bundle: Bundle, hf_tiny: tuple[Any, Any], text: str
) -> None:
    model, tokenizer = hf_tiny
    encoded = tokenizer(text, return_tensors="pt")
    targets = reference_ids(hf_tiny, text, max_new_tokens=12)
    start = tiny_marian_bundle.manifest.tokens.decoder_start
    _parity.assert_logits_close(
        _parity.engine_logits(tiny_marian_bundle, encoded.input_ids[0].tolist(), start, targets),
        _parity.reference_logits(model, encoded, start, targets),
    )


def test_tokenizer_encodes_like_transformers(tiny_marian_bundle: Bundle, hf_tiny: tuple[Any, Any]) -> None:
    for text in INPUTS:
        assert tiny_marian_bundle.tokenizer.encode(text).ids == hf_tiny[1](text).input_ids, text


@pytest.mark.parametrize("text", INPUTS)
def test_greedy_ids_equal_generate(tiny_marian_bundle: Bundle, hf_tiny: tuple[Any, Any], text: str) -> None:
    assert engine_ids(tiny_marian_bundle, text, DecodeOptions(max_new_tokens=24)) == reference_ids(
        hf_tiny, text, max_new_tokens=24
    )


def test_parity_inputs_cover_both_eos_and_length_limit(tiny_marian_bundle: Bundle) -> None:
    reasons = {
        tiny_marian_bundle.translate(t, options=DecodeOptions(max_new_tokens=24)).finish_reason
        for t in INPUTS
    }
    assert reasons == {"stop", "length"}


@pytest.mark.parametrize("text", INPUTS[:8])
def test_min_new_tokens_matches_generate(
    tiny_marian_bundle: Bundle, hf_tiny: tuple[Any, Any], text: str
) -> None:
    options = DecodeOptions(max_new_tokens=20, min_new_tokens=12)
    assert engine_ids(tiny_marian_bundle, text, options) == reference_ids(
        hf_tiny, text, max_new_tokens=20, min_new_tokens=12
    )


@pytest.mark.parametrize("text", INPUTS[:8])
def test_repetition_guard_matches_no_repeat_ngram(
    tiny_marian_bundle: Bundle, hf_tiny: tuple[Any, Any], text: str
) -> None:
    options = DecodeOptions(max_new_tokens=20, no_repeat_ngram_size=2)
    assert engine_ids(tiny_marian_bundle, text, options) == reference_ids(
        hf_tiny, text, max_new_tokens=20, no_repeat_ngram_size=2
    )


@pytest.mark.parametrize("text", INPUTS)
def test_streamed_text_equals_transformers_decode(
    tiny_marian_bundle: Bundle, hf_tiny: tuple[Any, Any], text: str
) -> None:
    events = list(tiny_marian_bundle.stream(text, options=DecodeOptions(max_new_tokens=24)))
    result = events[-1]
    assert isinstance(result, Result)
    reference = hf_tiny[1].decode(reference_ids(hf_tiny, text, max_new_tokens=24), skip_special_tokens=True)
    assert "".join(e.text for e in events if isinstance(e, Delta)) == result.translation == reference
