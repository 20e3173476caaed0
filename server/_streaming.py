"""The two ways a translation stream leaves the server: NDJSON lines and server-sent events.

Both read ``PreparedStream.events()`` inside ``aclosing``: when the client goes away the
generator is closed at once, and its ``finally`` stops the translation before the next decoder
step. Both guarantee exactly one final ``done`` or ``error`` because the events do (``_service``).

Deliberate choices — read before "fixing":

* Heartbeats. NDJSON writes the ``ping`` events the service makes after ``heartbeat_interval`` of
  silence; SSE drops them and lets sse-starlette send comment lines (``: ping - <time>``) on the
  same interval, which browsers' ``EventSource`` ignores.
* Shutdown. sse-starlette ends every open SSE response when *any* uvicorn server in the process
  starts to exit, through its process-global ``AppStatus``; switching that off means mutating the
  global for every app. ``EventStream`` instead opts out per response: liuyi's ``Lifecycle``
  drains streams on SIGTERM (finish within the grace period, then an ``error`` event), the same for
  NDJSON and SSE. ``tests/test_live_server.py`` pins both halves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.responses import StreamingResponse

from ._events import WireEvent, dumps
from ._service import PreparedStream
from ._settings import Settings

NDJSON = "application/x-ndjson"
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class EventStream(EventSourceResponse):
    """An SSE response with liuyi's framing (``\\n`` line ends, comment heartbeats, no buffering by
    proxies) that leaves server shutdown to ``Lifecycle`` (see the module docstring)."""

    def __init__(self, messages: AsyncIterator[ServerSentEvent], settings: Settings) -> None:
        super().__init__(messages, ping=settings.heartbeat_interval, sep="\n", headers=STREAM_HEADERS)

    async def _listen_for_exit_signal_with_grace(self) -> None:
        """sse-starlette's watcher of its process-global shutdown flag, replaced by: never. The
        stream ends when its events end, when the client goes, or when Lifecycle drains it."""
        await anyio.sleep_forever()


def ndjson_line(event: WireEvent) -> bytes:
    return (dumps(event) + "\n").encode()


def sse_message(event: WireEvent, index: int) -> ServerSentEvent:
    """``event:`` the type, ``id:`` the index in the stream, ``data:`` the event's JSON."""
    return ServerSentEvent(data=dumps(event), event=event["type"], id=str(index))


def ndjson_response(prepared: PreparedStream) -> StreamingResponse:
    async def lines() -> AsyncIterator[bytes]:
        async with aclosing(prepared.events()) as events:  # the translation stops when the client goes
            async for event in events:
                yield ndjson_line(event)

    return StreamingResponse(lines(), media_type=NDJSON, headers=STREAM_HEADERS)


def sse_response(prepared: PreparedStream, settings: Settings, resume_after: int) -> EventStream:
    """``event:`` is the event type, ``id:`` its index in the stream. A reconnect with Last-Event-ID
    replays the same deterministic stream (from the cache, or decoded again) and skips what the
    client already has."""

    async def messages() -> AsyncIterator[ServerSentEvent]:
        index = 0
        async with aclosing(prepared.events()) as events:  # not left to the garbage collector
            async for event in events:
                if event["type"] == "ping":
                    continue  # SSE heartbeats are comment lines sent by EventSourceResponse itself
                if index > resume_after:
                    yield sse_message(event, index)
                index += 1

    return EventStream(messages(), settings)
