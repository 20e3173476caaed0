"""HTTP errors: every failure a client can see has a stable ``code``, a message and a status.

This module is the one place where errors become HTTP: engine errors (``decoding.DecodingError``)
are mapped to :class:`ApiError` by :func:`to_api_error`, and each API flavour renders an
``ApiError`` in its own shape (native, OpenAI, LibreTranslate, DeepL) — the status is shared.

    ApiError                     status  code(s)
    ├── BadRequest               400     invalid_json, invalid_form, invalid_unicode, invalid_field,
    │                                    missing_text, empty_text, invalid_option,
    │                                    unsupported_language, unsupported_direction
    ├── Unauthorized             401     missing_api_key, invalid_api_key
    ├── NotFound                 404     not_found, model_not_found (OpenAI API)
    ├── MethodNotAllowed         405     method_not_allowed
    ├── PayloadTooLarge          413     body_too_large, text_too_long
    ├── UnsupportedMediaType     415     unsupported_media_type
    ├── Overloaded               503     overloaded, shutting_down   (+ Retry-After; 429 on compat APIs)
    ├── RequestTimeout           504     request_timeout
    ├── ClientClosedRequest      499     client_closed_request (the client left before its request
    │                                    was read: logged and counted, never sent — nginx's status)
    └── InternalError            500     internal_error, inference_failed, bundle_* (a broken model)

(``http_error`` carries the status of any other HTTP exception Starlette raises. The engine's own
``engine_overloaded`` never reaches a client: it becomes ``overloaded``.)

Before a stream's first byte an error is an HTTP status with a JSON body; after it, the same error
is the stream's final ``error`` event (the status is already 200).
"""

from __future__ import annotations

from typing import Any

from decoding import (
    BundleError,
    DecodingError,
    EmptyInputError,
    EngineBusyError,
    InferenceError,
    InputTooLongError,
    InvalidOptionError,
    UnsupportedDirectionError,
    UnsupportedLanguageError,
)


class ApiError(Exception):
    status = 500
    code = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.param = param  # the request field at fault, when there is one
        self.headers = headers or {}
        self.details = details or {}  # extra machine-readable facts, e.g. {"limit": 5000}

    def body(self) -> dict[str, Any]:
        """liuyi's native error shape."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.param:
            error["param"] = self.param
        error.update(self.details)
        return {"error": error}


class BadRequest(ApiError):
    status = 400
    code = "invalid_field"


class Unauthorized(ApiError):
    status = 401
    code = "invalid_api_key"


class NotFound(ApiError):
    status = 404
    code = "not_found"


class MethodNotAllowed(ApiError):
    status = 405
    code = "method_not_allowed"


class PayloadTooLarge(ApiError):
    status = 413
    code = "body_too_large"


class UnsupportedMediaType(ApiError):
    status = 415
    code = "unsupported_media_type"


class Overloaded(ApiError):
    status = 503
    code = "overloaded"


class RequestTimeout(ApiError):
    status = 504
    code = "request_timeout"


class ClientClosedRequest(ApiError):
    status = 499
    code = "client_closed_request"


class InternalError(ApiError):
    status = 500
    code = "internal_error"


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


def error_payload(error: ApiError, flavour: str) -> tuple[int, dict[str, Any]]:
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


def to_api_error(exc: BaseException, *, retry_after: int = 1) -> ApiError:
    """The single mapping from any exception to what the client sees. Unknown exceptions become a
    bare 500 whose message reveals nothing of the internals (they are logged, not sent)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, EmptyInputError):
        return BadRequest(exc.message, code=exc.code, param="text")
    if isinstance(exc, InputTooLongError):
        return PayloadTooLarge(
            exc.message, code=exc.code, param="text", details={"limit": exc.limit, "length": exc.length}
        )
    if isinstance(exc, UnsupportedLanguageError | UnsupportedDirectionError | InvalidOptionError):
        return BadRequest(exc.message, code=exc.code)
    if isinstance(exc, EngineBusyError):
        return Overloaded(
            exc.message, headers={"Retry-After": str(retry_after)}, details={"retry_after": retry_after}
        )
    if isinstance(exc, InferenceError | BundleError):
        return InternalError("the model failed on this request", code=exc.code)
    if isinstance(exc, DecodingError):
        return BadRequest(exc.message, code=exc.code)
    return InternalError("internal server error")
