"""Marian with separate source/target vocabularies (opus-mt-tc-big/-bible), converted torch-free,
agrees with transformers: logits, then greedy ids, then text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from decoding import Bundle, DecodeOptions, LoadOptions, RuntimeOptions, load_bundle
from decoding.export import convert_checkpoint
from tests import _parity
from tests.test_marian_parity import INPUTS

LANGUAGE_TOKEN = ">>eng<<"  # what a tc-big model wants before the source to write English


@pytest.fixture(scope="module")
def tc_big_bundle(tiny_tc_big_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    out = convert_checkpoint(tiny_tc_big_dir, tmp_path_factory.mktemp("bundles") / "tc-big")
    return load_bundle(out, options=LoadOptions(runtime=RuntimeOptions(intra_op_num_threads=1)))


def encoded(hf: tuple[Any, Any], text: str) -> Any:
    return hf[1](LANGUAGE_TOKEN + text, return_tensors="pt")


def test_bundle_keeps_both_vocabularies_and_the_target_language_token(tc_big_bundle: Bundle) -> None:
    spec = tc_big_bundle.manifest.tokenizer
    assert spec.files["target_vocab"] == "target_vocab.json"
    assert spec.options == {"decode_spm": "target", "target_language_code": LANGUAGE_TOKEN}


def test_tokenizer_encodes_like_transformers(tc_big_bundle: Bundle, hf_tc_big: tuple[Any, Any]) -> None:
    for text in INPUTS:
        assert tc_big_bundle.tokenizer.encode(text).ids == encoded(hf_tc_big, text).input_ids[0].tolist()


@pytest.mark.parametrize("text", INPUTS[::4])
def test_step_logits_allclose_to_transformers(
    tc_big_bundle: Bundle, hf_tc_big: tuple[Any, Any], text: str
) -> None:
    model, source = hf_tc_big[0], encoded(hf_tc_big, text)
    targets = _parity.reference_ids(model, source, max_new_tokens=12)
    start = tc_big_bundle.manifest.tokens.decoder_start
    _parity.assert_logits_close(
        _parity.engine_logits(tc_big_bundle, source.input_ids[0].tolist(), start, targets),
        _parity.reference_logits(model, source, start, targets),
    )


@pytest.mark.parametrize("text", INPUTS)
def test_greedy_ids_and_text_equal_generate(
    tc_big_bundle: Bundle, hf_tc_big: tuple[Any, Any], text: str
) -> None:
    want = _parity.reference_ids(hf_tc_big[0], encoded(hf_tc_big, text), max_new_tokens=24)
    result = tc_big_bundle.translate(text, options=DecodeOptions(max_new_tokens=24))
    assert list(result.segments[0].token_ids) == want
    assert result.translation == hf_tc_big[1].decode(want, skip_special_tokens=True)


def test_parity_inputs_cover_both_eos_and_length_limit(tc_big_bundle: Bundle) -> None:
    options = DecodeOptions(max_new_tokens=24)
    assert {tc_big_bundle.translate(t, options=options).finish_reason for t in INPUTS} == {"stop", "length"}
