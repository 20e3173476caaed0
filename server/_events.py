"""The wire events of a translation stream, as JSON-ready dicts.

    start   {type, id, model, direction, source, target, cached, segments: [{index, start, end}]}
    delta   {type, text, index, segment}             text is final; joined deltas == done.translation
    segment {type, index, start, end, translation, finish_reason, input_tokens, output_tokens}
    done    {type, translation, finish_reason, cached, model, usage: {input_tokens, output_tokens},
             unknown_source_chars, timings: {queue_ms, ttft_ms, total_ms, tokenize_ms, encode_ms,
             decode_ms, detokenize_ms}}
    error   {type, code, message}                    always the last event when present
    ping    {type}                                   NDJSON heartbeat (SSE uses comment lines)

Every stream is ``start`` (delta | segment | ping)* then exactly one ``done`` or ``error``.
NDJSON writes one per line; SSE writes ``event: <type>`` and ``id: <n>`` (n counts from 0 at start).
"""

from __future__ import annotations

import json
from typing import Any

from decoding import Delta, Result, SegmentDone, SourceSegment

from ._errors import ApiError

WireEvent = dict[str, Any]
PING: WireEvent = {"type": "ping"}


def start_event(
    *, request_id: str, model: str, source: str, target: str, cached: bool, segments: list[dict[str, int]]
) -> WireEvent:
    return {
        "type": "start",
        "id": request_id,
        "model": model,
        "direction": f"{source}-{target}",
        "source": source,
        "target": target,
        "cached": cached,
        "segments": segments,
    }


def segment_spans(segments: list[SourceSegment]) -> list[dict[str, int]]:
    return [{"index": s.index, "start": s.start, "end": s.end} for s in segments]


def delta_event(delta: Delta) -> WireEvent:
    return {"type": "delta", "text": delta.text, "index": delta.index, "segment": delta.segment}


def segment_event(done: SegmentDone) -> WireEvent:
    return {
        "type": "segment",
        "index": done.index,
        "start": done.start,
        "end": done.end,
        "translation": done.translation,
        "finish_reason": done.finish_reason,
        "input_tokens": done.input_tokens,
        "output_tokens": done.output_tokens,
    }


def done_event(result: Result, *, model: str, cached: bool) -> WireEvent:
    t = result.timings
    timings = {
        "queue_ms": t.queue_ms,
        "ttft_ms": t.first_token_ms,
        "total_ms": t.total_ms,
        "tokenize_ms": t.tokenize_ms,
        "encode_ms": t.encode_ms,
        "decode_ms": t.decode_ms,
        "detokenize_ms": t.detokenize_ms,
    }
    return {
        "type": "done",
        "translation": result.translation,
        "finish_reason": result.finish_reason,
        "cached": cached,
        "model": model,
        "usage": {"input_tokens": result.input_tokens, "output_tokens": result.output_tokens},
        "unknown_source_chars": result.unknown_source_chars,
        "timings": {name: round(value, 3) for name, value in timings.items()},
    }


def error_event(error: ApiError) -> WireEvent:
    """The same fields as the HTTP error body (code, message, param, details), as the last event."""
    return {"type": "error", **error.body()["error"]}


def dumps(event: WireEvent) -> str:
    """Compact JSON that keeps Chinese readable (ensure_ascii=False)."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))
