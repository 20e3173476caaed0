"""Per request: an id (X-Request-ID, echoed on every response, carried by every log record emitted
while serving it), one structured log line (fields rendered as JSON by ``_logging``) and the request
metrics, measured to the last byte sent."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Sequence

from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._logging import REQUEST_ID

logger = logging.getLogger("liuyi.access")
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")  # a caller's own id is kept if it is harmless


class AccessLogMiddleware:
    """Pure ASGI (no BaseHTTPMiddleware): it must not buffer streaming bodies."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self._paths = {r.path for r in routes if isinstance(r, Route)}
        self._mounts = [r.path for r in routes if isinstance(r, Mount)]

    def route_label(self, path: str) -> str:
        """Bounded label values: a known route, a mount, or "unmatched" (never the raw path)."""
        if path in self._paths:
            return path
        return next((mount for mount in self._mounts if path.startswith(mount + "/")), "unmatched")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        route = self.route_label(scope["path"])
        given = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _CLIENT_ID.match(given) else uuid.uuid4().hex[:16]
        scope.setdefault("state", {})["request_id"] = request_id
        # not reset afterwards: the request's task ends with the request, and the server's own
        # records about it (e.g. an unhandled exception) are emitted after this middleware returns
        REQUEST_ID.set(request_id)

        async def send_and_watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())],
                }
            await send(message)

        try:
            await self.app(scope, receive, send_and_watch)
        finally:
            elapsed = time.perf_counter() - started
            app_state = scope["app"].state if "app" in scope else None
            metrics = getattr(app_state, "metrics", None)
            if metrics is not None:
                metrics.requests.labels(route, str(status)).inc()
                metrics.request_duration.labels(route).observe(elapsed)
            record = {
                "request_id": request_id,
                "method": scope["method"],
                "path": scope["path"],
                "route": route,
                "status": status,
                "duration_ms": round(elapsed * 1000, 3),
            }
            record.update(scope.get("state", {}).get("liuyi", {}))  # model, tokens, timings, error
            logger.info("%s %s %s", scope["method"], scope["path"], status, extra={"fields": record})
