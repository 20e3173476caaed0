"""The HTTP headers of the wire format: what liuyi sends besides bodies, and the one it reads
(``Last-Event-ID``), each with its meaning and schema — the OpenAPI document's header and parameter
components. The values themselves are set where they are made (``_streaming.STREAM_HEADERS``, the
request-id middleware, ``_native.server_timing``, the error handler's ``Retry-After``)."""

from __future__ import annotations

from typing import Any

from ._streaming import STREAM_HEADERS

Schema = dict[str, Any]


def header(text: str, schema: Schema, example: Any = None) -> Schema:
    return {"description": text, "schema": schema, **({"example": example} if example is not None else {})}


def response_headers(retry_after: int) -> dict[str, Schema]:
    """Every response header the document names, by name (``retry_after``: the configured seconds)."""
    return {
        "Cache-Control": header("Streams are never cached.", {"const": STREAM_HEADERS["Cache-Control"]}),
        "X-Accel-Buffering": header(
            "Tells nginx not to buffer the stream, so events arrive as they are made.",
            {"const": STREAM_HEADERS["X-Accel-Buffering"]},
        ),
        "X-Request-ID": header(
            "The request id (also `id` in the body and `start` event), as in the server log.",
            {"type": "string", "pattern": "^[0-9a-f]{16}$"},
        ),
        "Server-Timing": header(
            "Queue wait, time to first token and total time in milliseconds "
            "(shown by browser developer tools).",
            {"type": "string"},
            "queue;dur=0.234, ttft;dur=1.146, total;dur=3.249",
        ),
        "Retry-After": header(
            "Seconds to wait before retrying.", {"type": "integer", "minimum": 0}, retry_after
        ),
        "Allow": header("The methods the path accepts.", {"type": "string"}, "POST"),
    }


# The request header of an SSE resume, read by ``_native.last_event_id``.
LAST_EVENT_ID: Schema = {
    "name": "Last-Event-ID",
    "in": "header",
    **header(
        "SSE resume: the id of the last event received (empty: none).",
        {"type": "string", "pattern": "^[0-9]*$"},
        "3",
    ),
}
