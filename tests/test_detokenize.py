"""Incremental detokenization: deltas are final, whole characters, and add up to the full decode."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoding import Bundle
from decoding.tokenizers import OffsetDetokenizer

TEXT_ALPHABET = st.sampled_from([*"你好世界今天天气茶龘靐𠀀😀🎉éa bc,.!？。", "Hello", " world", "\n"])
SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def stream_text(bundle: Bundle, ids: list[int]) -> list[str]:
    decoder = bundle.tokenizer.incremental_decoder()
    deltas = [decoder.decode(i) for i in ids]
    return [*deltas, decoder.flush()]


def content_ids(bundle: Bundle, text: str) -> list[int]:
    return bundle.tokenizer.encode(text).ids[:-1]  # without eos


def test_rare_chinese_character_is_held_back_until_its_last_byte(tiny_marian_bundle: Bundle) -> None:
    ids = content_ids(tiny_marian_bundle, "龘")  # not in the tiny vocabulary: ▁ + three UTF-8 byte pieces
    pieces = [tiny_marian_bundle.tokenizer._piece(i) for i in ids]  # type: ignore[attr-defined]
    assert pieces[-3:] == ["<0xE9>", "<0xBE>", "<0x98>"]
    deltas = stream_text(tiny_marian_bundle, ids)
    assert deltas[:-2] == [""] * (len(ids) - 1)  # nothing while the character is incomplete
    assert deltas[-2] == "龘"  # ... and the whole character with its last byte, not at flush


def test_chinese_fed_one_id_at_a_time_equals_full_decode(tiny_marian_bundle: Bundle) -> None:
    ids = content_ids(tiny_marian_bundle, "你好，世界。今天天气很好！龘靐😀")
    assert "".join(stream_text(tiny_marian_bundle, ids)) == tiny_marian_bundle.tokenizer.decode(ids)


def test_word_boundaries_become_single_spaces(tiny_marian_bundle: Bundle) -> None:
    ids = content_ids(tiny_marian_bundle, "Hello world and tea")
    assert "".join(stream_text(tiny_marian_bundle, ids)) == "Hello world and tea"


@SETTINGS
@given(text=st.lists(TEXT_ALPHABET, min_size=1, max_size=30).map("".join))
def test_whole_characters_never_produce_replacement_chars(tiny_marian_bundle: Bundle, text: str) -> None:
    ids = content_ids(tiny_marian_bundle, text)
    deltas = stream_text(tiny_marian_bundle, ids)
    assert not any("\ufffd" in delta for delta in deltas)
    assert "".join(deltas) == tiny_marian_bundle.tokenizer.decode(ids)


@SETTINGS
@given(data=st.data())
def test_any_id_sequence_streams_to_exactly_the_full_decode(
    tiny_marian_bundle: Bundle, hf_tiny: tuple[Any, Any], data: st.DataObject
) -> None:
    vocab = len(hf_tiny[1])
    ids = data.draw(st.lists(st.integers(min_value=0, max_value=vocab - 1), max_size=40))
    joined = "".join(stream_text(tiny_marian_bundle, ids))
    assert (
        joined == tiny_marian_bundle.tokenizer.decode(ids) == hf_tiny[1].decode(ids, skip_special_tokens=True)
    )


def test_offset_detokenizer_holds_back_only_incomplete_text() -> None:
    """With a byte-level toy decoder: each id is one UTF-8 byte."""

    def decode(ids: Any) -> str:
        return bytes(ids).decode("utf-8", errors="replace")

    detok = OffsetDetokenizer(decode)
    emitted = [detok.decode(b) for b in "a流译".encode()]
    assert emitted == ["a", "", "", "流", "", "", "译"]
    assert detok.flush() == ""


def test_an_unfinished_byte_sequence_is_released_at_flush_like_the_full_decode() -> None:
    def decode(ids: Any) -> str:
        return bytes(ids).decode("utf-8", errors="replace")

    detok = OffsetDetokenizer(decode)
    data = "流".encode()[:2]
    assert [detok.decode(b) for b in data] == ["", ""]
    assert detok.flush() == decode(list(data)) == "\ufffd"
