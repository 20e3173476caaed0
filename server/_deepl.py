"""DeepL-compatible API: ``POST /v2/translate``, ``GET|POST /v2/languages``, ``GET|POST /v2/usage``
— enough for the official ``deepl`` client library and DeepL plugins pointed at this server.

Requests are JSON or form data (``text`` repeated); the key comes as ``Authorization: DeepL-Auth-Key
<key>`` (or the legacy ``auth_key`` parameter). Errors are ``{"message", "detail"}`` with DeepL's
statuses (400, 403 bad key, 429 overloaded + Retry-After), rendered by the app's one error handler.
Choices where DeepL's behaviour does not carry over:

- ``target_lang`` "EN", "EN-US", "EN-GB" all mean English (liuyi has one English); "ZH" and
  "ZH-HANS" mean Chinese. "ZH-HANT" is refused: the models write simplified Chinese.
- ``tag_handling`` "html" or "xml" keeps the tags and translates the text between them (``_texts``).
- ``glossary_id`` is refused (liuyi has no glossaries, and ignoring one would silently change the
  result); ``formality``, ``split_sentences``, ``preserve_formatting``, ``context``, ``model_type``
  and the like are accepted and ignored.
- ``billed_characters`` is always sent (the official client reads it unconditionally).
- ``/v2/usage`` counts the characters this process translated through this API; a self-hosted
  server has no quota, so ``character_limit`` is a very large number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from decoding import Bundle, language_name

from ._error_codes import ErrorCode
from ._errors import BadRequest
from ._http import (
    FORM_TYPES,
    JSON_TYPES,
    check_api_key,
    key_field,
    media_type,
    optional_str,
    query_fields,
    read_fields,
)
from ._native import services
from ._texts import text_list, translate_texts

NO_QUOTA = 10**12  # character_limit reported by /v2/usage
NO_GLOSSARY: tuple[object, ...] = (None, "", [])  # the values of glossary_id(s) that ask for no glossary
TARGETS = {"EN": "en", "EN-US": "en", "EN-GB": "en", "ZH": "zh", "ZH-HANS": "zh"}
# What /v2/languages lists for each language liuyi knows (source: [code, name]; target: variants).
_TARGET_VARIANTS = {
    "en": [("EN-GB", "English (British)"), ("EN-US", "English (American)")],
    "zh": [("ZH", "Chinese (simplified)"), ("ZH-HANS", "Chinese (simplified)")],
}


def deepl_codes(language: str, field: str) -> list[Any]:
    """The values of ``source_lang`` or ``target_lang`` that select ``language`` (the document lists
    them)."""
    if field == "source_lang":
        return [language.upper(), "", None]
    return [code for code, lang in TARGETS.items() if lang == language]


def target_language(body: Mapping[str, Any]) -> str:
    value = optional_str(body, "target_lang")
    if not value:
        raise BadRequest("'target_lang' is required, e.g. EN-US or ZH-HANS", param="target_lang")
    code = value.strip().upper().replace("_", "-")
    if code == "ZH-HANT":
        raise BadRequest(
            "target_lang ZH-HANT is not supported: liuyi's models write simplified Chinese (ZH-HANS)",
            code=ErrorCode.UNSUPPORTED_LANGUAGE,
            param="target_lang",
        )
    if code not in TARGETS:
        raise BadRequest(
            f"target_lang {value!r} is not supported; use one of: {', '.join(TARGETS)}",
            code=ErrorCode.UNSUPPORTED_LANGUAGE,
            param="target_lang",
        )
    return TARGETS[code]


@dataclass(frozen=True, slots=True)
class DeepLRequest:
    """A DeepL translate request, parsed."""

    texts: list[str]
    target: str  # liuyi's code ("en", "zh")
    source: str  # a code or "auto"
    markup: bool  # tag_handling html or xml


def deepl_request(body: Mapping[str, Any]) -> DeepLRequest:
    """The one parser of DeepL's translate request (JSON, or form fields with ``text`` repeated)."""
    texts, _ = text_list(body, "text")
    target = target_language(body)
    source = optional_str(body, "source_lang") or "auto"
    tags = (optional_str(body, "tag_handling") or "").lower()
    if tags not in ("", "html", "xml"):
        raise BadRequest(
            "'tag_handling' must be 'html' or 'xml'", code=ErrorCode.INVALID_OPTION, param="tag_handling"
        )
    if any(body.get(name) not in NO_GLOSSARY for name in ("glossary_id", "glossary_ids")):
        raise BadRequest(
            "glossaries are not supported by liuyi", code=ErrorCode.INVALID_OPTION, param="glossary_id"
        )
    return DeepLRequest(texts, target, source, markup=bool(tags))


async def translate(request: Request) -> Response:
    """Translate, DeepL-style

    For DeepL clients (`server_url=http://host:8000`).
    """
    service, settings = services(request)
    body = await read_fields(request, settings)
    check_api_key(request, settings, body_key=key_field(body, "auth_key"))
    req = deepl_request(body)
    texts = req.texts
    results = await translate_texts(service, texts, source=req.source, target=req.target, markup=req.markup)
    billed = [len(text) for text in texts]
    state = request.app.state
    state.deepl_characters = getattr(state, "deepl_characters", 0) + sum(billed)
    return JSONResponse(
        {
            "translations": [
                {
                    "detected_source_language": result.source.upper(),
                    "text": result.text,
                    "billed_characters": characters,
                }
                for result, characters in zip(results, billed, strict=True)
            ]
        }
    )


async def parameters(request: Request) -> Mapping[str, Any]:
    """Query parameters, plus the body's fields when there is one: the official client sends
    ``type=target`` as a form body even on GET. Both are checked, so a bad query parameter is not
    hidden by a good field of the same name in the body."""
    params = query_fields(request)
    kind_of_languages(params)
    if media_type(request) in (*JSON_TYPES, *FORM_TYPES):
        params.update(await read_fields(request, request.app.state.settings))
    return params


def kind_of_languages(params: Mapping[str, Any]) -> str:
    """``type`` of /v2/languages: ``source`` (also when absent) or ``target``."""
    kind = params.get("type", "source")
    if kind not in ("source", "target"):
        raise BadRequest("'type' must be 'source' or 'target'", code=ErrorCode.INVALID_FIELD, param="type")
    return str(kind)


def languages_of(bundles: list[Bundle], kind: str) -> list[dict[str, Any]]:
    if kind == "source":
        codes = sorted({b.manifest.source_lang for b in bundles})
        return [{"language": code.upper(), "name": language_name(code)} for code in codes]
    codes = sorted({b.manifest.target_lang for b in bundles})
    return [
        {"language": variant, "name": name, "supports_formality": False}
        for code in codes
        for variant, name in _TARGET_VARIANTS.get(code, [(code.upper(), code)])
    ]


async def languages(request: Request) -> Response:
    """Languages (DeepL)

    `type` (query or body): `source` (default) or `target`.
    """
    service, settings = services(request)
    params = await parameters(request)
    check_api_key(request, settings, body_key=key_field(params, "auth_key"))
    return JSONResponse(languages_of(service.registry.routes, kind_of_languages(params)))


async def usage(request: Request) -> Response:
    """Usage (DeepL)

    Characters translated through this API.
    """
    _, settings = services(request)
    params = await parameters(request)
    check_api_key(request, settings, body_key=key_field(params, "auth_key"))
    count = getattr(request.app.state, "deepl_characters", 0)
    return JSONResponse({"character_count": count, "character_limit": NO_QUOTA})


ROUTES = [
    Route("/v2/translate", translate, methods=["POST"]),
    Route("/v2/languages", languages, methods=["GET", "POST"]),
    Route("/v2/usage", usage, methods=["GET", "POST"]),
]
