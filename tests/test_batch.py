"""Sequences stepped together decode exactly as they would alone (greedy outputs are identical)."""

from __future__ import annotations

import numpy as np
import pytest

from decoding import Bundle, DecodeBatch, DecodeOptions, GreedySequence, advance_batch
from decoding._graphs import _length_groups
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


def alone_ids(bundle: Bundle, source_ids: list[int], max_new: int) -> list[int]:
    batch = DecodeBatch(bundle.graphs)
    sequence = new_sequence(bundle, max_new, max_new)
    row = batch.add(bundle.graphs.encode(source_ids), max_new_tokens=max_new, owner=sequence)
    while batch.rows:
        advance_batch(batch)
    return row.owner.tokens


def run_staggered(
    bundle: Bundle, jobs: list[tuple[str, int, int, int]], *, first_step_alone: bool = False
) -> dict[str, list[int]]:
    """jobs: (text, join_at_step, max_new, min_new). Rows join at their step; finished rows leave.
    ``first_step_alone``: rows that join take their first step on their own, before the batch's."""
    batch = DecodeBatch(bundle.graphs)
    sequences: dict[str, GreedySequence] = {}
    step = 0
    pending = sorted(jobs, key=lambda job: job[1])
    while pending or batch.rows:
        joined = 0
        while pending and pending[0][1] <= step:
            joined += 1
            text, _, max_new, min_new = pending.pop(0)
            sequences[text] = new_sequence(bundle, max_new, min_new)
            batch.add(
                bundle.graphs.encode(bundle.tokenizer.encode(text).ids),
                max_new_tokens=max_new,
                owner=sequences[text],
                tag=text,
            )
        if first_step_alone and joined and len(batch.rows) > joined:
            stepped = advance_batch(batch, newest=joined)
            assert sorted(row.tag for row, _ in stepped) == sorted(job[0] for job in jobs if job[1] == step)
        advance_batch(batch)
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


def test_stepping_only_the_newest_rows_leaves_every_output_unchanged(
    tiny_marian_bundle: Bundle, default_bundle: Bundle
) -> None:
    """A newcomers-only step (the scheduler's ``first_step_alone``) reads and writes only their slots:
    caches (Marian) and fed-back state (GRU) of the running rows are untouched."""
    texts = CORPUS[:10]
    jobs = [(text, (i * 3) % 7, 6 + (i * 5) % 17, (i % 3) * 2) for i, text in enumerate(texts)]
    batched = run_staggered(tiny_marian_bundle, jobs, first_step_alone=True)
    for text, _, max_new, min_new in jobs:
        assert batched[text] == alone(tiny_marian_bundle, text, max_new, min_new), text
    gru_texts = ["我很好。", "你喜欢吃苹果吗？", "我们走吧！", "汤姆在哪里？", "他是我的朋友。"]
    gru = run_staggered(
        default_bundle, [(t, i // 2, 30, 0) for i, t in enumerate(gru_texts)], first_step_alone=True
    )
    for text in gru_texts:
        assert gru[text] == alone(default_bundle, text, 30)


def test_buffers_grow_and_leaving_rows_hand_their_slot_to_the_last(tiny_marian_bundle: Bundle) -> None:
    batch = DecodeBatch(tiny_marian_bundle.graphs)
    encode = tiny_marian_bundle.graphs.encode
    rows = [
        batch.add(
            encode(tiny_marian_bundle.tokenizer.encode(text).ids),
            max_new_tokens=60,
            owner=new_sequence(tiny_marian_bundle, 60, 60),
        )
        for text in CORPUS[:5]
    ]
    assert batch.capacity[0] >= 5
    assert batch.capacity[1] >= 60  # room for every output reserved when the sequence joined
    for _ in range(40):
        advance_batch(batch)
    batch.remove([rows[1]])
    assert batch.rows == [rows[0], rows[4], rows[2], rows[3]]  # the last row took the freed slot
    while batch.rows:
        advance_batch(batch)
    for text, row in zip(CORPUS[:5], rows, strict=True):
        expected = alone(tiny_marian_bundle, text, 60, 60)
        assert row.owner.tokens == (expected[:40] if row is rows[1] else expected)


def test_an_emptied_batch_starts_fresh(tiny_marian_bundle: Bundle) -> None:
    batch = DecodeBatch(tiny_marian_bundle.graphs)
    row = batch.add(
        tiny_marian_bundle.graphs.encode([5, 6, 0]),
        max_new_tokens=3,
        owner=new_sequence(tiny_marian_bundle, 3, 3),
    )
    while batch.rows:
        advance_batch(batch)
    assert row.owner.finish_reason == "length"
    assert len(batch) == 0
    again = batch.add(
        tiny_marian_bundle.graphs.encode([7, 8, 0]),
        max_new_tokens=3,
        owner=new_sequence(tiny_marian_bundle, 3, 3),
    )
    while batch.rows:
        advance_batch(batch)
    assert again.owner.tokens == alone_ids(tiny_marian_bundle, [7, 8, 0], 3)


def test_arrivals_and_departures_reuse_the_row_ranges_already_bound(
    tiny_marian_bundle: Bundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Binding a decoder call costs ~10 µs per tensor in ONNX Runtime's Python API: requests that
    come and go one after another on an idle server must not pay it again each time."""
    graphs = tiny_marian_bundle.graphs
    bound = 0
    new_binding = graphs.new_binding

    def counting_new_binding() -> object:
        nonlocal bound
        bound += 1
        return new_binding()

    monkeypatch.setattr(graphs, "new_binding", counting_new_binding)
    batch = DecodeBatch(graphs)
    texts = sorted(CORPUS[:6], key=len, reverse=True)  # the first reserves room for every later one
    tokens = []
    for text in texts:  # one request after another, each alone in the batch
        row = batch.add(
            graphs.encode(tiny_marian_bundle.tokenizer.encode(text).ids),
            max_new_tokens=8,
            owner=new_sequence(tiny_marian_bundle, 8, 8),
        )
        while batch.rows:
            advance_batch(batch)
        tokens.append(row.owner.tokens)
    assert bound == 1
    assert tokens == [alone(tiny_marian_bundle, text, 8, 8) for text in texts]


def test_encode_many_gives_each_source_what_encoding_it_alone_gives_in_the_order_given(
    tiny_marian_bundle: Bundle,
) -> None:
    graphs = tiny_marian_bundle.graphs
    sources = [tiny_marian_bundle.tokenizer.encode(text).ids for text in CORPUS[:9]]
    assert len({len(ids) for ids in sources}) > 3  # lengths differ: several encoder calls
    for ids, together in zip(sources, graphs.encode_many(sources), strict=True):
        alone = graphs.encode(ids)
        assert together.length == alone.length == len(ids)
        for name, array in alone.outputs.items():
            np.testing.assert_allclose(together.outputs[name], array, atol=1e-5)


def test_an_encoder_call_pads_at_most_a_tenth_of_its_positions() -> None:
    """Padding costs what real tokens cost: ten sentences of 5-41 tokens in one padded call took
    2.3x as long as one by one (bench note in decoding/_graphs.py)."""
    lengths = [6, 11, 12, 41, 9, 18, 10, 13, 11, 29]
    groups = _length_groups(lengths)
    assert sorted(index for group in groups for index in group) == list(range(len(lengths)))
    for group in groups:
        padded = len(group) * max(lengths[i] for i in group)
        assert sum(lengths[i] for i in group) >= 0.9 * padded
    assert max(len(group) for group in groups) >= 3  # similar lengths still share a call
    assert _length_groups([7, 7]) == [[0, 1]]
