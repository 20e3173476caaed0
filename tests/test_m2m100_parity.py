"""Plain M2M100 checkpoints (facebook/m2m100_418M's files: vocab.json, ``__zh__`` language tokens),
converted torch-free, agree with transformers' M2M100Tokenizer and greedy ``generate()`` in both
directions — ids, logits, generated ids, text — and one bundle serves zh->en and en->zh."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from decoding import Bundle, LoadOptions, RuntimeOptions, load_bundle
from decoding.export import convert_checkpoint
from decoding.export._language_tokens import M2M100_LANGUAGE_LISTS
from tests import _parity
from tests.test_marian_parity import INPUTS

DIRECTIONS = ("zh-en", "en-zh")
# a character the SentencePiece model never saw, and text around it
UNKNOWN = ["㉿", "Tea ㉿ 茶", *INPUTS]


@pytest.fixture(scope="module")
def m2m100_bundle(tiny_m2m100_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    out = convert_checkpoint(tiny_m2m100_dir, tmp_path_factory.mktemp("bundles") / "m2m100")
    return load_bundle(out, options=LoadOptions(runtime=RuntimeOptions(intra_op_num_threads=1)))


@pytest.fixture(scope="module")
def reference(hf_m2m100: tuple[Any, Any]) -> _parity.MultilingualReference:
    model, tokenizer = hf_m2m100  # M2M100Tokenizer's src_lang is the code itself: "zh", "en"
    return _parity.MultilingualReference(model, tokenizer, src_lang=str, language_id=tokenizer.get_lang_id)


def test_language_lists_are_transformers_own() -> None:
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    assert {name: list(codes) for name, codes in M2M100_LANGUAGE_LISTS.items()} == FAIRSEQ_LANGUAGE_CODES


def test_one_bundle_lists_both_directions_and_their_language_tokens(
    m2m100_bundle: Bundle, hf_m2m100: tuple[Any, Any]
) -> None:
    manifest = m2m100_bundle.manifest
    assert (manifest.family, manifest.served_directions) == ("m2m100", DIRECTIONS)
    ids = {lang: hf_m2m100[1].get_lang_id(lang) for lang in ("zh", "en")}
    assert ids == {lang: hf_m2m100[1].convert_tokens_to_ids(f"__{lang}__") for lang in ids}
    assert manifest.generation.forced_first_tokens == manifest.tokenizer.options["language_codes"] == ids
    assert manifest.tokenizer.kind == "m2m100-sentencepiece"
    assert set(manifest.tokenizer.files.values()) == {"sentencepiece.bpe.model", "vocab.json"}
    assert manifest.license == "mit"


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_tokenizer_encodes_like_transformers_unknown_pieces_included(
    m2m100_bundle: Bundle, reference: _parity.MultilingualReference, direction: str
) -> None:
    tokenizer = m2m100_bundle.for_direction(direction).tokenizer
    unk = reference.tokenizer.unk_token_id
    for text in UNKNOWN:
        assert tokenizer.encode(text).ids == reference.encoded(direction, text).input_ids[0].tolist(), text
    alone = tokenizer.encode("㉿")  # SentencePiece: "▁" (a piece), "㉿" (unknown)
    assert alone.ids[-2] == unk and alone.unknown_chars == 1
    # pieces SentencePiece knows but vocab.json lacks become <unk> too: some inputs have them
    assert any(unk in tokenizer.encode(text).ids and "㉿" not in text for text in UNKNOWN)


def test_language_tokens_typed_by_a_client_stay_text(
    m2m100_bundle: Bundle, reference: _parity.MultilingualReference
) -> None:
    """Deliberately unlike transformers (which matches ``__en__`` in the text as the language token):
    client text never steers the model, as with NLLB's codes."""
    text = "x __en__ y"
    languages = {reference.tokenizer.get_lang_id(code) for code in M2M100_LANGUAGE_LISTS["m2m100"]}
    ids = m2m100_bundle.for_direction("zh-en").tokenizer.encode(text).ids
    assert ids[0] == reference.language_id("zh") and not languages & set(ids[1:])
    assert reference.language_id("en") in reference.encoded("zh-en", text).input_ids[0].tolist()


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("text", INPUTS[::5])
def test_step_logits_allclose_to_transformers(
    m2m100_bundle: Bundle, reference: _parity.MultilingualReference, direction: str, text: str
) -> None:
    _parity.assert_step_logits_match(m2m100_bundle, reference, direction, text)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("text", INPUTS)
def test_greedy_ids_and_text_equal_generate_with_forced_language(
    m2m100_bundle: Bundle, reference: _parity.MultilingualReference, direction: str, text: str
) -> None:
    _parity.assert_greedy_matches(m2m100_bundle, reference, direction, text)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_parity_inputs_cover_both_eos_and_length_limit(m2m100_bundle: Bundle, direction: str) -> None:
    _parity.assert_inputs_end_both_ways(m2m100_bundle.for_direction(direction), INPUTS)


def test_decode_skips_language_tokens_and_writes_ids_without_a_piece_as_unk(
    m2m100_bundle: Bundle, hf_m2m100: tuple[Any, Any]
) -> None:
    """Language tokens anywhere are skipped; the made-up words after them (ids vocab.json lacks)
    decode to the text "<unk>", as transformers' decode writes them — incrementally too."""
    hf_tokenizer = hf_m2m100[1]
    tokenizer = m2m100_bundle.for_direction("zh-en").tokenizer
    pieces = hf_tokenizer("你好，世界。 Hello, world.").input_ids[1:-1]
    made_up = len(hf_tokenizer) + 2  # vocab.json, 100 language tokens, then 8 made-up words
    ids = [
        hf_tokenizer.get_lang_id("en"),
        *pieces[:3],
        made_up,
        *pieces[3:],
        hf_tokenizer.get_lang_id("fr"),
        made_up + 1,
        hf_tokenizer.unk_token_id,
        hf_tokenizer.eos_token_id,
    ]
    want = hf_tokenizer.decode(ids, skip_special_tokens=True)
    assert "<unk>" in want and "__" not in want
    assert tokenizer.decode(ids) == want
    decoder = tokenizer.incremental_decoder()
    assert "".join(decoder.decode(i) for i in ids) + decoder.flush() == want


def _copy(source: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "checkpoint"
    shutil.copytree(source, copy)
    return copy


def test_a_model_without_rows_for_the_language_tokens_is_refused(
    tiny_m2m100_dir: Path, tmp_path: Path
) -> None:
    checkpoint = _copy(tiny_m2m100_dir, tmp_path)
    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    vocab = json.loads((checkpoint / "vocab.json").read_text(encoding="utf-8"))
    config["vocab_size"] = len(vocab)  # SentencePiece pieces only: no __zh__, no __en__
    (checkpoint / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ValueError, match=r"beyond the model's vocabulary.*has no language tokens"):
        convert_checkpoint(checkpoint, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_with_neither_nllb_codes_nor_m2m100_tokens_is_refused(
    tiny_m2m100_dir: Path, tmp_path: Path
) -> None:
    checkpoint = _copy(tiny_m2m100_dir, tmp_path)
    (checkpoint / "vocab.json").unlink()
    with pytest.raises(ValueError, match=r"zho_Hans, eng_Latn .* no vocab\.json .*__zh__, __en__"):
        convert_checkpoint(checkpoint, tmp_path / "out")


def test_a_language_list_without_zh_is_refused(tiny_m2m100_dir: Path, tmp_path: Path) -> None:
    checkpoint = _copy(tiny_m2m100_dir, tmp_path)
    config = json.loads((checkpoint / "tokenizer_config.json").read_text(encoding="utf-8"))
    (checkpoint / "tokenizer_config.json").write_text(
        json.dumps({**config, "language_codes": "europe"}), encoding="utf-8"
    )
    with pytest.raises(ValueError, match="language list 'europe' is unknown"):
        convert_checkpoint(checkpoint, tmp_path / "out")
