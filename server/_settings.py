"""Server configuration: one frozen dataclass, built once (from the command line and ``LIUYI_*``
environment variables) and passed explicitly to ``create_app``.

Precedence: command-line flag > environment variable > the default written here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Settings:
    # Model bundle directories, at most one per direction; empty = the bundled zh->en model.
    models: tuple[Path, ...] = ()
    host: str = "127.0.0.1"  # loopback by default: exposing the server is a deliberate choice
    port: int = 8000
    workers: int = 1  # processes; each loads the models (~40 MB for the default model)
    threads: int = 0  # ONNX Runtime threads per decoder call; 0 = cores / workers - 1 (at least 1)
    max_input_chars: int = 5000  # longer texts get 413 text_too_long before any work
    max_body_bytes: int = 256 * 1024  # request bodies above this get 413 before JSON parsing
    max_concurrent_streams: int = 16  # sequences decoded together per model (the batch size)
    max_queued: int = 64  # waiting for a place; beyond that: 503 (native) / 429 (compat) + Retry-After
    request_timeout: float = 60.0  # seconds from arrival to the last token; then request_timeout
    cache_size: int = 1024  # finished translations kept in memory (LRU); 0 = no cache
    cache_bytes: int = 64 << 20  # memory those may take (serialized); 0 = no in-process cache
    cache_ttl: int = 24 * 3600  # seconds a translation lives in Redis
    redis_url: str | None = None  # e.g. redis://127.0.0.1:6379/0: cache shared by workers/replicas
    api_keys: tuple[str, ...] = ()  # empty = no authentication
    cors_origins: tuple[str, ...] = ()  # empty = CORS off; "*" = any origin
    log_level: str = "info"
    heartbeat_interval: float = 15.0  # seconds of silence before a ping (SSE comment / NDJSON line)
    shutdown_grace: float = 10.0  # on SIGTERM, running streams get this long, then an error event
    retry_after: int = 1  # seconds suggested to overloaded clients
    # Seconds a connection may take to send its request headers (from connecting, or from the first
    # byte of its next request); slower clients get 408 and are closed. Not applied to responses.
    header_timeout: float = 10.0
    keep_alive_timeout: float = 5.0  # seconds an idle keep-alive connection stays open

    @property
    def auth_required(self) -> bool:
        return bool(self.api_keys)

    @property
    def inference_threads(self) -> int:
        """``threads``, or each worker's share of the cores minus one for its event loop: under load
        the loop (HTTP, JSON, streaming) needs a core too, and ONNX Runtime's spinning pool threads
        would take it. Measured on 2 cores, default model, 10 users: 1 thread 616 QPS / P95 25 ms,
        2 threads 371 QPS / P95 44 ms (bench/load.py)."""
        return self.threads or max(1, (os.cpu_count() or 1) // self.workers - 1)


def _paths(value: str) -> tuple[Path, ...]:
    return tuple(Path(part) for part in value.replace(",", os.pathsep).split(os.pathsep) if part)


def _words(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


# Fields whose LIUYI_* value is a list or may be empty; every other field parses as its scalar type.
_PARSERS: dict[str, Any] = {
    "models": _paths,
    "api_keys": _words,
    "cors_origins": _words,
    "redis_url": lambda v: v or None,
}


def env_name(field_name: str) -> str:
    return "LIUYI_" + field_name.upper()


def settings_from(environ: Mapping[str, str], **overrides: Any) -> Settings:
    """Defaults, then ``LIUYI_*`` variables, then explicit overrides (None means "not given").

    Raises:
        ValueError: a variable that does not parse, naming it.
    """
    values: dict[str, Any] = {}
    for field in fields(Settings):
        raw = environ.get(env_name(field.name))
        if raw is None:
            continue
        parse = _PARSERS.get(field.name) or _scalar_parser(field.type)
        try:
            values[field.name] = parse(raw)
        except ValueError:
            raise ValueError(f"{env_name(field.name)}={raw!r} is not a valid {field.name}") from None
    values.update({name: value for name, value in overrides.items() if value is not None})
    settings = Settings(**values)
    _check(settings)
    return settings


def _scalar_parser(kind: object) -> Any:
    return {"int": int, "float": float, "str": str}.get(str(kind).split(" ")[0], str)


def _check(settings: Settings) -> None:
    positive = ("port", "workers", "max_input_chars", "max_body_bytes", "max_concurrent_streams")
    for name in positive:
        if getattr(settings, name) < 1:
            raise ValueError(f"{name} must be at least 1")
    for name in ("threads", "max_queued", "cache_size", "cache_bytes", "cache_ttl", "retry_after"):
        if getattr(settings, name) < 0:
            raise ValueError(f"{name} must not be negative")
    for name in ("request_timeout", "heartbeat_interval", "header_timeout", "keep_alive_timeout"):
        if getattr(settings, name) <= 0:
            raise ValueError(f"{name} must be positive")
    if settings.shutdown_grace < 0:
        raise ValueError("shutdown_grace must not be negative")
