"""HTTP errors: every failure a client can see has a stable ``code``, a message and a status.

This module is the one place where errors become HTTP: engine errors (``decoding.DecodingError``)
are mapped to :class:`ApiError` by :func:`to_api_error`, and each API flavour renders an
``ApiError`` in its own shape (native, OpenAI, LibreTranslate, DeepL) — the status is shared.

    ApiError                     its code names its status (the row of ``_error_codes.TABLE``)
    ├── BadRequest               default code invalid_field
    ├── Unauthorized             default code invalid_api_key
    ├── NotFound                 default code not_found
    ├── MethodNotAllowed         default code method_not_allowed
    ├── PayloadTooLarge          default code body_too_large
    ├── UnsupportedMediaType     default code unsupported_media_type
    ├── Overloaded               default code overloaded (+ Retry-After)
    ├── RequestTimeout           default code request_timeout
    ├── ClientClosedRequest      default code client_closed_request (logged and counted, never sent)
    └── InternalError            default code internal_error

The subclasses only choose a default code: the status always comes from the code's row in the one
table, so a code is never sent with two statuses (``http_error`` alone carries the status of the
HTTP exception Starlette raised). The engine's own ``engine_overloaded`` never reaches a client: it
becomes ``overloaded``.

Before a stream's first byte an error is an HTTP status with a JSON body; after it, the same error
is the stream's final ``error`` event (the status is already 200).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from decoding import (
    BundleError,
    DecodingError,
    EngineBusyError,
    InferenceError,
    InputError,
    InputTooLongError,
)

from ._error_codes import ErrorCode, status_of
from ._wire import ErrorFields, ErrorResponse


class ApiError(Exception):
    default_code = ErrorCode.INTERNAL_ERROR

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        details: dict[str, Any] | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        if status is not None and self.code != ErrorCode.HTTP_ERROR:
            raise ValueError("only http_error carries its own status; the table gives every other one")
        self.status = status or status_of(self.code)
        self.param = param  # the request field at fault, when there is one
        self.headers = headers or {}
        self.details = details or {}  # extra machine-readable facts, e.g. {"limit": 5000}

    def body(self) -> ErrorResponse:
        """liuyi's native error shape."""
        error: ErrorFields = {"code": self.code, "message": self.message}
        if self.param:
            error["param"] = self.param
        error.update(cast(ErrorFields, self.details))  # limit, length, retry_after
        return {"error": error}


class BadRequest(ApiError):
    default_code = ErrorCode.INVALID_FIELD


class Unauthorized(ApiError):
    default_code = ErrorCode.INVALID_API_KEY


class NotFound(ApiError):
    default_code = ErrorCode.NOT_FOUND


class MethodNotAllowed(ApiError):
    default_code = ErrorCode.METHOD_NOT_ALLOWED


class PayloadTooLarge(ApiError):
    default_code = ErrorCode.BODY_TOO_LARGE


class UnsupportedMediaType(ApiError):
    default_code = ErrorCode.UNSUPPORTED_MEDIA_TYPE


class Overloaded(ApiError):
    default_code = ErrorCode.OVERLOADED


class RequestTimeout(ApiError):
    default_code = ErrorCode.REQUEST_TIMEOUT


class ClientClosedRequest(ApiError):
    default_code = ErrorCode.CLIENT_CLOSED_REQUEST


class InternalError(ApiError):
    default_code = ErrorCode.INTERNAL_ERROR


# How each API family shapes an error body; the status is shared, except that the compatibility
# APIs say 429 (not 503) when overloaded, and LibreTranslate/DeepL say 403 for a bad key, as the
# real services do (their clients branch on those statuses).
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    504: "timeout_error",
}


def error_payload(error: ApiError, flavour: str) -> tuple[int, Mapping[str, object]]:
    """(status, body) for ``flavour`` in "native", "openai", "libretranslate", "deepl"."""
    status = error.status
    if flavour != "native" and status == 503:
        status = 429
    if flavour == "openai":
        return status, {
            "error": {
                "message": error.message,
                "type": _OPENAI_TYPES.get(status, "server_error"),
                "param": error.param,
                "code": error.code,
            }
        }
    if flavour in ("libretranslate", "deepl") and status == 401:
        status = 403
    if flavour == "libretranslate":
        return status, {"error": error.message}
    if flavour == "deepl":
        return status, {"message": error.message, "detail": error.code}
    return status, error.body()


def to_api_error(
    exc: BaseException, *, retry_after: int = 1, names: Mapping[str, str] | None = None
) -> ApiError:
    """The single mapping from any exception to what the client sees. An engine error about a field
    names it by ``names`` (the client's API's name for each engine field, e.g. OpenAI's
    ``max_tokens`` for ``max_new_tokens``; the same name when absent) in ``param`` and the message.
    Unknown exceptions become a bare 500 whose message reveals nothing of the internals (they are
    logged, not sent)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, InputError):
        param = (names or {}).get(exc.field, exc.field) if exc.field else None
        message, code = exc.message_for(param) if param else exc.message, ErrorCode(exc.code)
        if isinstance(exc, InputTooLongError):
            details = {"limit": exc.limit, "length": exc.length}
            return PayloadTooLarge(message, code=code, param=param, details=details)
        return BadRequest(message, code=code, param=param)
    if isinstance(exc, EngineBusyError):
        return Overloaded(
            exc.message, headers={"Retry-After": str(retry_after)}, details={"retry_after": retry_after}
        )
    if isinstance(exc, InferenceError | BundleError):
        return InternalError("the model failed on this request", code=ErrorCode(exc.code))
    if isinstance(exc, DecodingError):
        return BadRequest(exc.message, code=ErrorCode(exc.code))
    return InternalError("internal server error")
