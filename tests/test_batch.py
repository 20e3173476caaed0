"""Sequences stepped together decode exactly as they would alone (greedy outputs are identical)."""

from __future__ import annotations

from decoding import Bundle, DecodeBatch, DecodeOptions, GreedySequence
from decoding.export.synthetic import CORPUS


def new_sequence(bundle: Bundle, max_new: int, min_new: int = 0) -> GreedySequence:
    m = bundle.manifest
    return GreedySequence(
        decoder_start=m.tokens.decoder_start,
        eos=m.tokens.eos,
        max_new_tokens=max_new,
        min_new_tokens=min_new,
        forced_eos_at_limit=m.generation.forced_eos_at_limit,
    )


def alone(bundle: Bundle, text: str, max_new: int, min_new: int = 0) -> list[int]:
    result = bundle.translate(text, options=DecodeOptions(max_new_tokens=max_new, min_new_tokens=min_new))
    return list(result.segments[0].token_ids)


def run_staggered(bundle: Bundle, jobs: list[tuple[str, int, int, int]]) -> dict[str, list[int]]:
    """jobs: (text, join_at_step, max_new, min_new). Rows join at their step; finished rows leave."""
    batch = DecodeBatch(bundle.graphs)
    sequences: dict[str, GreedySequence] = {}
    step = 0
    pending = sorted(jobs, key=lambda job: job[1])
    while pending or batch.rows:
        while pending and pending[0][1] <= step:
            text, _, max_new, min_new = pending.pop(0)
            sequences[text] = new_sequence(bundle, max_new, min_new)
            batch.add(bundle.graphs.encode(bundle.tokenizer.encode(text).ids), sequences[text], tag=text)
        batch.step()
        step += 1
    return {text: seq.tokens for text, seq in sequences.items()}


def test_mixed_lengths_joining_and_leaving_mid_flight_match_single_decoding(
    tiny_marian_bundle: Bundle,
) -> None:
    texts = CORPUS[:12]
    jobs = [(text, (i * 3) % 7, 6 + (i * 5) % 17, (i % 3) * 2) for i, text in enumerate(texts)]
    batched = run_staggered(tiny_marian_bundle, jobs)
    for text, _, max_new, min_new in jobs:
        assert batched[text] == alone(tiny_marian_bundle, text, max_new, min_new), text


def test_gru_model_batches_too(default_bundle: Bundle) -> None:
    texts = ["我很好。", "你喜欢吃苹果吗？", "我们走吧！", "汤姆在哪里？", "他是我的朋友。"]
    jobs = [(text, i, 30, 0) for i, text in enumerate(texts)]
    batched = run_staggered(default_bundle, jobs)
    for text in texts:
        assert batched[text] == alone(default_bundle, text, 30)


def test_cache_padding_is_trimmed_when_old_sequences_leave(tiny_marian_bundle: Bundle) -> None:
    batch = DecodeBatch(tiny_marian_bundle.graphs)
    encode = tiny_marian_bundle.graphs.encode
    first = batch.add(
        encode(tiny_marian_bundle.tokenizer.encode(CORPUS[0]).ids), new_sequence(tiny_marian_bundle, 50, 50)
    )
    for _ in range(10):
        batch.step()
    batch.add(
        encode(tiny_marian_bundle.tokenizer.encode(CORPUS[1]).ids), new_sequence(tiny_marian_bundle, 50, 50)
    )
    batch.step()
    assert batch.past_length == 11
    batch.remove([first])
    assert batch.past_length == 1  # the 10 positions only the first sequence used are gone
    assert len(batch) == 1


def test_an_emptied_batch_starts_fresh(tiny_marian_bundle: Bundle) -> None:
    batch = DecodeBatch(tiny_marian_bundle.graphs)
    row = batch.add(tiny_marian_bundle.graphs.encode([5, 6, 0]), new_sequence(tiny_marian_bundle, 3, 3))
    while batch.rows:
        batch.step()
    assert row.sequence.finish_reason == "length"
    assert batch.past_length == 0
