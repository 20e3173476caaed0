"""The OpenAPI document's examples: one translation of 我很好。, rendered by the server's own
builders and framers (``_events``, ``_streaming``, ``_openai``), so the JSON body, the NDJSON
lines, the SSE frames and the compatibility replies agree with each other and with the wire."""

from __future__ import annotations

from typing import Any

from sse_starlette.event import ServerSentEvent, ensure_bytes

from decoding import Delta, Result, SegmentDone, SourceSegment, Timings

from ._events import (
    PING,
    WireEvent,
    delta_event,
    done_event,
    segment_event,
    segment_spans,
    start_event,
    translate_response,
)
from ._openai import ChunkWriter, completion_reply
from ._streaming import ndjson_line, sse_message
from ._wire import TranslateResponse

TEXT = "我很好。"
DELTAS = ("I'm", " very", " well", ".")  # what the bundled model streams for it
TRANSLATION = "".join(DELTAS)
REQUEST_ID = "b8a8e0ebe0c84e47"
CREATED = 1767225600  # the chat completions' timestamp
SSE_PING = ": ping - 2025-01-01 12:00:15.000000+00:00\n\n"  # what sse-starlette's heartbeat looks like


def events(model: str) -> list[WireEvent]:
    """The example translation's stream events."""
    end = len(TEXT)
    segment = SegmentDone(
        index=0,
        start=0,
        end=end,
        translation=TRANSLATION,
        input_tokens=5,
        output_tokens=5,
        finish_reason="stop",
    )
    timings = Timings(
        queue_ms=0.234,
        first_token_ms=1.146,
        total_ms=3.249,
        tokenize_ms=0.063,
        encode_ms=0.277,
        decode_ms=1.912,
        detokenize_ms=0.061,
    )
    result = Result(
        translation=TRANSLATION,
        segments=(segment,),
        input_tokens=5,
        output_tokens=5,
        unknown_source_chars=0,
        finish_reason="stop",
        timings=timings,
    )
    spans = segment_spans([SourceSegment(index=0, start=0, end=end, text=TEXT, separator="")])
    start = start_event(
        request_id=REQUEST_ID, model=model, source="zh", target="en", cached=False, segments=spans
    )
    deltas = [delta_event(Delta(text, None, i, 0)) for i, text in enumerate(DELTAS)]
    return [start, *deltas, segment_event(segment), done_event(result, model=model, cached=False)]


def translate_reply(model: str) -> TranslateResponse:
    stream = events(model)
    segments = [{k: v for k, v in e.items() if k != "type"} for e in stream if e["type"] == "segment"]
    return translate_response(
        stream[-1], segments, source="zh", target="en", model=model, request_id=REQUEST_ID
    )


def ndjson(model: str) -> str:
    stream = events(model)
    return b"".join(ndjson_line(e) for e in [*stream[:2], PING, *stream[2:]]).decode()


def sse(model: str) -> str:
    frames = [ensure_bytes(sse_message(e, i), "\n").decode() for i, e in enumerate(events(model))]
    frames.insert(2, SSE_PING)
    return "".join(frames)


def chat_completion(model: str) -> dict[str, Any]:
    return dict(completion_reply(events(model)[-1], request_id=REQUEST_ID, model=model, created=CREATED))


def chat_stream(model: str) -> str:
    writer = ChunkWriter(request_id=REQUEST_ID, model=model, created=CREATED, include_usage=False)
    payloads = [payload for event in events(model) for payload in writer.payloads(event)]
    return "".join(ensure_bytes(ServerSentEvent(data=payload), "\n").decode() for payload in payloads)
