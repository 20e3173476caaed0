"""WordVocabTokenizer: reference-exact encoding, clean English rendering, streaming == batch.

The golden file was written by the *reference* cn2en code (tests/data/make_cn2en_golden.py), so the
encode and greedy tests compare liuyi with the original implementation, not with itself.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoding import load_manifest
from decoding._errors import ManifestError
from decoding._manifest import SpecialTokens, TokenizerSpec
from decoding.tokenizers import WordVocabTokenizer, load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "decoding" / "models" / "cn2en-zh-en"
GOLDEN: list[dict[str, Any]] = json.loads((ROOT / "tests" / "data" / "cn2en_golden.json").read_text("utf-8"))
TOKENS = SpecialTokens(decoder_start=0, eos=1)
MANIFEST = load_manifest(BUNDLE)
TOKENIZER = WordVocabTokenizer.load(BUNDLE, MANIFEST.tokenizer, MANIFEST.tokens)
PLAIN = WordVocabTokenizer.load(
    BUNDLE,
    dataclasses.replace(MANIFEST.tokenizer, options={"normalize": "cn2en", "render": "plain"}),
    MANIFEST.tokens,
)
TARGET_WORDS: list[str] = json.loads((BUNDLE / "target_vocab.json").read_text("utf-8"))


def render(*words: str, cased: dict[str, str] | None = None) -> str:
    """Decode ``words`` with a tokenizer whose target vocabulary is exactly these words."""
    vocab = ["SOS", "EOS", *dict.fromkeys(words)]
    tokenizer = WordVocabTokenizer(
        source_words=["SOS", "EOS"], target_words=vocab, tokens=TOKENS, cased=cased
    )
    return tokenizer.decode([vocab.index(word, 2) for word in words])


def by_text(text: str) -> dict[str, Any]:
    return next(record for record in GOLDEN if record["text"] == text)


# --- encoding: exactly the reference's normalize + tensorsFromSentence ------------------------


def test_golden_set_is_large_and_varied() -> None:
    assert len(GOLDEN) >= 60
    assert any(record["source_ids"] == [1] for record in GOLDEN)  # nothing known: EOS alone


@pytest.mark.parametrize("record", GOLDEN, ids=[r["text"] for r in GOLDEN])
def test_encode_equals_reference_source_ids(record: dict[str, Any]) -> None:
    assert TOKENIZER.encode(record["text"]).ids == record["source_ids"]


@pytest.mark.parametrize(
    ("text", "unknown"),
    [
        ("我很好。", 0),
        ("我喜欢🍎。", 1),  # the emoji is a word of its own, not in the vocabulary
        ("hello，汤姆！", 5),  # the whole ASCII word "hello" is unknown and dropped
        ("鑫鑫在哪里？", 2),
        ("我\t很好。", 0),  # a tab is dropped too, but it is no lost text
        ("", 0),
    ],
)
def test_unknown_chars_counts_characters_of_dropped_words(text: str, unknown: int) -> None:
    assert TOKENIZER.encode(text).unknown_chars == unknown


def test_unknown_words_are_dropped_not_mapped_to_an_unk_id() -> None:
    assert TOKENIZER.encode("我🍎很好").ids == TOKENIZER.encode("我很好").ids


def test_empty_text_encodes_to_eos_only() -> None:
    assert TOKENIZER.encode("   ").ids == [1]


def test_special_placeholders_are_not_words() -> None:
    # the vocabulary lists "SOS"/"EOS" at ids 0/1, but they are never looked up (nor could be:
    # normalize lower-cases everything)
    assert TOKENIZER.encode("SOS EOS sos eos").ids == [1]


# --- rendering ---------------------------------------------------------------------------------


def test_plain_renderer_reproduces_reference_text_for_every_golden_record() -> None:
    for record in GOLDEN:
        assert PLAIN.decode(record["target_ids"]) == record["reference_text"], record["text"]


@pytest.mark.parametrize(
    ("text", "english"),
    [
        ("我很好。", "I'm very well."),
        ("你会说英语吗？", "Do you speak English?"),
        ("湯姆不在床上。", "Tom didn't go to bed."),
        ("我们走吧！", "Let's go!"),
        ("hello，汤姆！", "Tell Tom,!"),
    ],
)
def test_golden_translations_render_as_english(text: str, english: str) -> None:
    assert TOKENIZER.decode(by_text(text)["target_ids"]) == english


@pytest.mark.parametrize(
    ("words", "text"),
    [
        (("he", "is", "hard", ",", "isn't", "he", "?"), "He is hard, isn't he?"),
        (("wait", ":", "yes", ";", "no", "!"), "Wait: yes; no!"),
        (("up", "5", "0", "%"), "Up 50%"),
        (("the", "dog", "'s", "bone"), "The dog's bone"),
        (("it", "costs", "$", "1", "0", "0", "."), "It costs $100."),
        (("tom", "is", "1", "7", "."), "Tom is 17."),
        (("pi", "is", "3", ".", "1", "4"), "Pi is 3.14"),
        (("at", "7", ":", "3", "0"), "At 7:30"),
        (("the", "2", "1", "st", "century"), "The 21st century"),
        (("twenty", "-", "one"), "Twenty-one"),
        (("don", "’", "t"), "Don’t"),
        (("hello", "", "world", ""), "Hello world"),
        (("", "hello"), "Hello"),
    ],
)
def test_spacing_rules(words: tuple[str, ...], text: str) -> None:
    assert render(*words) == text


@pytest.mark.parametrize(
    ("words", "text"),
    [
        (("he", "said", ",", '"', "yes", '"', "."), 'He said, "yes".'),
        (("he", "said", ":", '"', "go", "!", '"'), 'He said: "go!"'),
        (('"', "a", '"', "and", '"', "b", '"'), '"A" and "b"'),
        (("she", "said", '"trust', "me", '"', "."), 'She said "trust me".'),
        (("he", "said", '"hi', "there", "old", 'old"', "."), 'He said "hi there old old".'),
    ],
)
def test_a_standalone_quote_opens_or_closes_by_parity(words: tuple[str, ...], text: str) -> None:
    assert render(*words) == text


@pytest.mark.parametrize(
    ("words", "text"),
    [
        (("hi", ".", "how", "are", "you", "?", "fine", "!", "bye"), "Hi. How are you? Fine! Bye"),
        (('"trust', "me", ".", '"'), '"Trust me."'),
        (("yes", ".", '"', "no", '"'), 'Yes. "No"'),
        (("1", "0", "people", "came", "."), "10 people came."),  # a number starts it: nothing to capitalize
        (("you", "and", "i", "."), "You and I."),
        (("i", "think", "i'm", "right", ",", "i'll", "see", "."), "I think I'm right, I'll see."),
        (("so", "i've", "said", "i'd", "go", "\"i'll"), "So I've said I'd go \"I'll"),
        (("it", "is", "ii", "it's", "in"), "It is ii it's in"),
    ],
)
def test_sentences_and_the_pronoun_i_are_capitalized(words: tuple[str, ...], text: str) -> None:
    assert render(*words) == text


def test_cased_words_keep_their_form_also_before_an_apostrophe() -> None:
    cased = {"tom": "Tom", "tv": "TV"}
    assert render("where", "is", "tom's", "tv", "?", cased=cased) == "Where is Tom's TV?"


def test_special_ids_are_skipped() -> None:
    golden = by_text("我很好。")["target_ids"]
    assert TOKENIZER.decode([0, *golden, 1]) == TOKENIZER.decode(golden) == "I'm very well."


def test_an_id_outside_the_vocabulary_is_an_error() -> None:
    with pytest.raises(ValueError, match="outside the target vocabulary"):
        TOKENIZER.decode([len(TARGET_WORDS)])
    with pytest.raises(ValueError, match="outside the target vocabulary"):
        TOKENIZER.incremental_decoder().decode(-1)


# --- streaming ------------------------------------------------------------------------------

# words the rules treat specially, so random sequences exercise every rule often
_TRICKY = [i for i, word in enumerate(TARGET_WORDS) if not word.isalpha() or word in ("i", "tom")]
_IDS = st.lists(st.one_of(st.sampled_from(_TRICKY), st.integers(0, len(TARGET_WORDS) - 1)), max_size=40)


@pytest.mark.parametrize("tokenizer", [TOKENIZER, PLAIN], ids=["english", "plain"])
@settings(max_examples=300, deadline=None)
@given(ids=_IDS)
def test_incremental_decoding_equals_decode(tokenizer: WordVocabTokenizer, ids: list[int]) -> None:
    decoder = tokenizer.incremental_decoder()
    streamed = "".join(decoder.decode(i) for i in ids) + decoder.flush()
    assert streamed == tokenizer.decode(ids)
    assert "\ufffd" not in streamed


@settings(max_examples=300, deadline=None)
@given(ids=st.lists(st.integers(2, len(TARGET_WORDS) - 1), max_size=40))
def test_plain_rendering_is_the_reference_join(ids: list[int]) -> None:
    assert PLAIN.decode(ids) == " ".join(TARGET_WORDS[i] for i in ids).strip()


def test_each_token_is_emitted_as_soon_as_it_arrives() -> None:
    decoder = TOKENIZER.incremental_decoder()
    pieces = [decoder.decode(i) for i in by_text("我不知道。")["target_ids"]]
    assert pieces == ["I", " don't", " know", "."]
    assert decoder.flush() == ""


# --- loading ------------------------------------------------------------------------------


def test_bundle_declares_a_word_vocab_tokenizer() -> None:
    assert MANIFEST.tokenizer.kind == "word-vocab"
    assert isinstance(load_tokenizer(BUNDLE, MANIFEST.tokenizer, MANIFEST.tokens), WordVocabTokenizer)


def test_unknown_normalization_is_a_manifest_error() -> None:
    spec = TokenizerSpec(
        kind="word-vocab", files=dict(MANIFEST.tokenizer.files), options={"normalize": "nfkc"}
    )
    with pytest.raises(ManifestError, match="normalize"):
        WordVocabTokenizer.load(BUNDLE, spec, TOKENS)


def test_a_vocabulary_that_is_not_a_list_of_words_is_a_manifest_error(tmp_path: Path) -> None:
    (tmp_path / "source.json").write_text('{"a": 2}', encoding="utf-8")
    (tmp_path / "target.json").write_text('["SOS", "EOS"]', encoding="utf-8")
    files = {"source_vocab": "source.json", "target_vocab": "target.json"}
    spec = TokenizerSpec(kind="word-vocab", files=files, options={"normalize": "cn2en"})
    with pytest.raises(ManifestError, match="list of strings"):
        WordVocabTokenizer.load(tmp_path, spec, TOKENS)


# --- the bundle end to end: tokenizer + ONNX graphs reproduce the reference -----------------


def _session(name: str) -> onnxruntime.InferenceSession:
    return onnxruntime.InferenceSession(str(BUNDLE / name), providers=["CPUExecutionProvider"])


def test_onnx_greedy_loop_reproduces_reference_target_ids_for_every_golden_sentence() -> None:
    encoder, decoder = _session("encoder.onnx"), _session("decoder.onnx")
    for record in GOLDEN:
        ids = np.array([TOKENIZER.encode(record["text"]).ids], dtype=np.int64)  # (1, S)
        (hidden,) = encoder.run(["hidden"], {"input_ids": ids})  # (1, 1, 256)
        token, generated = MANIFEST.tokens.decoder_start, []
        for _ in range(MANIFEST.limits.max_target_tokens):
            top_ids, hidden = decoder.run(
                ["top_ids", "next_hidden"],
                {"input_ids": np.array([[token]], dtype=np.int64), "hidden": hidden},
            )  # (1, 2), (1, 1, 256)
            token = int(top_ids[0, 0])
            if token == MANIFEST.tokens.eos:
                break
            generated.append(token)
        assert generated == record["target_ids"], record["text"]
