"""A translation stream: eager validation, ordered events, layout kept, cooperative cancellation."""

from __future__ import annotations

import threading

import pytest

from decoding import (
    Bundle,
    DecodeOptions,
    Delta,
    EmptyInputError,
    InputTooLongError,
    InvalidOptionError,
    Result,
    SegmentDone,
)


def test_events_are_deltas_then_segment_done_per_segment_then_one_result(default_bundle: Bundle) -> None:
    events = list(default_bundle.stream("我很好。你好吗？"))
    kinds = [type(e).__name__ for e in events]
    assert kinds[-1] == "Result" and kinds.count("Result") == 1
    assert kinds.count("SegmentDone") == 2
    first_done = kinds.index("SegmentDone")
    assert all(isinstance(e, Delta) and e.segment == 0 for e in events[:first_done])
    assert all(isinstance(e, Delta) and e.segment == 1 for e in events[first_done + 1 : -2])


def test_joined_deltas_equal_the_translation_and_the_segments(default_bundle: Bundle) -> None:
    events = list(default_bundle.stream("我很好。\n\n你好吗？我不知道。"))
    result = events[-1]
    assert isinstance(result, Result)
    joined = "".join(e.text for e in events if isinstance(e, Delta))
    assert joined == result.translation
    first, second, third = (s.translation for s in result.segments)
    assert result.translation == f"{first}\n\n{second} {third}"  # paragraph kept, sentences spaced


def test_segments_report_their_source_spans(default_bundle: Bundle) -> None:
    text = "我很好。 你好吗？"
    result = default_bundle.translate(text)
    assert [text[s.start : s.end] for s in result.segments] == ["我很好。", "你好吗？"]


def test_token_and_timing_accounting(default_bundle: Bundle) -> None:
    result = default_bundle.translate("我很好。")
    assert result.input_tokens == 5  # 我 很 好 。 + eos
    assert result.output_tokens == len(result.segments[0].token_ids)
    timings = result.timings
    assert 0 < timings.first_token_ms <= timings.total_ms
    assert timings.decode_ms > 0 and timings.encode_ms > 0


def test_long_input_is_split_never_truncated(tiny_marian_bundle: Bundle) -> None:
    limit = tiny_marian_bundle.manifest.limits.max_source_tokens
    sentence = "，".join(["今天天气很好"] * 60) + "。"  # one sentence, far more tokens than the limit
    stream = tiny_marian_bundle.stream(sentence, options=DecodeOptions(max_new_tokens=2))
    assert len(stream.segments) > 1
    assert all(len(p.encoding.ids) <= limit for p in stream.segments)
    assert "".join(p.source.text for p in stream.segments) == sentence


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_is_rejected_before_any_work(default_bundle: Bundle, text: str) -> None:
    with pytest.raises(EmptyInputError):
        default_bundle.stream(text)


def test_over_long_text_is_rejected_with_the_limit(default_bundle: Bundle) -> None:
    with pytest.raises(InputTooLongError) as info:
        default_bundle.stream("好" * (default_bundle.max_input_chars + 1))
    assert info.value.limit == default_bundle.max_input_chars


@pytest.mark.parametrize(
    "options",
    [
        DecodeOptions(max_new_tokens=0),
        DecodeOptions(max_new_tokens=-3),
        DecodeOptions(min_new_tokens=-1),
        DecodeOptions(max_new_tokens=4, min_new_tokens=5),
        DecodeOptions(no_repeat_ngram_size=-1),
    ],
)
def test_bad_options_are_rejected(default_bundle: Bundle, options: DecodeOptions) -> None:
    with pytest.raises(InvalidOptionError):
        default_bundle.stream("你好。", options=options)


def test_max_new_tokens_above_the_model_cap_is_capped(tiny_marian_bundle: Bundle) -> None:
    cap = tiny_marian_bundle.manifest.limits.max_target_tokens
    stream = tiny_marian_bundle.stream("你好。", options=DecodeOptions(max_new_tokens=cap * 10))
    assert stream.segments[0].max_new_tokens == cap


def test_min_new_tokens_forces_a_fixed_length(tiny_marian_bundle: Bundle) -> None:
    result = tiny_marian_bundle.translate(
        "你好。", options=DecodeOptions(max_new_tokens=30, min_new_tokens=30)
    )
    assert result.output_tokens == 30


def test_cancel_stops_within_one_step(default_bundle: Bundle) -> None:
    cancel = threading.Event()
    stream = default_bundle.stream(
        "你好。", options=DecodeOptions(max_new_tokens=100, min_new_tokens=100), cancel=cancel
    )
    events = iter(stream)
    next(events)
    steps_before = stream.steps
    cancel.set()
    rest = list(events)
    assert stream.steps == steps_before  # no decoder step after the flag was set
    result = rest[-1]
    assert isinstance(result, Result) and result.finish_reason == "cancelled"
    assert isinstance(rest[-2], SegmentDone) and rest[-2].finish_reason == "cancelled"


def test_closing_the_stream_stops_it(default_bundle: Bundle) -> None:
    stream = default_bundle.stream("你好。", options=DecodeOptions(max_new_tokens=100, min_new_tokens=100))
    next(iter(stream))
    steps = stream.steps
    stream.close()
    assert stream.cancelled
    assert list(stream) == []
    assert stream.steps == steps  # no decoder step after close()


def test_finish_reason_length_when_the_limit_is_hit(tiny_marian_bundle: Bundle) -> None:
    result = tiny_marian_bundle.translate("你好。", options=DecodeOptions(max_new_tokens=5, min_new_tokens=5))
    assert result.finish_reason == "length"
