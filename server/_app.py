"""The Starlette application: routes, middleware, the one error handler, and the lifespan that owns
every shared resource (models, schedulers, cache, metrics). Nothing lives in module globals."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from decoding import (
    Bundle,
    DecodingError,
    LoadOptions,
    ModelRegistry,
    RuntimeOptions,
    bundled_models,
    load_bundle,
)

from ._cache import TranslationCache
from ._error_codes import ErrorCode
from ._errors import ApiError, InternalError, MethodNotAllowed, NotFound, error_payload, to_api_error
from ._metrics import Metrics
from ._middleware import AccessLogMiddleware
from ._native import ROUTES as NATIVE_ROUTES
from ._openapi import openapi_route
from ._service import Lifecycle, TranslationService
from ._settings import Settings

logger = logging.getLogger("liuyi")
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
# Which error shape a path's clients expect (see _errors.error_payload).
_LIBRETRANSLATE_PATHS = frozenset({"/translate", "/languages", "/detect", "/frontend/settings"})


def flavour_of(path: str) -> str:
    if path.startswith("/v1/chat/"):
        return "openai"
    if path.startswith("/v2/"):
        return "deepl"
    if path in _LIBRETRANSLATE_PATHS:
        return "libretranslate"
    return "native"


def load_models(settings: Settings) -> list[Bundle]:
    options = LoadOptions(
        runtime=RuntimeOptions(intra_op_num_threads=settings.inference_threads, shared_thread_pool=True),
        max_input_chars=settings.max_input_chars,
    )
    paths = list(settings.models) or bundled_models()[:1]
    return [load_bundle(path, options=options) for path in paths]


def create_app(settings: Settings | None = None, *, bundles: Sequence[Bundle] | None = None) -> Starlette:
    """Build the app. ``bundles`` lets tests share models already loaded (else the lifespan loads them)."""
    settings = settings or Settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loaded = list(bundles) if bundles is not None else await asyncio.to_thread(load_models, settings)
        metrics = Metrics()
        lifecycle = Lifecycle()
        cache = TranslationCache(
            size=settings.cache_size,
            max_bytes=settings.cache_bytes,
            metrics=metrics,
            redis_url=settings.redis_url,
            ttl=settings.cache_ttl,
        )
        service = TranslationService(ModelRegistry(loaded), settings, metrics, cache, lifecycle)
        app.state.settings, app.state.metrics, app.state.lifecycle = settings, metrics, lifecycle
        app.state.service = service
        restore = _drain_on_sigterm(lifecycle, settings.shutdown_grace)
        try:
            await service.warm_up()
            lifecycle.ready = True
            logger.info("ready: %s", ", ".join(f"{b.name} ({b.direction})" for b in loaded))
            yield
        finally:
            restore()
            lifecycle.ready = False
            await service.close()

    routes: list[BaseRoute] = [*NATIVE_ROUTES, openapi_route(), *_compat_routes()]
    if STATIC_DIR.is_dir():
        routes += [
            Route("/", _index, methods=["GET"]),
            Mount("/static", app=_RevalidatedStaticFiles(directory=STATIC_DIR), name="static"),
        ]
    middleware = [Middleware(AccessLogMiddleware, routes=routes)]
    if settings.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(settings.cors_origins),
                allow_methods=["GET", "POST", "OPTIONS"],
                allow_headers=["Authorization", "Content-Type", "X-API-Key", "Last-Event-ID", "Accept"],
                expose_headers=["Retry-After", "Server-Timing", "X-Request-ID"],
                max_age=600,
            )
        )
    # Innermost: any exception no handler below knows (a bug) becomes our JSON 500 here, without
    # Starlette's ServerErrorMiddleware, which re-raises it and so makes uvicorn drop the connection.
    middleware.append(Middleware(_CatchAllMiddleware))
    # ApiError/DecodingError/HTTPException are answered by the exception middleware.
    handlers: dict[Any, Callable[..., Any]] = {
        ApiError: _handle_error,
        DecodingError: _handle_error,
        HTTPException: _handle_error,
    }
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers, lifespan=lifespan)
    app.state.settings = settings
    return app


def _compat_routes() -> list[BaseRoute]:
    from ._compat import ROUTES

    return list(ROUTES)


class _RevalidatedStaticFiles(StaticFiles):
    """Static files that browsers must revalidate (ETag / Last-Modified make that cheap), so a
    server upgrade never pairs a new index.html with a cached old app.js."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "no-cache"
        return response


async def _index(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})


async def _handle_error(request: Request, exc: Exception) -> Response:
    """Expected errors (bad input, overload, HTTP errors Starlette raises) become responses here."""
    if isinstance(exc, HTTPException):
        if exc.status_code == 405:
            error: ApiError = MethodNotAllowed(
                f"{request.method} is not allowed on {request.url.path}", headers=dict(exc.headers or {})
            )
        elif exc.status_code == 404:
            error = NotFound(f"no route for {request.method} {request.url.path}")
        else:
            error = ApiError(exc.detail, code=ErrorCode.HTTP_ERROR, status=exc.status_code)
    else:
        error = to_api_error(exc, retry_after=request.app.state.settings.retry_after)
        if not isinstance(exc, ApiError) and error.status >= 500:
            logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(request.scope, error)


def error_response(scope: Scope, error: ApiError) -> Response:
    """The one place where an error becomes a response: the API flavour's body, counted by code and
    named in the request's access-log line."""
    status, body = error_payload(error, flavour_of(scope["path"]))
    scope.setdefault("state", {}).setdefault("liuyi", {})["error"] = error.code
    app_state = scope["app"].state if "app" in scope else None
    metrics = getattr(app_state, "metrics", None)
    if metrics is not None:
        metrics.errors.labels(error.code).inc()
    return JSONResponse(body, status_code=status, headers=error.headers)


class _CatchAllMiddleware:
    """A bug in a route must cost one request, not the connection: answer a JSON 500 (logged here,
    with its traceback, on the server only) and return normally so the connection stays usable.
    Once a response has started nothing can be said any more: the exception goes on to the server,
    which closes the connection (an unfinished body must not look complete). Streams end with an
    ``error`` event before that can happen (see ``_service``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception:
            if started:
                raise
            logger.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            response = error_response(scope, InternalError("internal server error"))
            await response(scope, receive, send)


def _drain_on_sigterm(lifecycle: Lifecycle, grace: float) -> Callable[[], None]:
    """Chain a drain step in front of the server's own SIGTERM/SIGINT handling (uvicorn installs its
    handlers before the lifespan starts): stop admitting, let streams finish within ``grace``, then
    end them with an error event — while uvicorn stops accepting connections and waits for them.
    Returns the function that puts the previous handlers back."""
    loop = asyncio.get_running_loop()
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        loop.call_soon_threadsafe(lifecycle.begin_drain, grace)
        previous[signum](signum, frame)

    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            current = signal.getsignal(sig)
            if callable(current):  # only in front of a server's handler: never swallow a default exit
                previous[sig] = current
                signal.signal(sig, handler)
    except ValueError:  # not the main thread (e.g. a server run inside a test thread)
        return lambda: None

    def restore() -> None:
        for sig, old in previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, old)

    return restore
