"""The compatibility APIs in the OpenAPI document: OpenAI chat completions, LibreTranslate, DeepL.

Documented briefly: the request fields liuyi reads, the response fields it sends, and where it
differs from the original service. Other fields of the original APIs are accepted and ignored.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from . import _wire_examples as examples
from ._deepl import deepl_codes
from ._libretranslate import libre_languages
from ._openai import AUTO_MODELS
from ._openapi_schema import (
    SSE,
    Schema,
    array,
    fields_body,
    header_refs,
    json_body,
    json_content,
    json_response,
    json_text,
    operation,
    query_object,
    served_languages,
    sse_event,
)
from ._wire_schema import NOT_BLANK, form_fields, ref

VISIBLE = {"properties": {"text": {"pattern": NOT_BLANK}}}  # a text part with a visible character
TRANSLATING = (400, 401, 413, 415, 500, 503, 504)  # what a translating endpoint can fail with
READING = (400, 401, 413, 415)  # endpoints that read a body but translate nothing
OPEN: list[Schema] = []  # no key needed


def compat_schemas(
    schemas: dict[str, Schema], models: Sequence[tuple[str, str]], directions: Collection[tuple[str, str]]
) -> None:
    """Adds to the schemas generated from the wire models this app's facts: ``models`` (bundle name,
    direction) and the ``directions`` (source, target) they serve."""
    chat = schemas["ChatCompletionRequest"]["properties"]
    chat["model"]["examples"] = [*(f"liuyi-{d}" for _, d in models), *(n for n, _ in models), *AUTO_MODELS]
    user_turn = {"type": "object", "properties": {"role": {"const": "user"}}, "required": ["role"]}
    chat["messages"]["contains"] = user_turn
    visible = {"anyOf": [{"type": "string", "pattern": NOT_BLANK}, {"type": "array", "contains": VISIBLE}]}
    # the user's text must have a visible character (400 `empty_text`)
    schemas["ChatMessage"].update(
        {"if": user_turn, "then": {"required": ["content"], "properties": {"content": visible}}}
    )
    served_languages(schemas["LibreTranslateRequest"], directions, ("source", "target"), libre_languages)
    served_languages(
        schemas["DeepLTranslateRequest"], directions, ("source_lang", "target_lang"), deepl_codes
    )
    for name in ("LibreTranslate", "DeepLTranslate"):
        schemas[f"{name}Form"] = form_fields(schemas[f"{name}Request"])


def compat_operations(model: str) -> dict[str, Schema]:
    """The compatibility APIs' operations, by ``METHOD /path``."""
    text, translation = examples.TEXT, examples.TRANSLATION
    chat = {"model": "liuyi-zh-en", "messages": [{"role": "user", "content": text}]}
    detected = {"confidence": 100.0, "language": "zh"}
    chunk_or_error = json_text({"anyOf": [ref("ChatCompletionChunk"), ref("OpenAIErrorResponse")]})
    chat_sse = sse_event(
        "`data: <ChatCompletionChunk>` events, then `data: [DONE]` (or one `data: <OpenAIErrorResponse>` "
        "after a failure).",
        {"anyOf": [{"const": "[DONE]"}, chunk_or_error]},
    )
    chat_ok = {
        "description": "The completion (JSON), or its chunks (SSE) when `stream` is true.",
        "headers": header_refs(["X-Request-ID"]),
        "content": {
            **json_content(ref("ChatCompletion"), completion=examples.chat_completion(model)),
            SSE: {"schema": chat_sse, "example": examples.chat_stream(model)},
        },
    }
    chat_body = json_body(ref("ChatCompletionRequest"), chat=chat, stream={**chat, "stream": True})
    libre_ok = json_response(
        "The translation(s).",
        ref("LibreTranslateResponse"),
        one={"translatedText": translation},
        auto={"translatedText": [translation], "detectedLanguage": [detected]},
    )
    libre_body = fields_body(
        ref("LibreTranslateRequest"),
        ref("LibreTranslateForm"),
        one={"q": text, "source": "zh", "target": "en"},
        auto={"q": [text], "source": "auto", "target": "en"},
        html={"q": f"<p>{text}</p>", "target": "en", "format": "html"},
    )
    guess = json_response("One guess.", array(ref("Detection"), "The guess."), zh=[detected])
    deepl_reply = {
        "translations": [{"detected_source_language": "ZH", "text": translation, "billed_characters": 4}]
    }
    deepl_ok = json_response("The translations.", ref("DeepLTranslateResponse"), en=deepl_reply)
    deepl_body = fields_body(
        ref("DeepLTranslateRequest"), ref("DeepLTranslateForm"), en={"text": [text], "target_lang": "EN-US"}
    )
    languages = json_response("The languages.", array(ref("LibreTranslateLanguage"), "Languages."))
    languages_of = array(ref("DeepLLanguage"), "Languages.")
    return {
        "POST /v1/chat/completions": operation(
            "openai", "chatCompletions", chat_ok, (*TRANSLATING, 404), requestBody=chat_body
        ),
        "POST /translate": operation(
            "libretranslate", "libreTranslate", libre_ok, TRANSLATING, requestBody=libre_body
        ),
        "POST /detect": operation(
            "libretranslate",
            "libreDetect",
            guess,
            READING,
            requestBody=fields_body(ref("DetectRequest"), zh={"q": text}),
        ),
        "GET /languages": operation("libretranslate", "libreLanguages", languages, security=OPEN),
        "GET /frontend/settings": operation(
            "libretranslate",
            "libreFrontendSettings",
            json_response("The settings.", ref("FrontendSettings")),
            security=OPEN,
        ),
        "POST /v2/translate": operation(
            "deepl", "deeplTranslate", deepl_ok, TRANSLATING, requestBody=deepl_body
        ),
        **deepl_reads("/v2/languages", "deeplLanguages", languages_of, "DeepLLanguagesRequest"),
        **deepl_reads("/v2/usage", "deeplUsage", ref("DeepLUsage"), "DeepLUsageRequest"),
    }


def deepl_reads(path: str, op_id: str, schema: Schema, request: str) -> dict[str, Schema]:
    """/v2/languages and /v2/usage: GET or POST, the fields of ``request`` in the query or a body."""
    query = {"parameters": [query_object(request)]}
    body = {**fields_body(ref(request)), "required": False}
    ok = json_response("The answer.", schema)
    return {
        f"GET {path}": operation("deepl", op_id, ok, READING, **query),
        f"POST {path}": operation("deepl", f"{op_id}Post", ok, READING, requestBody=body, **query),
    }
