"""The wire events of a translation stream and liuyi's JSON reply, as JSON-ready dicts
(each checked against its wire model in ``_wire.py``, from which the OpenAPI schemas come).

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
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, cast

from decoding import Delta, Result, SegmentDone, SourceSegment

from ._errors import ApiError
from ._wire import (
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    SegmentEvent,
    SegmentResult,
    SegmentSpan,
    StartEvent,
    Timings,
    TranslateResponse,
)

WireEvent = dict[str, Any]  # one of the _wire events, as the stream carries it
PING: WireEvent = {"type": "ping"}
P = ParamSpec("P")


def builder(build: Callable[P, Mapping[str, Any]]) -> Callable[P, WireEvent]:
    """Marks an event builder: mypy checks its body against the wire model it returns, callers get a
    plain ``WireEvent``. The function itself is returned unchanged (no cost per event)."""
    return build  # type: ignore[return-value]  # a TypedDict is a dict at run time


@builder
def start_event(
    *, request_id: str, model: str, source: str, target: str, cached: bool, segments: list[dict[str, int]]
) -> StartEvent:
    return {
        "type": "start",
        "id": request_id,
        "model": model,
        "direction": f"{source}-{target}",
        "source": source,
        "target": target,
        "cached": cached,
        "segments": cast(list[SegmentSpan], segments),
    }


def segment_spans(segments: Sequence[SourceSegment]) -> list[dict[str, int]]:
    """The ``SegmentSpan``s of the start event (plain dicts: the cache stores them)."""
    return [{"index": s.index, "start": s.start, "end": s.end} for s in segments]


@builder
def delta_event(delta: Delta) -> DeltaEvent:
    return {"type": "delta", "text": delta.text, "index": delta.index, "segment": delta.segment}


@builder
def segment_event(done: SegmentDone) -> SegmentEvent:
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


@builder
def done_event(result: Result, *, model: str, cached: bool) -> DoneEvent:
    t = result.timings
    timings: Timings = {
        "queue_ms": round(t.queue_ms, 3),
        "ttft_ms": round(t.first_token_ms, 3),
        "total_ms": round(t.total_ms, 3),
        "tokenize_ms": round(t.tokenize_ms, 3),
        "encode_ms": round(t.encode_ms, 3),
        "decode_ms": round(t.decode_ms, 3),
        "detokenize_ms": round(t.detokenize_ms, 3),
    }
    return {
        "type": "done",
        "translation": result.translation,
        "finish_reason": result.finish_reason,
        "cached": cached,
        "model": model,
        "usage": {"input_tokens": result.input_tokens, "output_tokens": result.output_tokens},
        "unknown_source_chars": result.unknown_source_chars,
        "timings": timings,
    }


@builder
def error_event(error: ApiError) -> ErrorEvent:
    """The same fields as the HTTP error body (code, message, param, details), as the last event."""
    return {"type": "error", **error.body()["error"]}


def translate_response(
    done: WireEvent, segments: list[WireEvent], *, source: str, target: str, model: str, request_id: str
) -> TranslateResponse:
    """POST /v1/translate's reply: the ``done`` event's facts, the segments, the request id."""
    return {
        "translation": done["translation"],
        "source": source,
        "target": target,
        "model": model,
        "cached": done["cached"],
        "finish_reason": done["finish_reason"],
        "usage": done["usage"],
        "unknown_source_chars": done["unknown_source_chars"],
        "timings": done["timings"],
        "segments": cast(list[SegmentResult], segments),
        "id": request_id,
    }


def dumps(event: object) -> str:
    """Compact JSON that keeps Chinese readable (ensure_ascii=False)."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))
