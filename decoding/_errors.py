"""Errors raised by the decoding engine.

Every error has a stable machine-readable ``code`` (part of liuyi's public API: the server puts it
in its JSON error bodies and stream ``error`` events) and a message a person can act on. The engine
knows nothing of HTTP; ``server/`` maps these classes to statuses in exactly one place.

    DecodingError                      code
    ├── BundleError                    bundle_invalid
    │   ├── BundleNotFoundError        bundle_not_found
    │   ├── BundleFileMissingError     bundle_file_missing
    │   ├── ChecksumMismatchError      bundle_checksum_mismatch
    │   ├── ManifestError              bundle_manifest_invalid
    │   └── GraphMismatchError         bundle_graph_mismatch
    ├── InputError                     invalid_input
    │   ├── EmptyInputError            empty_text
    │   ├── InputTooLongError          text_too_long
    │   ├── UnsupportedLanguageError   unsupported_language
    │   ├── UnsupportedDirectionError  unsupported_direction
    │   └── InvalidOptionError         invalid_option
    ├── InferenceError                 inference_failed
    └── EngineBusyError                engine_overloaded
"""

from __future__ import annotations

from pathlib import Path


class DecodingError(Exception):
    """Base class of every error the engine raises on purpose."""

    code = "decoding_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BundleError(DecodingError):
    """A model bundle cannot be used; the message names the bundle, the file and the problem."""

    code = "bundle_invalid"

    def __init__(self, bundle: str | Path, problem: str, *, file: str | None = None) -> None:
        where = f"bundle {str(bundle)!r}" + (f", file {file!r}" if file else "")
        super().__init__(f"{where}: {problem}")
        self.bundle = str(bundle)
        self.file = file
        self.problem = problem


class BundleNotFoundError(BundleError):
    code = "bundle_not_found"


class BundleFileMissingError(BundleError):
    code = "bundle_file_missing"


class ChecksumMismatchError(BundleError):
    code = "bundle_checksum_mismatch"


class ManifestError(BundleError):
    code = "bundle_manifest_invalid"


class GraphMismatchError(BundleError):
    code = "bundle_graph_mismatch"


class InputError(DecodingError):
    """The request cannot be translated as given; the caller should change it.

    ``field`` is the request field at fault by the engine's name for it (``text``,
    ``max_new_tokens``), or None. A message names its field in quotes (``'text' is empty``), so
    :meth:`message_for` can say it with the caller's name for the field (an API's ``q`` or
    ``max_tokens``): a server maps the error to its API without rewording it."""

    code = "invalid_input"
    field: str | None = None

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    def message_for(self, name: str) -> str:
        return self.message.replace(f"'{self.field}'", f"'{name}'") if self.field else self.message


class EmptyInputError(InputError):
    code = "empty_text"

    def __init__(self, field: str = "text") -> None:
        super().__init__(f"'{field}' is empty", field=field)


class InputTooLongError(InputError):
    code = "text_too_long"

    def __init__(self, length: int, limit: int, unit: str = "characters", field: str = "text") -> None:
        super().__init__(f"'{field}' is {length} {unit} long; the limit is {limit}", field=field)
        self.length = length
        self.limit = limit


class UnsupportedLanguageError(InputError):
    code = "unsupported_language"

    def __init__(self, language: str, known: list[str]) -> None:
        super().__init__(f"language {language!r} is not supported; use one of: {', '.join(known)}")
        self.language = language


class UnsupportedDirectionError(InputError):
    code = "unsupported_direction"

    def __init__(self, source: str, target: str, available: list[str]) -> None:
        have = ", ".join(available) or "none"
        super().__init__(f"no model translates {source}->{target}; available: {have}")
        self.source = source
        self.target = target
        self.available = available


class InvalidOptionError(InputError):
    code = "invalid_option"


class InferenceError(DecodingError):
    """ONNX Runtime failed while running a graph (a bug or a broken bundle, not the caller's fault)."""

    code = "inference_failed"


class EngineBusyError(DecodingError):
    """The batch scheduler's queue is full; try again shortly."""

    code = "engine_overloaded"
