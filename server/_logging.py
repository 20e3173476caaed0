"""Logs as JSON lines: one object per record on stderr, for every logger (liuyi's access and error
lines, uvicorn's own), so a log shipper parses them without patterns.

Each object has ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, ``pid`` (which worker),
``request_id`` when the record was emitted while serving a request, the record's structured fields
(``extra={"fields": {...}}``, merged at the top level) and, for an exception, ``exception`` holding
the whole traceback as one JSON string: a traceback never spans several lines of the stream.

The request id travels in a context variable set by the access middleware: asyncio copies the
context into each request's task, so every record emitted on behalf of a request (including
uvicorn's "Exception in ASGI application") carries its id, and no other request sees it.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
from datetime import UTC, datetime
from typing import Any

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("liuyi_request_id", default=None)

# The attributes every LogRecord has; anything else was passed with ``extra=`` and is kept as a field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
# uvicorn decorates some records for its coloured console output; not useful in JSON.
_DROPPED = frozenset({"color_message", "fields"})


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process or os.getpid(),
        }
        request_id = REQUEST_ID.get()
        if request_id is not None:
            entry["request_id"] = request_id
        entry.update(getattr(record, "fields", None) or {})
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in _DROPPED and key not in entry:
                entry[key] = value
        if record.exc_info:
            kind = record.exc_info[0]
            entry["exception_type"] = kind.__name__ if kind is not None else None
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def logging_config(level: str) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` dictionary: every logger (root, uvicorn's) writes JSON lines
    to stderr at ``level``. uvicorn applies it again in each worker process (``log_config=``)."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    uvicorn_logger = {"handlers": [], "level": level.upper(), "propagate": True}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        "handlers": {"stderr": handler},
        "root": {"handlers": ["stderr"], "level": level.upper()},
        "loggers": {
            "uvicorn": uvicorn_logger,
            "uvicorn.error": uvicorn_logger,
            "uvicorn.access": uvicorn_logger,
        },
    }
