"""Every error code a client can see: the one table that raise sites, the HTTP status of an error,
the OpenAPI document (``ErrorCode`` schema, error responses and examples), the docstrings and the
README's table (``python -m server._error_codes``) all read.

A raise site names a member of :class:`ErrorCode`; the status comes from the table, never from the
raise site, so a code cannot be sent with two statuses. Engine errors (``decoding.DecodingError``)
carry the same code strings and are mapped by ``_errors.to_api_error``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from enum import StrEnum

FLAVOURS = ("native", "openai", "libretranslate", "deepl")
COMPAT_FORMS = ("libretranslate", "deepl")  # the flavours that also read form bodies


class ErrorCode(StrEnum):
    INVALID_JSON = "invalid_json"
    INVALID_UNICODE = "invalid_unicode"
    INVALID_FIELD = "invalid_field"
    INVALID_FORM = "invalid_form"
    MISSING_TEXT = "missing_text"
    EMPTY_TEXT = "empty_text"
    INVALID_OPTION = "invalid_option"
    UNSUPPORTED_LANGUAGE = "unsupported_language"
    UNSUPPORTED_DIRECTION = "unsupported_direction"
    INVALID_INPUT = "invalid_input"
    DECODING_ERROR = "decoding_error"
    HTTP_ERROR = "http_error"
    MISSING_API_KEY = "missing_api_key"
    INVALID_API_KEY = "invalid_api_key"
    NOT_FOUND = "not_found"
    MODEL_NOT_FOUND = "model_not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    BODY_TOO_LARGE = "body_too_large"
    TEXT_TOO_LONG = "text_too_long"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    OVERLOADED = "overloaded"
    SHUTTING_DOWN = "shutting_down"
    REQUEST_TIMEOUT = "request_timeout"
    HEADER_TIMEOUT = "header_timeout"
    CLIENT_CLOSED_REQUEST = "client_closed_request"
    INTERNAL_ERROR = "internal_error"
    INFERENCE_FAILED = "inference_failed"
    BUNDLE_INVALID = "bundle_invalid"
    BUNDLE_NOT_FOUND = "bundle_not_found"
    BUNDLE_FILE_MISSING = "bundle_file_missing"
    BUNDLE_CHECKSUM_MISMATCH = "bundle_checksum_mismatch"
    BUNDLE_MANIFEST_INVALID = "bundle_manifest_invalid"
    BUNDLE_GRAPH_MISMATCH = "bundle_graph_mismatch"


@dataclass(frozen=True)
class Code:
    code: ErrorCode
    status: int  # liuyi's status (a flavour may send another, see _errors.error_payload)
    meaning: str
    example: str  # a message the server sends with this code
    param: str | None = None
    details: dict[str, int] = field(default_factory=dict)
    flavours: tuple[str, ...] = FLAVOURS  # the APIs that can send it
    answered: bool = True  # False: only logged and counted (the client is gone), no response documented


def _bundle(code: ErrorCode, problem: str) -> Code:
    meaning = f"The model bundle is broken ({problem}); refused at startup, so in practice never sent."
    return Code(code, 500, meaning, "the model failed on this request")


TABLE: tuple[Code, ...] = (
    Code(
        ErrorCode.INVALID_JSON,
        400,
        "The body is not JSON, not a JSON object, or nests deeper than `limit` (32) levels.",
        "the body must be a JSON object",
    ),
    Code(
        ErrorCode.INVALID_UNICODE,
        400,
        "The body, a form field or the query string is not valid UTF-8 (also percent-escapes), or a JSON "
        "string holds a lone surrogate (`\\ud800`): text must be Unicode characters.",
        "the body holds a lone surrogate (U+D800), which is not a character",
    ),
    Code(
        ErrorCode.INVALID_FIELD,
        400,
        "A field has the wrong type or value (e.g. `text` is not a string), or `Last-Event-ID` is not an "
        "event id. `param` names the field or header.",
        "'text' must be a string",
        param="text",
    ),
    Code(
        ErrorCode.INVALID_FORM,
        400,
        "The form body is malformed.",
        "the form data is malformed",
        flavours=COMPAT_FORMS,
    ),
    Code(
        ErrorCode.MISSING_TEXT,
        400,
        "The text to translate is absent or null.",
        "'text' is required",
        param="text",
    ),
    Code(ErrorCode.EMPTY_TEXT, 400, "The text has no non-space character.", "'text' is empty", param="text"),
    Code(
        ErrorCode.INVALID_OPTION,
        400,
        "An option is out of range, e.g. `max_new_tokens` is not an integer >= 1.",
        "'max_new_tokens' must be an integer >= 1",
        param="max_new_tokens",
    ),
    Code(
        ErrorCode.UNSUPPORTED_LANGUAGE,
        400,
        "A language code liuyi does not know.",
        "language 'fr' is not supported; use one of: zh, en, auto",
    ),
    Code(
        ErrorCode.UNSUPPORTED_DIRECTION,
        400,
        "No loaded model translates between the two languages (see GET /v1/models), e.g. en->zh when only "
        "zh->en is loaded (`source: auto` never fails so: it falls back to a model serving the target).",
        "no model translates en->zh; available: zh-en",
    ),
    Code(ErrorCode.INVALID_INPUT, 400, "Any other input the engine refuses (generic).", "invalid input"),
    Code(
        ErrorCode.DECODING_ERROR,
        400,
        "Any other engine error caused by the request (generic).",
        "decoding error",
    ),
    Code(
        ErrorCode.HTTP_ERROR,
        400,
        "A request the HTTP framework itself rejects; the status is the framework's.",
        "Bad Request",
    ),
    Code(
        ErrorCode.MISSING_API_KEY, 401, "API keys are configured and none was sent.", "an API key is required"
    ),
    Code(
        ErrorCode.INVALID_API_KEY,
        401,
        "The key is not one of the configured keys.",
        "the API key is not valid",
    ),
    Code(ErrorCode.NOT_FOUND, 404, "No route has this path.", "no route for GET /v1/translat"),
    Code(
        ErrorCode.MODEL_NOT_FOUND,
        404,
        "`model` is neither a loaded bundle, nor its alias, nor `liuyi`/`liuyi-auto`.",
        "the model 'gpt-4' does not exist; available: cn2en-gru-zh-en, liuyi, liuyi-auto",
        param="model",
        flavours=("openai",),
    ),
    Code(
        ErrorCode.METHOD_NOT_ALLOWED,
        405,
        "The path exists, but not with this method; `Allow` lists the methods.",
        "GET is not allowed on /v1/translate",
    ),
    Code(
        ErrorCode.BODY_TOO_LARGE,
        413,
        "The body is larger than the server's limit (`limit`, in bytes); refused before parsing.",
        "request body exceeds 262144 bytes",
        details={"limit": 262144},
    ),
    Code(
        ErrorCode.TEXT_TOO_LONG,
        413,
        "The text is longer than the model accepts (`limit`, `length`: characters). Split it.",
        "'text' is 6000 characters long; the limit is 5000",
        param="text",
        details={"limit": 5000, "length": 6000},
    ),
    Code(
        ErrorCode.UNSUPPORTED_MEDIA_TYPE,
        415,
        "The body is not JSON (LibreTranslate and DeepL endpoints also take form data).",
        "send the body as application/json (got text/plain)",
    ),
    Code(
        ErrorCode.OVERLOADED,
        503,
        "Every decoding slot is busy and the queue is full: retry after `Retry-After` seconds.",
        "16 translations running and 64 queued; try again shortly",
        details={"retry_after": 1},
    ),
    Code(
        ErrorCode.SHUTTING_DOWN,
        503,
        "The server is draining before it stops: retry (another replica) after `Retry-After`. As a stream's "
        "`error` event: the shutdown grace period ended first.",
        "the server is shutting down",
    ),
    Code(
        ErrorCode.REQUEST_TIMEOUT,
        504,
        "The translation did not finish within the request timeout (in a stream: the `error` event).",
        "no result within 60 s",
    ),
    Code(
        ErrorCode.HEADER_TIMEOUT,
        408,
        "The request headers did not arrive within `--header-timeout` seconds (a slow or silent "
        "client); the connection is closed. Sent before any route runs, so in the native shape.",
        "the request headers did not arrive in time",
        flavours=("native",),
    ),
    Code(
        ErrorCode.CLIENT_CLOSED_REQUEST,
        499,
        "The client closed the connection before its request was read. Never received by anyone: it "
        "names such requests in access logs and metrics (nginx's 499), apart from server errors.",
        "the client closed the connection while sending the body",
        answered=False,
    ),
    Code(
        ErrorCode.INTERNAL_ERROR, 500, "A bug; details are in the server log only.", "internal server error"
    ),
    Code(
        ErrorCode.INFERENCE_FAILED,
        500,
        "ONNX Runtime failed running the model.",
        "the model failed on this request",
    ),
    _bundle(ErrorCode.BUNDLE_INVALID, "an ONNX graph does not load"),
    _bundle(ErrorCode.BUNDLE_NOT_FOUND, "its directory is missing"),
    _bundle(ErrorCode.BUNDLE_FILE_MISSING, "a file of its manifest is missing"),
    _bundle(ErrorCode.BUNDLE_CHECKSUM_MISMATCH, "a file's sha256 differs from the manifest"),
    _bundle(ErrorCode.BUNDLE_MANIFEST_INVALID, "manifest.json is invalid"),
    _bundle(ErrorCode.BUNDLE_GRAPH_MISMATCH, "the graphs do not match the manifest"),
)

CODES: dict[ErrorCode, Code] = {entry.code: entry for entry in TABLE}
assert len(CODES) == len(TABLE) == len(ErrorCode), "every ErrorCode has exactly one row"


def status_of(code: ErrorCode) -> int:
    return CODES[code].status


def markdown_table() -> str:
    """The README's table of error codes."""
    rows = [f"| `{c.code}` | {c.status} | {c.meaning} |" for c in TABLE]
    return "\n".join(["| code | status | meaning |", "|---|---|---|", *rows])


if __name__ == "__main__":
    sys.stdout.write(markdown_table() + "\n")
