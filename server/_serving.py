"""uvicorn as liuyi runs it: JSON logs, connection timeouts, one or several worker processes.

Connection limits that live here (per connection, before and between requests):

- ``header_timeout``: from the first byte a connection could send (or the first byte of its next
  request) to the end of its request headers. uvicorn has no such limit: its keep-alive timer stops
  at the first byte, so a client that trickles header bytes ("slowloris") or opens a connection
  and sends nothing held it forever. Past the limit the connection gets ``408`` and is closed.
- ``keep_alive_timeout``: idle time between requests (uvicorn's ``timeout_keep_alive``).

Neither applies once the headers are in: a response, however long it streams, is bounded only by
``request_timeout`` (see ``_service``). Body upload speed, connection counts per client and TLS
belong to the proxy in front (README, "Running behind a proxy").
"""

from __future__ import annotations

import asyncio
import json
import logging
from http import HTTPStatus
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.supervisors import Multiprocess

from ._error_codes import CODES, ErrorCode
from ._logging import logging_config
from ._settings import Settings

logger = logging.getLogger("liuyi.connection")
_TIMEOUT = CODES[ErrorCode.HEADER_TIMEOUT]
_TIMEOUT_BODY = json.dumps({"error": {"code": _TIMEOUT.code.value, "message": _TIMEOUT.example}}).encode()
_TIMEOUT_RESPONSE = (
    f"HTTP/1.1 {_TIMEOUT.status} {HTTPStatus(_TIMEOUT.status).phrase}\r\n".encode()
    + b"content-type: application/json\r\nconnection: close\r\n"
    + b"content-length: "
    + str(len(_TIMEOUT_BODY)).encode()
    + b"\r\n\r\n"
    + _TIMEOUT_BODY
)


class ServerConfig(uvicorn.Config):
    """uvicorn's Config plus the header timeout, which the protocol reads from it. A module-level
    class so that it pickles into worker processes with the rest of the configuration."""

    def __init__(self, app: Any, *, header_timeout: float, **options: Any) -> None:
        super().__init__(app, **options)
        self.header_timeout = header_timeout


class _HeaderDeadline:
    """Mixed in front of a uvicorn HTTP protocol class. Both of uvicorn's HTTP/1.1 protocols create
    a new ``cycle`` exactly when a request's headers are complete; that is the signal used here,
    so no parser callback is overridden."""

    transport: asyncio.Transport
    cycle: Any
    loop: asyncio.AbstractEventLoop
    config: Any
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        between_requests = before is None or before.response_complete
        super().data_received(data)  # type: ignore[misc]
        if self.cycle is not before:  # headers complete: the request is now the app's business
            self._cancel_header_timer()
        elif between_requests and self._header_timer is None:  # first bytes of the next request
            self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm_header_timer(self) -> None:
        timeout = getattr(self.config, "header_timeout", None)
        if timeout and not self.transport.is_closing():
            self._header_timer = self.loop.call_later(timeout, self._headers_too_slow)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        peer = self.transport.get_extra_info("peername")
        logger.info("request headers too slow: connection closed", extra={"fields": {"peer": peer}})
        self.transport.write(_TIMEOUT_RESPONSE)
        self.transport.close()


class H11WithHeaderTimeout(_HeaderDeadline, H11Protocol):
    """uvicorn's pure-Python HTTP/1.1 protocol with the header deadline."""


try:  # the faster parser when installed, as uvicorn's "auto" would pick
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - depends on the install
    PROTOCOL: type[asyncio.Protocol] = H11WithHeaderTimeout
else:  # pragma: no cover - depends on the install

    class HttpToolsWithHeaderTimeout(_HeaderDeadline, HttpToolsProtocol):
        """uvicorn's httptools HTTP/1.1 protocol with the header deadline."""

    PROTOCOL = HttpToolsWithHeaderTimeout


def server_config(settings: Settings, app: Any, *, factory: bool = False) -> ServerConfig:
    """The uvicorn configuration for ``settings``; ``app`` is an app, or an import string for a
    factory (``factory=True``, needed with several workers: each process builds its own app)."""
    return ServerConfig(
        app,
        header_timeout=settings.header_timeout,
        factory=factory,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        http=PROTOCOL,
        timeout_keep_alive=settings.keep_alive_timeout,
        timeout_graceful_shutdown=int(settings.shutdown_grace) + 2,
        log_config=logging_config(settings.log_level),
        log_level=settings.log_level,
        access_log=False,  # liuyi's middleware writes the access lines, with more fields
        lifespan="on",
        ws="none",
    )


def run(config: ServerConfig) -> bool:
    """Serve until SIGTERM/SIGINT, in this process or in ``config.workers`` worker processes (what
    ``uvicorn.run`` does, with our Config). Returns False when the server never started."""
    if config.workers > 1:
        Multiprocess(config, sockets=[config.bind_socket()]).run()
        return True
    server = uvicorn.Server(config)
    server.run()
    return server.started
