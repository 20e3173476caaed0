"""Request bytes to Python values, strictly: the one place where hostile input is stopped.

Every route reads its input through here — JSON bodies, form bodies (URL-encoded or multipart) and
query strings — so every route refuses the same things, with the same codes, before any work:

* **bytes must be UTF-8**, strictly: no replacement characters, no encoded surrogates
  (``ED A0 80``), and the same for percent-escapes (``%ED%A0%80``, ``%FF``). Python's own parsers
  are lenient here on purpose (``json.loads`` decodes bytes with ``surrogatepass``, Starlette's
  query and form parsers with ``errors="replace"``), so they are not used on raw bytes.
* **JSON strings must be characters**: an escaped lone surrogate (``"\\ud800"``) is valid JSON but
  not Unicode text; it can be neither encoded nor translated and would fail far from here (it once
  reached the cache key's ``.encode()`` as a 500 that dropped the connection).
* **JSON nesting is bounded** (:data:`MAX_JSON_DEPTH`) by a scan *before* the parser recurses, so
  200 KB of brackets cost one regular-expression pass, not a ``RecursionError``.

Errors are ``BadRequest``: ``invalid_unicode``, ``invalid_json`` (``limit`` for nesting), ``invalid_form``.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

from python_multipart.multipart import MultipartParser, MultipartState, parse_options_header

from ._error_codes import ErrorCode
from ._errors import BadRequest

MAX_JSON_DEPTH = 32  # request bodies are flat objects; OpenAI messages nest 4 levels deep
Fields = list[tuple[str, str]]

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


def invalid_unicode(where: str, problem: str) -> BadRequest:
    return BadRequest(f"{where} {problem}", code=ErrorCode.INVALID_UNICODE)


def decode_json(body: bytes) -> Any:
    """Parse a JSON body.

    Raises:
        BadRequest: ``invalid_unicode`` (bytes not UTF-8, a lone surrogate in a string),
            ``invalid_json`` (malformed, or nested deeper than :data:`MAX_JSON_DEPTH`).
    """
    text = _utf8(body, "the body")
    if _nesting_exceeds(body, MAX_JSON_DEPTH):
        raise BadRequest(
            f"the body nests JSON deeper than {MAX_JSON_DEPTH} levels",
            code=ErrorCode.INVALID_JSON,
            details={"limit": MAX_JSON_DEPTH},
        )
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}", code=ErrorCode.INVALID_JSON) from None
    _check_strings(value, "the body")
    return value


def decode_urlencoded(body: bytes) -> Fields:
    """``application/x-www-form-urlencoded`` fields, percent-escapes decoded strictly.

    Raises:
        BadRequest: ``invalid_unicode``.
    """
    return _pairs(_utf8(body, "the form body"), "the form body")


def decode_query(raw: bytes) -> Fields:
    """The query string's parameters (raw bytes from the ASGI scope), decoded strictly.

    Raises:
        BadRequest: ``invalid_unicode``.
    """
    return _pairs(_utf8(raw, "the query string"), "the query string")


def decode_multipart(body: bytes, content_type: str) -> Fields:
    """The text fields of a ``multipart/form-data`` body (file parts are skipped: no route takes
    files). Each value is decoded as strict UTF-8.

    Raises:
        BadRequest: ``invalid_form`` (no boundary, malformed), ``invalid_unicode``.
    """
    _, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if not boundary:
        raise BadRequest("multipart form data without a boundary", code=ErrorCode.INVALID_FORM)
    parts: list[tuple[bytes, bytearray, bool]] = []  # (Content-Disposition, data, is a file)
    header: list[bytes] = [b"", b""]

    def part_begin() -> None:
        parts.append((b"", bytearray(), False))

    def header_field(data: bytes, start: int, end: int) -> None:
        header[0] += data[start:end]

    def header_value(data: bytes, start: int, end: int) -> None:
        header[1] += data[start:end]

    def header_end() -> None:
        name, value = header[0].lower(), header[1]
        if name == b"content-disposition":
            _, disposition = parse_options_header(value)
            parts[-1] = (disposition.get(b"name", b""), parts[-1][1], b"filename" in disposition)
        header[0] = header[1] = b""

    def part_data(data: bytes, start: int, end: int) -> None:
        parts[-1][1].extend(data[start:end])

    parser = MultipartParser(
        boundary,
        {
            "on_part_begin": part_begin,
            "on_header_field": header_field,
            "on_header_value": header_value,
            "on_header_end": header_end,
            "on_part_data": part_data,
        },
    )
    try:
        parser.write(body)
        parser.finalize()
    except Exception as exc:  # python-multipart raises its own untyped parse errors
        raise BadRequest(f"the form data is malformed: {exc}", code=ErrorCode.INVALID_FORM) from None
    if parser.state != MultipartState.END:  # a truncated body is not a smaller form
        raise BadRequest("the form data ends before its closing boundary", code=ErrorCode.INVALID_FORM)
    return [
        (_utf8(name, "a form field name"), _utf8(bytes(data), f"form field {name!r}"))
        for name, data, is_file in parts
        if name and not is_file
    ]


def _utf8(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid_unicode(where, f"is not valid UTF-8 (byte {exc.start})") from None


def _pairs(text: str, where: str) -> Fields:
    try:
        return parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        raise invalid_unicode(where, "has a percent-escape that is not UTF-8") from None


def _nesting_exceeds(body: bytes, limit: int) -> bool:
    if body.count(b"[") + body.count(b"{") <= limit:
        return False  # the common case: no scan at all
    depth = 0
    for match in _BRACKET.finditer(_JSON_STRING.sub(b"", body)):  # brackets outside strings
        depth += 1 if match.group() in (b"[", b"{") else -1
        if depth > limit:
            return True
    return False


def _check_strings(value: Any, where: str) -> None:
    """Refuse lone surrogates anywhere in parsed JSON (keys included)."""
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise invalid_unicode(
                    where, f"holds a lone surrogate (U+{ord(value[exc.start]):04X}), which is not a character"
                ) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(key, where)
            _check_strings(item, where)
    elif isinstance(value, list):
        for item in value:
            _check_strings(item, where)
