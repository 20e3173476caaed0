"""The vocabulary of the OpenAPI document (``_openapi.py``): schema helpers, the error-code table,
error responses per API flavour, and the security schemes.

Error examples are rendered by ``_errors.error_payload`` itself, so each flavour's body shape and
status (429 for 503 on the compatibility APIs, 403 for 401 on LibreTranslate and DeepL) cannot
drift from what the server sends.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from ._errors import ApiError, error_payload
from ._settings import Settings

Schema = dict[str, Any]
JSON = "application/json"
SSE = "text/event-stream"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
FLAVOURS = ("native", "openai", "libretranslate", "deepl")
COMPAT_FORMS = ("libretranslate", "deepl")  # the flavours that also read form bodies


def ref(name: str, description: str | None = None) -> Schema:
    schema: Schema = {"$ref": f"#/components/schemas/{name}"}
    if description:
        schema["description"] = description
    return schema


def header_ref(name: str) -> Schema:
    return {"$ref": f"#/components/headers/{name}"}


def prop(kind: str | list[str], description: str, **extra: Any) -> Schema:
    return {"type": kind, "description": description, **extra}


def obj(
    description: str, properties: dict[str, Schema], *, optional: Collection[str] = (), **extra: Any
) -> Schema:
    """An object schema whose properties are all required except those named in ``optional``."""
    return {
        "type": "object",
        "description": description,
        "properties": properties,
        "required": [name for name in properties if name not in optional],
        **extra,
    }


def array(items: Schema, description: str, **extra: Any) -> Schema:
    return {"type": "array", "items": items, "description": description, **extra}


def one_or_many(items: Schema, description: str) -> Schema:
    """A value or a list of them (LibreTranslate's ``q``, DeepL's ``text``)."""
    return {"description": description, "anyOf": [items, {"type": "array", "items": items, "minItems": 1}]}


def json_content(schema: Schema, **examples: Any) -> Schema:
    content: Schema = {"schema": schema}
    if examples:
        content["examples"] = {name: {"value": value} for name, value in examples.items()}
    return {JSON: content}


def json_response(description: str, schema: Schema, headers: Iterable[str] = (), **examples: Any) -> Schema:
    response: Schema = {"description": description, "content": json_content(schema, **examples)}
    if headers:
        response["headers"] = {name: header_ref(name) for name in headers}
    return response


def fields_body(schema: Schema, **examples: Any) -> Schema:
    """A request body sent as JSON or as form fields (LibreTranslate, DeepL)."""
    forms = {kind: {"schema": schema} for kind in FORM_TYPES}
    return {"required": True, "content": {**json_content(schema, **examples), **forms}}


def operation(
    tag: str, op_id: str, summary: str, description: str, responses: Schema, **extra: Any
) -> Schema:
    return {
        "tags": [tag],
        "operationId": op_id,
        "summary": summary,
        "description": description,
        **extra,
        "responses": responses,
    }


# ---------------------------------------------------------------------------------------------
# Error codes: the one table behind the ErrorCode schema, every error response and the code table.


@dataclass(frozen=True)
class Code:
    code: str
    status: int  # liuyi's status (a flavour may send another, see _errors.error_payload)
    meaning: str
    example: str  # a message the server sends with this code
    param: str | None = None
    details: dict[str, int] = field(default_factory=dict)
    flavours: tuple[str, ...] = FLAVOURS  # the APIs that can send it
    answered: bool = True  # False: only logged and counted (the client is gone), no response documented

    def error(self) -> ApiError:
        error = ApiError(self.example, code=self.code, param=self.param, details=dict(self.details))
        error.status = self.status
        return error


def _bundle(code: str, problem: str) -> Code:
    meaning = f"The model bundle is broken ({problem}); refused at startup, so in practice never sent."
    return Code(code, 500, meaning, "the model failed on this request")


ERROR_CODES = (
    Code(
        "invalid_json",
        400,
        "The body is not JSON, not a JSON object, or nests deeper than `limit` (32) levels.",
        "the body must be a JSON object",
    ),
    Code(
        "invalid_unicode",
        400,
        "The body, a form field or the query string is not valid UTF-8 (also percent-escapes), or a JSON "
        "string holds a lone surrogate (`\\ud800`): text must be Unicode characters.",
        "the body holds a lone surrogate (U+D800), which is not a character",
    ),
    Code(
        "invalid_field",
        400,
        "A field has the wrong type or value (e.g. `text` is not a string), or `Last-Event-ID` is not an "
        "event id. `param` names the field or header.",
        "'text' must be a string",
        param="text",
    ),
    Code(
        "invalid_form",
        400,
        "The form body is malformed.",
        "the form data is malformed",
        flavours=COMPAT_FORMS,
    ),
    Code("missing_text", 400, "The text to translate is absent or null.", "'text' is required", param="text"),
    Code("empty_text", 400, "The text has no non-space character.", "'text' is empty", param="text"),
    Code(
        "invalid_option",
        400,
        "An option is out of range, e.g. `max_new_tokens` is not an integer >= 1.",
        "'max_new_tokens' must be an integer >= 1",
        param="max_new_tokens",
    ),
    Code(
        "unsupported_language",
        400,
        "A language code liuyi does not know.",
        "language 'fr' is not supported; use one of: zh, en, auto",
    ),
    Code(
        "unsupported_direction",
        400,
        "No loaded model translates between the two languages (see GET /v1/models), e.g. en->zh when only "
        "zh->en is loaded — also when `source: auto` guesses English.",
        "no model translates en->zh; available: zh-en",
    ),
    Code("invalid_input", 400, "Any other input the engine refuses (generic).", "invalid input"),
    Code("decoding_error", 400, "Any other engine error caused by the request (generic).", "decoding error"),
    Code(
        "http_error",
        400,
        "A request the HTTP framework itself rejects; the status is the framework's.",
        "Bad Request",
    ),
    Code("missing_api_key", 401, "API keys are configured and none was sent.", "an API key is required"),
    Code("invalid_api_key", 401, "The key is not one of the configured keys.", "the API key is not valid"),
    Code("not_found", 404, "No route has this path.", "no route for GET /v1/translat"),
    Code(
        "model_not_found",
        404,
        "`model` is neither a loaded bundle, nor its alias, nor `liuyi`/`liuyi-auto`.",
        "the model 'gpt-4' does not exist; available: cn2en-gru-zh-en, liuyi, liuyi-auto",
        param="model",
        flavours=("openai",),
    ),
    Code(
        "method_not_allowed",
        405,
        "The path exists, but not with this method; `Allow` lists the methods.",
        "GET is not allowed on /v1/translate",
    ),
    Code(
        "body_too_large",
        413,
        "The body is larger than the server's limit (`limit`, in bytes); refused before parsing.",
        "request body exceeds 262144 bytes",
        details={"limit": 262144},
    ),
    Code(
        "text_too_long",
        413,
        "The text is longer than the model accepts (`limit`, `length`: characters). Split it.",
        "text is 6000 characters long; the limit is 5000",
        param="text",
        details={"limit": 5000, "length": 6000},
    ),
    Code(
        "unsupported_media_type",
        415,
        "The body is not JSON (LibreTranslate and DeepL endpoints also take form data).",
        "send the body as application/json (got text/plain)",
    ),
    Code(
        "overloaded",
        503,
        "Every decoding slot is busy and the queue is full: retry after `Retry-After` seconds.",
        "16 translations running and 64 queued; try again shortly",
        details={"retry_after": 1},
    ),
    Code(
        "shutting_down",
        503,
        "The server is draining before it stops: retry (another replica) after `Retry-After`. As a stream's "
        "`error` event: the shutdown grace period ended first.",
        "the server is shutting down",
    ),
    Code(
        "request_timeout",
        504,
        "The translation did not finish within the request timeout (in a stream: the `error` event).",
        "no result within 60 s",
    ),
    Code(
        "client_closed_request",
        499,
        "The client closed the connection before its request was read. Never received by anyone: it "
        "names such requests in access logs and metrics (nginx's 499), apart from server errors.",
        "the client closed the connection while sending the body",
        answered=False,
    ),
    Code("internal_error", 500, "A bug; details are in the server log only.", "internal server error"),
    Code(
        "inference_failed", 500, "ONNX Runtime failed running the model.", "the model failed on this request"
    ),
    _bundle("bundle_invalid", "an ONNX graph does not load"),
    _bundle("bundle_not_found", "its directory is missing"),
    _bundle("bundle_file_missing", "a file of its manifest is missing"),
    _bundle("bundle_checksum_mismatch", "a file's sha256 differs from the manifest"),
    _bundle("bundle_manifest_invalid", "manifest.json is invalid"),
    _bundle("bundle_graph_mismatch", "the graphs do not match the manifest"),
)
STATUS_HEADERS = {503: ("Retry-After",), 405: ("Allow",)}
ERROR_SCHEMAS = {
    "native": "ErrorResponse",
    "openai": "OpenAIErrorResponse",
    "libretranslate": "LibreTranslateError",
    "deepl": "DeepLError",
}


def codes_of(flavour: str, status: int) -> list[Code]:
    return [c for c in ERROR_CODES if c.status == status and flavour in c.flavours and c.answered]


def sent_status(flavour: str, status: int) -> int:
    """The status a flavour's clients get for one of liuyi's statuses."""
    return error_payload(codes_of(flavour, status)[0].error(), flavour)[0]


def error_response(flavour: str, status: int) -> Schema:
    codes = codes_of(flavour, status)
    sent = sent_status(flavour, status)
    note = f" (liuyi's {status}; sent as {sent}, as the original service does)" if sent != status else ""
    examples = {
        c.code: {"summary": c.code, "description": c.meaning, "value": error_payload(c.error(), flavour)[1]}
        for c in codes
    }
    return {
        "description": f"{HTTPStatus(sent).phrase}{note}: " + ", ".join(f"`{c.code}`" for c in codes) + ".",
        "headers": {name: header_ref(name) for name in STATUS_HEADERS.get(status, ())},
        "content": {JSON: {"schema": ref(ERROR_SCHEMAS[flavour]), "examples": examples}},
    }


def error_refs(flavour: str, statuses: Iterable[int]) -> dict[str, Schema]:
    """The ``responses`` entries of an operation that can fail with ``statuses`` (liuyi's own)."""
    refs = {}
    for status in statuses:
        sent = sent_status(flavour, status)
        refs[str(sent)] = {"$ref": f"#/components/responses/{flavour}_{sent}"}
    return refs


def error_components() -> dict[str, Schema]:
    statuses = sorted({c.status for c in ERROR_CODES})
    return {
        f"{flavour}_{sent_status(flavour, status)}": error_response(flavour, status)
        for flavour in FLAVOURS
        for status in statuses
        if codes_of(flavour, status)
    }


def error_code_schema() -> Schema:
    return {
        "type": "string",
        "description": "Stable machine-readable error code: branch on it, not on messages.",
        "oneOf": [{"const": c.code, "description": f"HTTP {c.status}. {c.meaning}"} for c in ERROR_CODES],
    }


def error_code_table() -> str:
    rows = [f"| `{c.code}` | {c.status} | {c.meaning} |" for c in ERROR_CODES]
    return "\n".join(["| code | status | meaning |", "|---|---|---|", *rows])


# ---------------------------------------------------------------------------------------------
# Security

SCHEMES = {
    "bearerAuth": {"type": "http", "scheme": "bearer", "description": "`Authorization: Bearer <key>`."},
    "apiKeyHeader": {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": "`X-API-Key: <key>`.",
    },
    "apiKeyQuery": {
        "type": "apiKey",
        "in": "query",
        "name": "api_key",
        "description": "`?api_key=<key>`, for clients that cannot set headers (a browser's `EventSource`). "
        "URLs end up in logs: prefer a header.",
    },
    "deeplAuthKey": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "`Authorization: DeepL-Auth-Key <key>`, as DeepL clients send it.",
    },
}


def security(settings: Settings) -> list[Schema]:
    """Any scheme works on any secured endpoint; with no keys configured, none is needed (``{}``)."""
    return [{name: []} for name in SCHEMES] + ([] if settings.auth_required else [{}])
