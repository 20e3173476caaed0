"""LibreTranslate-compatible API: ``POST /translate``, ``POST /detect``, ``GET /languages``,
``GET /frontend/settings`` — so LibreTranslate clients and plugins work unchanged.

Bodies are JSON or form data, as LibreTranslate accepts; errors are ``{"error": "..."}`` with
LibreTranslate's statuses (400 bad input, 403 bad key, 429 overloaded + Retry-After, 500), rendered
by the app's one error handler. Where we differ, on purpose:

- ``source`` may be left out (it means "auto"); ``target`` is required.
- ``format: "html"`` keeps every tag and translates the text between them (see ``_texts``).
- ``alternatives`` is accepted and answered with empty lists: greedy decoding has one answer.
- ``/languages`` and ``/frontend/settings`` need no key (as in LibreTranslate); ``/translate`` and
  ``/detect`` do when keys are configured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from decoding import CLIENT_SPELLINGS, Bundle, detect_language, language_name, nonblank

from ._error_codes import ErrorCode
from ._errors import BadRequest
from ._http import check_api_key, key_field, optional_str, read_fields, text_field
from ._native import services
from ._texts import Translated, text_list, translate_texts


def percent(confidence: float) -> float:
    """LibreTranslate reports detection confidence on a 0-100 scale."""
    return round(confidence * 100, 2)


def detected(result: Translated) -> dict[str, Any]:
    return {"confidence": percent(result.confidence), "language": result.source}


@dataclass(frozen=True, slots=True)
class LibreRequest:
    """A LibreTranslate translate request, parsed."""

    texts: list[str]
    many: bool  # ``q`` was a list: so is the answer
    source: str  # a code or "auto"
    target: str
    html: bool
    alternatives: int


def libre_request(body: Mapping[str, Any]) -> LibreRequest:
    """The one parser of LibreTranslate's request (JSON or form fields)."""
    texts, many = text_list(body, "q")
    source = optional_str(body, "source", "auto") or "auto"
    target = optional_str(body, "target")
    if not target:
        raise BadRequest("'target' is required: the language code to translate into", param="target")
    kind = optional_str(body, "format", "text") or "text"
    if kind not in ("text", "html"):
        raise BadRequest(f"'format' must be 'text' or 'html' (got {kind!r})", param="format")
    return LibreRequest(texts, many, source, target, html=kind == "html", alternatives=_alternatives(body))


def libre_languages(language: str, field: str) -> list[Any]:
    """The values of ``source`` or ``target`` that select ``language`` (the document lists them)."""
    spellings = list(CLIENT_SPELLINGS[language])
    return ["auto", *spellings, "", None] if field == "source" else spellings


async def translate(request: Request) -> Response:
    """Translate, LibreTranslate-style

    `q` may be a list; `format: html` keeps the markup. With `source: auto`, a text already in the
    target language comes back unchanged.
    """
    service, settings = services(request)
    body = await read_fields(request, settings)
    check_api_key(request, settings, body_key=key_field(body, "api_key"))
    req = libre_request(body)
    results = await translate_texts(service, req.texts, source=req.source, target=req.target, markup=req.html)
    payload: dict[str, Any] = {
        "translatedText": [r.text for r in results] if req.many else results[0].text,
    }
    if req.source.strip().lower() == "auto":
        payload["detectedLanguage"] = [detected(r) for r in results] if req.many else detected(results[0])
    if req.alternatives > 0:
        payload["alternatives"] = [[] for _ in results] if req.many else []
    return JSONResponse(payload)


def _alternatives(body: Mapping[str, Any]) -> int:
    """How many alternatives were asked for (form data sends numbers as strings)."""
    value = body.get("alternatives", 0)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, float) and value.is_integer():  # 2.0 is the integer 2 in JSON Schema too
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(
            "'alternatives' must be an integer >= 0", code=ErrorCode.INVALID_OPTION, param="alternatives"
        )
    return value


async def detect(request: Request) -> Response:
    """Detect the language

    Han characters vs Latin letters; `confidence` is 0-100.
    """
    _, settings = services(request)
    body = await read_fields(request, settings)
    check_api_key(request, settings, body_key=key_field(body, "api_key"))
    detection = detect_language(nonblank(text_field(body, "q"), "q"))
    return JSONResponse([{"confidence": percent(detection.confidence), "language": detection.language}])


def languages_of(bundles: list[Bundle]) -> list[dict[str, Any]]:
    """One entry per language liuyi translates from, with the languages it translates it into."""
    targets: dict[str, list[str]] = {}
    for bundle in bundles:
        m = bundle.manifest
        targets.setdefault(m.source_lang, []).append(m.target_lang)
    return [
        {"code": code, "name": language_name(code), "targets": sorted(set(to))}
        for code, to in sorted(targets.items())
    ]


async def languages(request: Request) -> Response:
    """Languages (LibreTranslate)

    One entry per source language of the loaded models.
    """
    service, _ = services(request)
    return JSONResponse(languages_of(service.registry.routes))


async def frontend_settings(request: Request) -> Response:
    """Settings for LibreTranslate's web page

    Some clients read it to learn the limits.
    """
    service, settings = services(request)
    first = service.registry.bundles[0].manifest.target_lang if service.registry.bundles else "en"
    return JSONResponse(
        {
            "apiKeys": settings.auth_required,
            "keyRequired": settings.auth_required,
            "charLimit": settings.max_input_chars,
            "frontendTimeout": 500,
            "suggestions": False,
            "filesTranslation": False,
            "supportedFilesFormat": [],
            "language": {
                "source": {"code": "auto", "name": "Auto Detect"},
                "target": {"code": first, "name": language_name(first)},
            },
        }
    )


ROUTES = [
    Route("/translate", translate, methods=["POST"]),
    Route("/detect", detect, methods=["POST"]),
    Route("/languages", languages, methods=["GET"]),
    Route("/frontend/settings", frontend_settings, methods=["GET"]),
]
