"""bench/_loadgen.py, the raw-socket load generator, against a real server: what it counts is what
the server sent (tokens from the final record, one TTFT per stream), and a refused request is an
error, never a success."""

from __future__ import annotations

import pytest

from bench._loadgen import run_users
from decoding import Bundle, DecodeOptions

from ._live import LiveServer

SENTENCE = "我们明天去公园散步吧。"


@pytest.mark.parametrize("stream", [True, False], ids=["ndjson", "json"])
async def test_tokens_and_first_deltas_are_counted_from_what_the_server_sent(
    live: LiveServer, default_bundle: Bundle, stream: bool
) -> None:
    samples = await run_users(
        "127.0.0.1", live.port, users=2, duration=0.3, stream=stream, sentences=[SENTENCE], max_new_tokens=8
    )
    expected = default_bundle.translate(SENTENCE, options=DecodeOptions(max_new_tokens=8)).output_tokens
    assert samples.errors == 0 and samples.statuses == {200: samples.requests}
    assert samples.requests >= 2  # each user finishes the request it started
    assert samples.tokens == expected * samples.requests
    # each user's first request is the burst (both users start at once), the rest steady state
    assert len(samples.burst_ttfts) == (2 if stream else 0)
    assert len(samples.ttfts) == (samples.requests - 2 if stream else 0)
    assert samples.summary()["tokens_per_s"] > 0


async def test_a_refused_request_counts_as_an_error_and_the_connection_goes_on(live: LiveServer) -> None:
    samples = await run_users(
        "127.0.0.1", live.port, users=1, duration=0.2, stream=True, sentences=["   "], max_new_tokens=None
    )
    assert samples.requests >= 1 and samples.errors == samples.requests
    assert samples.tokens == 0 and not samples.latencies
    assert set(samples.statuses) == {400}
