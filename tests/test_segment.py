"""plan_segments: sentence ends, closing quotes, layout separators and splitting what does not fit."""

from __future__ import annotations

import itertools
import unicodedata
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoding._segment import plan_segments
from decoding._types import SourceSegment


def always(_: str) -> bool:
    return True


def at_most(limit: int) -> Callable[[str], bool]:
    return lambda piece: len(piece) <= limit


def texts(text: str, target_lang: str = "en", fits: Callable[[str], bool] = always, **kw: int) -> list[str]:
    return [seg.text for seg in plan_segments(text, target_lang=target_lang, fits=fits, **kw)]


def separators(text: str, target_lang: str = "en") -> list[str]:
    return [seg.separator for seg in plan_segments(text, target_lang=target_lang, fits=always)]


def squeeze(text: str) -> str:
    return "".join(text.split())


def assert_covers(text: str, segments: list[SourceSegment], target_lang: str) -> None:
    """Spans reproduce the source, in order, and only whitespace lies between or around them."""
    assert [seg.index for seg in segments] == list(range(len(segments)))
    previous_end = 0
    for seg in segments:
        assert previous_end <= seg.start < seg.end
        assert seg.text == text[seg.start : seg.end]
        assert seg.text == seg.text.strip()
        assert seg.text.splitlines() == [seg.text]  # a line break always ends a segment
        gap = text[previous_end : seg.start]
        assert gap.strip() == ""
        breaks = len((gap + "x").splitlines()) - 1
        if seg.index == 0:
            assert seg.separator == ""
        else:
            assert seg.separator == ("\n" * breaks or ("" if target_lang == "zh" else " "))
        previous_end = seg.end
    assert text[previous_end:].strip() == ""
    assert squeeze("".join(seg.text for seg in segments)) == squeeze(text)


# Sentence ends


def test_chinese_sentences_end_at_full_stops_exclamations_questions_and_semicolons() -> None:
    assert texts("今天天气很好。你去哪儿？太好了！我来了；你呢。", "zh") == [
        "今天天气很好。",
        "你去哪儿？",
        "太好了！",
        "我来了；",
        "你呢。",
    ]


def test_chinese_ellipsis_ends_a_sentence() -> None:
    assert texts("他犹豫了……然后走了。", "zh") == ["他犹豫了……", "然后走了。"]


def test_runs_of_end_marks_stay_together() -> None:
    assert texts("真的吗？！好的！！走吧。", "zh") == ["真的吗？！", "好的！！", "走吧。"]
    assert texts("Really?! Yes!! Go...") == ["Really?!", "Yes!!", "Go..."]


def test_english_sentences_end_at_full_stops_exclamations_and_questions() -> None:
    assert texts("It rains. Where are you? Great! Done") == ["It rains.", "Where are you?", "Great!", "Done"]


def test_english_semicolon_does_not_end_a_sentence() -> None:
    assert texts("I came; I saw; I left.") == ["I came; I saw; I left."]


def test_decimals_do_not_end_a_sentence() -> None:
    assert texts("Pi is 3.14 or so. Next.") == ["Pi is 3.14 or so.", "Next."]
    assert texts("价格是3.14元。好。", "zh") == ["价格是3.14元。", "好。"]


def test_abbreviations_do_not_end_a_sentence() -> None:
    text = "Mr. Smith met Dr. Lee in the U.S. Army. Cities, e.g. Beijing, are big. Fig. 3 shows it. Ok."
    assert texts(text) == [
        "Mr. Smith met Dr. Lee in the U.S. Army.",
        "Cities, e.g. Beijing, are big.",
        "Fig. 3 shows it.",
        "Ok.",
    ]


def test_initials_do_not_end_a_sentence_but_the_pronoun_i_does() -> None:
    assert texts("J. K. Rowling wrote it. So did I. Then we slept.") == [
        "J. K. Rowling wrote it.",
        "So did I.",
        "Then we slept.",
    ]


def test_a_lowercase_word_after_an_ellipsis_continues_the_sentence() -> None:
    assert texts("Wait... what? Wait… Then he left.") == ["Wait... what?", "Wait…", "Then he left."]


def test_a_lowercase_word_after_a_quoted_exclamation_continues_the_sentence() -> None:
    assert texts('"Wow!" she said. Fine.') == ['"Wow!" she said.', "Fine."]


def test_dots_inside_names_and_urls_do_not_end_a_sentence() -> None:
    assert texts("See example.com for v2.0.1 now. Bye.") == ["See example.com for v2.0.1 now.", "Bye."]


def test_a_list_number_at_the_start_of_a_line_does_not_end_a_sentence() -> None:
    assert texts("1. Buy milk.\n2. Drink it. It is page 3. Done.") == [
        "1. Buy milk.",
        "2. Drink it.",
        "It is page 3.",
        "Done.",
    ]


def test_a_line_break_ends_a_sentence_without_punctuation() -> None:
    assert texts("第一行\n第二行", "zh") == ["第一行", "第二行"]
    assert texts("line one\nline two and more") == ["line one", "line two and more"]


def test_mixed_chinese_and_english_split_at_both_kinds_of_end_mark() -> None:
    assert texts("这是 version 2.0 版本。It works! 很好。I like it.我也是。") == [
        "这是 version 2.0 版本。",
        "It works!",
        "很好。",
        "I like it.",
        "我也是。",
    ]


# Closing quotes and brackets


def test_chinese_closing_quote_belongs_to_the_sentence_it_closes() -> None:
    assert texts("他说：“你好。”我走了。", "zh") == ["他说：“你好。”", "我走了。"]


def test_english_closing_quotes_belong_to_the_sentence_they_close() -> None:
    assert texts("He said \"Hi.\" Then left. She said 'Go!' And went.") == [
        'He said "Hi."',
        "Then left.",
        "She said 'Go!'",
        "And went.",
    ]


def test_closing_brackets_belong_to_the_sentence_they_close() -> None:
    assert texts("（这是括号。）然后呢？【注意！】「好。」『行。』《书。》下一句。", "zh") == [
        "（这是括号。）",
        "然后呢？",
        "【注意！】",
        "「好。」",
        "『行。』",
        "《书。》",
        "下一句。",
    ]
    assert texts("(See above.) Next one. [Sic.] Done.") == ["(See above.)", "Next one.", "[Sic.]", "Done."]


# Spans and layout


def test_spans_exclude_surrounding_whitespace() -> None:
    segments = plan_segments("  Hello.   World.  ", target_lang="zh", fits=always)
    assert [(seg.start, seg.end, seg.text) for seg in segments] == [(2, 8, "Hello."), (11, 17, "World.")]


def test_spans_reproduce_the_source() -> None:
    text = ' 他说：“你好。”\n\nHe said "Hi." Then left, Mr. Lee?!\r\n  最后一句…… '
    for target_lang in ("en", "zh"):
        assert_covers(text, plan_segments(text, target_lang=target_lang, fits=always), target_lang)


def test_whitespace_only_input_gives_no_segments() -> None:
    assert plan_segments(" \n\t\u3000\r\n", target_lang="en", fits=always) == []
    assert plan_segments("", target_lang="zh", fits=always) == []


def test_first_separator_is_empty_even_after_leading_blank_lines() -> None:
    assert separators("\n\nHello.") == [""]


def test_a_paragraph_break_becomes_two_newlines() -> None:
    assert separators("a。\n\nb。", "zh") == ["", "\n\n"]


def test_a_line_break_is_kept_as_one_newline() -> None:
    assert separators("a。\nb。", "en") == ["", "\n"]


def test_crlf_counts_as_one_newline() -> None:
    assert separators("A.\r\n\r\nB.\r\nC.") == ["", "\n\n", "\n"]


def test_sentences_on_one_line_are_joined_by_a_space_for_english_and_nothing_for_chinese() -> None:
    assert separators("你好。再见。", "en") == ["", " "]
    assert separators("Hello. Bye.", "zh") == ["", ""]


def test_segment_indices_count_from_zero() -> None:
    segments = plan_segments("一。二。\n三。", target_lang="zh", fits=always)
    assert [seg.index for seg in segments] == [0, 1, 2]


# Sentences that do not fit


def test_long_chinese_sentence_splits_after_commas() -> None:
    assert texts("第一句很长，第二句也很长，第三句。", "zh", at_most(7)) == [
        "第一句很长，",
        "第二句也很长，",
        "第三句。",
    ]


def test_long_english_sentence_splits_after_commas_keeping_them_left() -> None:
    assert texts("one two three, four five six, seven.", "en", at_most(14)) == [
        "one two three,",
        "four five six,",
        "seven.",
    ]


def test_clauses_that_fit_together_are_packed_into_one_piece() -> None:
    assert texts("a，b，c、d：e。", "zh", at_most(4)) == ["a，b，", "c、d：", "e。"]


def test_english_semicolon_colon_and_spaced_dash_are_clause_cuts() -> None:
    assert texts("first part; second: third - fourth.", "en", at_most(12)) == [
        "first part;",
        "second:",
        "third -",
        "fourth.",
    ]


def test_commas_inside_numbers_and_times_are_not_clause_cuts() -> None:
    assert texts('"Yes," he said, "1,000 at 12:30."', "en", at_most(17)) == [
        '"Yes," he said,',
        '"1,000 at 12:30."',
    ]


def test_a_clause_still_too_long_splits_at_spaces() -> None:
    assert texts("alpha beta gamma delta, x.", "en", at_most(12)) == ["alpha beta", "gamma delta,", "x."]


def test_a_word_too_long_is_split_by_characters_into_longest_prefixes() -> None:
    assert texts("abcdefghij", "en", at_most(4)) == ["abcd", "efgh", "ij"]
    assert texts("一二三四五六七八九十。", "zh", at_most(3)) == ["一二三", "四五六", "七八九", "十。"]


def test_pieces_of_a_split_sentence_are_joined_like_sentences() -> None:
    segments = plan_segments("甲乙，丙丁。", target_lang="en", fits=at_most(3))
    assert [(seg.text, seg.separator) for seg in segments] == [("甲乙，", ""), ("丙丁。", " ")]


def test_max_chars_caps_segments_like_fits() -> None:
    assert texts("一二三四五六七八九十。", "zh", always, max_chars=4) == ["一二三四", "五六七八", "九十。"]


def test_hard_split_never_separates_a_combining_mark_from_its_base() -> None:
    text = "e\u0301" * 5 + "a\u0308o\u0308"
    pieces = texts(text, "en", at_most(3))
    assert "".join(pieces) == text
    assert all(unicodedata.combining(piece[0]) == 0 for piece in pieces)


def test_hard_split_never_separates_emoji_sequences_or_flags() -> None:
    family = "👨\u200d👩\u200d👧"
    assert texts(family + "🇨🇳🇺🇸👍🏽", "en", at_most(5)) == [family, "🇨🇳🇺🇸", "👍🏽"]


def test_hard_split_asks_fits_about_few_prefixes() -> None:
    calls: list[str] = []

    def fits(piece: str) -> bool:
        calls.append(piece)
        return len(piece) <= 100

    assert len(texts("x" * 1000, "en", fits)) == 10
    assert len(calls) < 150


def test_a_character_that_does_not_fit_alone_raises_value_error() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        plan_segments("你好。", target_lang="en", fits=lambda piece: False)
    with pytest.raises(ValueError, match="does not fit"):
        plan_segments("e\u0301", target_lang="en", fits=at_most(1))


def test_max_chars_below_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        plan_segments("hi", target_lang="en", fits=always, max_chars=0)


def test_splitting_never_loses_characters() -> None:
    text = (
        "这是一个非常非常长的句子，里面有很多很多的字、还有逗号：以及 some English words, too; and more"
        " text.\n\n下一段。"
    )
    for limit in (3, 5, 8, 13):
        for target_lang in ("en", "zh"):
            segments = plan_segments(text, target_lang=target_lang, fits=at_most(limit))
            assert_covers(text, segments, target_lang)
            assert all(len(seg.text) <= limit for seg in segments)


# Properties

_TOKENS = [
    *"你好中文字甲乙丙aBzQ39",
    *"。，、：；！？…“”‘’「」（）《》.,;:!?\"'()[]-",
    " ",
    "  ",
    "\t",
    "\u3000",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    "...",
    "……",
    " - ",
    "Mr.",
    "e.g.",
    "U.S.",
    "3.14",
    "1,000",
    "e\u0301",
    "👍🏽",
    "👨\u200d👩",
    "🇨🇳",
]
# Random characters too, minus the ones that extend a cluster (combining marks, joiners, emoji
# modifiers, regional indicators, surrogates): a cluster longer than the limit would rightly raise.
_ANY_CHAR = st.characters(max_codepoint=0x9FFF, exclude_categories=("Mn", "Mc", "Me", "Cf", "Cs"))
_TEXT = st.lists(st.one_of(st.sampled_from(_TOKENS), _ANY_CHAR), max_size=60).map("".join)


@settings(deadline=None, max_examples=300)
@given(
    text=_TEXT,
    limit=st.integers(min_value=3, max_value=12),
    max_chars=st.none() | st.integers(min_value=3, max_value=20),
    target_lang=st.sampled_from(["en", "zh"]),
)
def test_segments_cover_the_input_and_fit_whatever_the_text(
    text: str, limit: int, max_chars: int | None, target_lang: str
) -> None:
    segments = plan_segments(text, target_lang=target_lang, fits=at_most(limit), max_chars=max_chars)
    assert_covers(text, segments, target_lang)
    assert all(len(seg.text) <= min(limit, max_chars or limit) for seg in segments)
    assert (segments == []) == (text.strip() == "")


_CLOSERS = "”’\"'）)」』】》〉〕〗〙〛］]｝}›»"
_ENDERS = ".!?…。｡！？；‼⁇⁈⁉"


@settings(deadline=None)
@given(text=_TEXT)
def test_sentences_that_fit_are_never_cut_mid_line_except_at_end_marks(text: str) -> None:
    segments = plan_segments(text, target_lang="en", fits=always)
    assert_covers(text, segments, "en")
    for seg, following in itertools.pairwise(segments):
        if "\n" not in following.separator:
            assert seg.text.rstrip(_CLOSERS).endswith(tuple(_ENDERS))
