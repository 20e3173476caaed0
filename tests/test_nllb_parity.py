"""NLLB-200 (M2M100 architecture), converted torch-free, agrees with transformers in both directions
— logits, then greedy ids, then text — and one bundle serves zh->en and en->zh together."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from decoding import (
    BatchScheduler,
    Bundle,
    DecodeOptions,
    LoadOptions,
    RuntimeOptions,
    Translation,
    load_bundle,
)
from decoding._registry import ModelRegistry
from decoding.export import convert_checkpoint
from tests import _parity
from tests.test_marian_parity import INPUTS
from tests.test_scheduler import Collector

CODES = {"zh": "zho_Hans", "en": "eng_Latn"}
DIRECTIONS = ("zh-en", "en-zh")


@pytest.fixture(scope="module")
def nllb_bundle(tiny_nllb_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    out = convert_checkpoint(tiny_nllb_dir, tmp_path_factory.mktemp("bundles") / "nllb")
    return load_bundle(out, options=LoadOptions(runtime=RuntimeOptions(intra_op_num_threads=1)))


@pytest.fixture(scope="module")
def reference(hf_nllb: tuple[Any, Any]) -> _parity.MultilingualReference:
    model, tokenizer = hf_nllb
    return _parity.MultilingualReference(
        model,
        tokenizer,
        src_lang=CODES.__getitem__,
        language_id=lambda lang: tokenizer.convert_tokens_to_ids(CODES[lang]),
    )


def test_one_bundle_lists_both_directions_and_their_language_tokens(
    nllb_bundle: Bundle, hf_nllb: tuple[Any, Any]
) -> None:
    manifest = nllb_bundle.manifest
    assert (manifest.family, manifest.served_directions, manifest.direction) == (
        "m2m100",
        DIRECTIONS,
        "zh-en",
    )
    ids = {lang: hf_nllb[1].convert_tokens_to_ids(code) for lang, code in CODES.items()}
    assert manifest.generation.forced_first_tokens == ids
    assert manifest.tokenizer.options["language_codes"] == ids


def test_registry_routes_both_directions_to_the_one_bundle(nllb_bundle: Bundle) -> None:
    registry = ModelRegistry([nllb_bundle])
    assert registry.bundles == [nllb_bundle]
    assert [b.model_id for b in registry.routes] == [f"{nllb_bundle.name}-{d}" for d in DIRECTIONS]
    en_zh = registry.resolve("en", "zh", "Hello.")
    assert (en_zh.direction, en_zh.name, en_zh.graphs) == ("en-zh", nllb_bundle.name, nllb_bundle.graphs)
    assert registry.resolve("auto", None, "你好").direction == "zh-en"


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_tokenizer_encodes_like_transformers(
    nllb_bundle: Bundle, reference: _parity.MultilingualReference, direction: str
) -> None:
    tokenizer = nllb_bundle.for_direction(direction).tokenizer
    for text in INPUTS:
        assert tokenizer.encode(text).ids == reference.encoded(direction, text).input_ids[0].tolist(), text


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("text", INPUTS[::5])
def test_step_logits_allclose_to_transformers(
    nllb_bundle: Bundle, reference: _parity.MultilingualReference, direction: str, text: str
) -> None:
    _parity.assert_step_logits_match(nllb_bundle, reference, direction, text)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("text", INPUTS)
def test_greedy_ids_and_text_equal_generate_with_forced_language(
    nllb_bundle: Bundle, reference: _parity.MultilingualReference, direction: str, text: str
) -> None:
    _parity.assert_greedy_matches(nllb_bundle, reference, direction, text)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_parity_inputs_cover_both_eos_and_length_limit(nllb_bundle: Bundle, direction: str) -> None:
    _parity.assert_inputs_end_both_ways(nllb_bundle.for_direction(direction), INPUTS)


def test_rows_of_different_target_languages_share_one_batch(nllb_bundle: Bundle) -> None:
    scheduler = BatchScheduler(nllb_bundle, max_batch_size=8)
    try:
        options = DecodeOptions(max_new_tokens=12)
        jobs = [(DIRECTIONS[i % 2], INPUTS[i]) for i in range(8)]
        collectors = []
        for direction, text in jobs:
            collectors.append(Collector())
            scheduler.submit(
                Translation(nllb_bundle.for_direction(direction), text, options=options), collectors[-1]
            )
        for (direction, text), collector in zip(jobs, collectors, strict=True):
            alone = nllb_bundle.for_direction(direction).translate(text, options=options)
            assert collector.result().segments == alone.segments
    finally:
        scheduler.close()


def test_int8_bundle_keeps_both_directions(tiny_nllb_dir: Path, tmp_path: Path, nllb_bundle: Bundle) -> None:
    bundle = load_bundle(convert_checkpoint(tiny_nllb_dir, tmp_path / "int8", int8=True))
    assert bundle.manifest.quantization == "int8"
    for direction in DIRECTIONS:
        tokens = bundle.for_direction(direction).translate("你好，世界。").segments[0].token_ids
        assert tokens[0] == nllb_bundle.manifest.generation.forced_first_tokens[direction[-2:]]


def test_one_direction_only_when_asked(tiny_nllb_dir: Path, tmp_path: Path) -> None:
    manifest = load_bundle(convert_checkpoint(tiny_nllb_dir, tmp_path / "en-zh", source_lang="en")).manifest
    assert (manifest.served_directions, manifest.directions) == (("en-zh",), ())
