"""liuyi's own API in the OpenAPI document: the facts about one app it is built from, the native
schemas (generated from ``_wire.py`` plus those facts) and the native operations."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from . import _native as native
from . import _wire_examples as examples
from ._openapi_schema import (
    LANGUAGE_ALIASES,
    SSE,
    Schema,
    header_ref,
    json_content,
    json_response,
    json_text,
    operation,
    prop,
    ref,
    sse_event,
)
from ._settings import Settings
from ._streaming import NDJSON, STREAM_HEADERS
from ._wire import NATIVE_MODELS
from ._wire_errors import error_code_schema, error_refs
from ._wire_schema import SchemaSet


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What the document says about one app."""

    settings: Settings
    models: tuple[tuple[str, str], ...]  # (bundle name, direction) of every loaded model
    max_input_chars: int  # the smallest limit of the loaded bundles
    directions: tuple[tuple[str, str], ...]  # (source, target) of every direction served
    served: frozenset[tuple[str, str]]  # (path, METHOD) of every route the app serves
    metrics: tuple[tuple[str, str, str], ...]  # (name, type, help) of every Prometheus metric

    @property
    def model(self) -> str:
        """The model named in examples."""
        return self.models[0][0] if self.models else "liuyi"

    @property
    def sources(self) -> frozenset[str]:
        return frozenset(source for source, _ in self.directions)

    @property
    def targets(self) -> frozenset[str]:
        return frozenset(target for _, target in self.directions)


# ---------------------------------------------------------------------------------------------
# Native schemas


def language_schema(role: str, languages: Collection[str], *, auto: bool) -> Schema:
    """The values this app accepts: only languages its models translate from (``auto``) or into."""
    aliases = {lang: names for lang, names in LANGUAGE_ALIASES.items() if lang in languages}
    names = "; ".join(f"`{lang}` (also {', '.join(a[1:])})" for lang, a in aliases.items())
    accepted = [alias for names_ in aliases.values() for alias in names_]
    schema = prop(["string", "null"], f"{role} {names}. Case-insensitive; `_` may replace `-`.")
    if auto:
        schema["description"] += (
            " `auto` (the default; also empty or null) guesses from the text: Chinese once Han characters "
            "are at least a quarter as many as Latin letters; a text without letters (digits, emoji) goes "
            "to a loaded model. A text guessed to be in a language no model translates from is a 400 "
            "`unsupported_direction`."
        )
        schema["default"] = "auto"
        accepted = ["auto", *accepted]
    else:
        schema["description"] += " Absent, empty or null: the other language of the pair."
    schema["enum"] = [*accepted, "", None]
    schema["examples"] = accepted[:3]
    return schema


EVENTS = ("start", "delta", "segment", "done", "error")  # what SSE names in `event:` (pings are comments)


def native_schemas(facts: Facts) -> dict[str, Schema]:
    """Generated from the wire models, plus what depends on this app: its languages and limit."""
    schemas = SchemaSet({"ErrorCode": error_code_schema()}).add(*NATIVE_MODELS).components
    languages = sorted(facts.sources | facts.targets)
    schemas["Language"] = {**schemas["Language"], "enum": languages}
    schemas["SourceLanguage"] = language_schema("Language of `text`:", facts.sources, auto=True)
    schemas["TargetLanguage"] = language_schema("Language to translate into:", facts.targets, auto=False)
    text = schemas["TranslateRequest"]["properties"]["text"]
    limit = facts.max_input_chars
    text["description"] = f"At most {limit} characters (413 `text_too_long` beyond). {text['description']}"
    text["maxLength"] = limit
    return schemas


# ---------------------------------------------------------------------------------------------
# Headers and parameters


def header_components(facts: Facts) -> dict[str, Schema]:
    purposes = {
        "Cache-Control": "Streams are never cached.",
        "X-Accel-Buffering": "Tells nginx not to buffer the stream, so events arrive as they are made.",
    }
    return {
        **{
            name: {"description": purposes[name], "schema": {"const": value}}
            for name, value in STREAM_HEADERS.items()
        },
        "X-Request-ID": {
            "description": "The request id (also `id` in the body and `start` event), as in the server log.",
            "schema": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
        },
        "Server-Timing": {
            "description": "Queue wait, time to first token and total time in milliseconds "
            "(shown by browser developer tools).",
            "schema": {"type": "string"},
            "example": "queue;dur=0.234, ttft;dur=1.146, total;dur=3.249",
        },
        "Retry-After": {
            "description": "Seconds to wait before retrying.",
            "schema": {"type": "integer", "minimum": 0},
            "example": facts.settings.retry_after,
        },
        "Allow": {
            "description": "The methods the path accepts.",
            "schema": {"type": "string"},
            "example": "POST",
        },
    }


def query_parameters(request: Schema) -> list[Schema]:
    """The fields of ``TranslateRequest`` as query parameters (GET /v1/translate/stream)."""
    return [
        {
            "name": name,
            "in": "query",
            "required": name in request["required"],
            "schema": schema,
            **({"example": examples.TEXT} if name == "text" else {}),
        }
        for name, schema in request["properties"].items()
    ]


# ---------------------------------------------------------------------------------------------
# Native paths


def stream_response(facts: Facts, *, ndjson: bool) -> Schema:
    sse = {
        "schema": sse_event(
            "Server-sent events: `id: <n>`, `event: <type>` and `data: <StreamEvent JSON>` per event, ids "
            "counting from 0 at `start`; heartbeats are comment lines (`: ping - <time>`).",
            json_text(ref("StreamEvent")),
            id=prop("string", "The event's index in the stream, from 0.", pattern="^[0-9]+$"),
            event=prop("string", "The `type` of `data`.", enum=list(EVENTS)),
        ),
        "example": examples.sse(facts.model),
    }
    content = {SSE: sse}
    if ndjson:
        content = {
            NDJSON: {
                "schema": ref("StreamEvent", "Each line is one StreamEvent (JSON, UTF-8)."),
                "example": examples.ndjson(facts.model),
            },
            **content,
        }
    return {
        "description": "The translation as it is made. Errors after this point are the final `error` event.",
        "headers": {name: header_ref(name) for name in (*STREAM_HEADERS, "X-Request-ID")},
        "content": content,
    }


def native_paths(facts: Facts, request_schema: Schema) -> dict[str, Schema]:
    checks = (400, 401, 413, 500, 503)  # what can fail before a stream's first byte
    options = {"text": "你好。我很好。", "source": "zh-CN", "target": "en", "max_new_tokens": 64}
    body = {
        "required": True,
        "content": json_content(ref("TranslateRequest"), simple={"text": examples.TEXT}, options=options),
    }
    last_event_id = {"$ref": "#/components/parameters/LastEventId"}
    ready = {"status": "ready", "models": [name for name, _ in facts.models]}
    metrics_text = {"description": "The metrics.", "content": {"text/plain": {"schema": {"type": "string"}}}}
    reply = examples.translate_reply(facts.model)
    timed = ("Server-Timing", "X-Request-ID")
    return {
        "/v1/translate": {
            "post": operation(
                "translation",
                "translate",
                native.translate,
                {
                    "200": json_response("The translation.", ref("TranslateResponse"), timed, example=reply),
                    **error_refs("native", (*checks, 415, 504)),
                },
                requestBody=body,
            )
        },
        "/v1/translate/stream": {
            "get": operation(
                "translation",
                "translateStreamGet",
                native.translate_stream,
                {"200": stream_response(facts, ndjson=False), **error_refs("native", checks)},
                summary="Stream a translation (SSE, for EventSource)",
                preface="For the browser's `EventSource`: the fields of TranslateRequest are query "
                "parameters, the API key (if any) is `api_key`, and the response is always SSE.\n\n",
                parameters=[*query_parameters(request_schema), last_event_id],
            ),
            "post": operation(
                "translation",
                "translateStream",
                native.translate_stream,
                {"200": stream_response(facts, ndjson=True), **error_refs("native", (*checks, 415))},
                parameters=[last_event_id],
                requestBody=body,
            ),
        },
        "/v1/models": open_get(
            "models", "listModels", native.models, json_response("The models.", ref("ModelList"))
        ),
        "/healthz": open_get(
            "operations",
            "healthz",
            native.healthz,
            json_response("Alive.", ref("Health"), ok={"status": "ok"}),
        ),
        "/readyz": open_get(
            "operations",
            "readyz",
            native.readyz,
            json_response("Ready.", ref("Readiness"), ready=ready),
            {
                "503": json_response(
                    "Not ready (this body, no error body, no Retry-After).",
                    ref("Readiness"),
                    draining={"status": "draining"},
                )
            },
        ),
        "/metrics": open_get(
            "operations", "metrics", native.metrics, metrics_text, appendix="\n\n" + metrics_table(facts)
        ),
    }


def open_get(
    tag: str, op_id: str, handler: Callable[..., Any], ok: Schema, more: Schema | None = None, **extra: Any
) -> Schema:
    """A GET that needs no key."""
    return {"get": operation(tag, op_id, handler, {"200": ok, **(more or {})}, security=[], **extra)}


def metrics_table(facts: Facts) -> str:
    suffixes = {"counter": "_total", "histogram": "_bucket`, `_sum`, `_count"}  # as exposed
    rows = [
        f"| `{name}{suffixes.get(kind, '')}` | {kind} | {help_text} |"
        for name, kind, help_text in facts.metrics
    ]
    return "\n".join(["| metric | type | meaning |", "|---|---|---|", *rows]) if rows else ""
