"""The compatibility APIs' wire shapes (OpenAI chat completions, LibreTranslate, DeepL), as the
builders in ``_openai.py``, ``_libretranslate.py`` and ``_deepl.py`` fill them and the OpenAPI
document describes them (see ``_wire.py`` for how; ``_openapi_compat.py`` adds the per-app facts:
model names, the languages served)."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired, TypedDict

from ._error_codes import ErrorCode
from ._wire_schema import NOT_BLANK, Doc

OneOrMany = Annotated[
    Annotated[str, Doc(pattern=NOT_BLANK)] | Annotated[list[str], Doc(minItems=1)],
    Doc("A text, or a list of texts (blank items of a list come back as they were)."),
]
ApiKey = Annotated[str, Doc("The API key, when keys are configured.")]

# --- OpenAI


class TextPart(TypedDict):
    """A text part."""

    type: Literal["text"]
    text: str


class ChatMessage(TypedDict):
    """A chat message."""

    role: Annotated[str, Doc("`user` messages are translated, others ignored.")]
    content: NotRequired[
        Annotated[
            str | Annotated[list[TextPart], Doc("Text parts (other kinds are refused).")],
            Doc('A string, or a list of `{"type": "text", "text"}` parts (one per line).'),
        ]
    ]


class StreamOptions(TypedDict):
    """`include_usage: true` adds a last chunk with `usage` (others say null)."""

    include_usage: NotRequired[bool]


MaxTokens = Annotated[int | None, Doc("`max_new_tokens` per sentence (see /v1/translate).", minimum=1)]


class ChatCompletionRequest(TypedDict):
    """The last `user` message is translated; system prompts, earlier turns, `temperature` and other
    OpenAI fields are ignored (decoding is greedy)."""

    model: Annotated[
        str,
        Doc(
            "Picks the direction: a bundle name or its alias, or `liuyi`/`liuyi-auto` (source detected, "
            "target the other language).",
            minLength=1,
        ),
    ]
    messages: Annotated[list[ChatMessage], Doc("The conversation, with a `user` message.", minItems=1)]
    stream: NotRequired[
        Annotated[bool | None, Doc("Stream the answer as server-sent events.", default=False)]
    ]
    stream_options: NotRequired[StreamOptions | None]
    max_completion_tokens: NotRequired[MaxTokens]
    max_tokens: NotRequired[Annotated[int | None, Doc("Older name of `max_completion_tokens`.", minimum=1)]]
    n: NotRequired[Annotated[Literal[1] | None, Doc("Only 1.")]]


class ChatUsage(TypedDict):
    """Token counts."""

    prompt_tokens: Annotated[int, Doc("Prompt tokens.", minimum=0)]
    completion_tokens: Annotated[int, Doc("Completion tokens.", minimum=0)]
    total_tokens: Annotated[int, Doc("Total tokens.", minimum=0)]


FinishReason = Annotated[
    Literal["stop", "length"] | None, Doc("`stop`, or `length` when cut at the token limit.")
]
ChatId = Annotated[str, Doc("`chatcmpl-` and the request id (`X-Request-ID`).")]
Created = Annotated[int, Doc("Unix time.")]
ModelName = Annotated[str, Doc("Name of the model bundle that translated.")]


class AssistantMessage(TypedDict):
    """The translation."""

    role: Literal["assistant"]
    content: Annotated[str, Doc("The translation.")]
    refusal: None


class Choice(TypedDict):
    """The one answer."""

    index: Literal[0]
    message: AssistantMessage
    logprobs: None
    finish_reason: FinishReason


class ChatCompletion(TypedDict):
    """A finished translation, as a chat completion."""

    id: ChatId
    object: Literal["chat.completion"]
    created: Created
    model: ModelName
    system_fingerprint: None
    choices: Annotated[list[Choice], Doc("Exactly one choice.")]
    usage: ChatUsage


class ChunkDelta(TypedDict):
    """First chunk: the role; then new text; last: empty."""

    role: NotRequired[Literal["assistant"]]
    content: NotRequired[str]


class ChunkChoice(TypedDict):
    """The delta (no choice in the final usage chunk)."""

    index: Literal[0]
    delta: ChunkDelta
    logprobs: None
    finish_reason: FinishReason


class ChatCompletionChunk(TypedDict):
    """One `data:` line of a streamed completion."""

    id: ChatId
    object: Literal["chat.completion.chunk"]
    created: Created
    model: ModelName
    system_fingerprint: None
    choices: Annotated[list[ChunkChoice], Doc("Zero or one choice.")]
    usage: NotRequired[
        Annotated[ChatUsage | None, Doc("Only with `include_usage`: null, except in the last chunk.")]
    ]


class OpenAIError(TypedDict):
    """The error."""

    message: str
    type: Annotated[str, Doc("OpenAI's error type, e.g. `invalid_request_error`.")]
    param: Annotated[str | None, Doc("The field at fault.")]
    code: ErrorCode


class OpenAIErrorResponse(TypedDict):
    """OpenAI's error shape."""

    error: OpenAIError


# --- LibreTranslate


class LibreTranslateRequest(TypedDict):
    """LibreTranslate's translate request (JSON or form fields)."""

    q: OneOrMany
    source: NotRequired[
        Annotated[str | None, Doc("A language code or `auto` (also when absent or empty).", default="auto")]
    ]
    target: Annotated[str, Doc("The language code to translate into.")]
    format: NotRequired[
        Annotated[
            Literal["text", "html", ""] | None,
            Doc("`html`: keep tags, translate the text between them; `text` (also empty, null) does not."),
        ]
    ]
    alternatives: NotRequired[Annotated[int, Doc("Accepted; always answered with empty lists.", minimum=0)]]
    api_key: NotRequired[ApiKey]


class Detection(TypedDict):
    """Detected source language (when `source` is `auto`)."""

    confidence: Annotated[float, Doc("0 to 100.", minimum=0, maximum=100)]
    language: Annotated[str, Doc("`zh` or `en`.")]


class LibreTranslateResponse(TypedDict):
    """A list in, lists out."""

    translatedText: Annotated[str | Annotated[list[str], Doc("One per text.")], Doc("The translation(s).")]
    detectedLanguage: NotRequired[
        Annotated[
            Detection | Annotated[list[Detection], Doc("One per text.")], Doc("With `source: auto` only.")
        ]
    ]
    alternatives: NotRequired[Annotated[list[list[str]] | list[str], Doc("Empty (when `alternatives` > 0).")]]


class DetectRequest(TypedDict):
    """Text to identify."""

    q: Annotated[str, Doc("The text.", pattern=NOT_BLANK)]
    api_key: NotRequired[ApiKey]


class LibreTranslateLanguage(TypedDict):
    """A source language and its targets."""

    code: Annotated[str, Doc("Language code.")]
    name: Annotated[str, Doc("English name.")]
    targets: Annotated[list[str], Doc("Codes it translates into.")]


class FrontendLanguage(TypedDict):
    code: str
    name: str


class FrontendLanguages(TypedDict):
    source: FrontendLanguage
    target: FrontendLanguage


class FrontendSettings(TypedDict):
    """What LibreTranslate's web page reads at start-up."""

    apiKeys: bool
    keyRequired: bool
    charLimit: int
    frontendTimeout: int
    suggestions: bool
    filesTranslation: bool
    supportedFilesFormat: list[str]
    language: FrontendLanguages


class LibreTranslateError(TypedDict):
    """LibreTranslate's error shape."""

    error: Annotated[str, Doc("The message.")]


# --- DeepL


class DeepLTranslateRequest(TypedDict):
    """DeepL's translate request (JSON, or form fields with `text` repeated). `formality`,
    `split_sentences`, `preserve_formatting`, `context`, `model_type` are ignored."""

    text: OneOrMany
    target_lang: Annotated[
        str,
        Doc(
            "`EN`, `EN-US`, `EN-GB` (all the same English) or `ZH`, `ZH-HANS`, as the models allow "
            "(case-insensitive); `ZH-HANT` is refused."
        ),
    ]
    source_lang: NotRequired[
        Annotated[str | None, Doc("`ZH`, `EN`, ... (case-insensitive); detected when absent or empty.")]
    ]
    tag_handling: NotRequired[
        Annotated[
            Literal["html", "xml", ""] | None,
            Doc("Keep the tags, translate the text between them (empty or null: plain text)."),
        ]
    ]
    glossary_id: NotRequired[
        Annotated[
            Literal[""] | None, Doc("Refused (`invalid_option`) unless empty: liuyi has no glossaries.")
        ]
    ]
    glossary_ids: NotRequired[
        Annotated[
            Literal[""] | Annotated[list[str], Doc(maxItems=0)] | None,
            Doc("Refused unless empty, as `glossary_id`."),
        ]
    ]
    auth_key: NotRequired[Annotated[str, Doc("Legacy way to send the key.")]]


class DeepLUsageRequest(TypedDict):
    """/v2/usage's fields, in the query or a body."""

    auth_key: NotRequired[Annotated[str, Doc("Legacy way to send the key.")]]


class DeepLLanguagesRequest(DeepLUsageRequest):
    """/v2/languages' fields, in the query or a body."""

    type: NotRequired[Annotated[Literal["source", "target"], Doc(default="source")]]


class DeepLTranslation(TypedDict):
    """A translation."""

    detected_source_language: Annotated[str, Doc("`ZH` or `EN`.")]
    text: Annotated[str, Doc("The translation.")]
    billed_characters: Annotated[int, Doc("Characters of the source text.")]


class DeepLTranslateResponse(TypedDict):
    """One translation per text, in order."""

    translations: Annotated[list[DeepLTranslation], Doc("One per text.")]


class DeepLLanguage(TypedDict):
    """A language."""

    language: Annotated[str, Doc("DeepL code.")]
    name: Annotated[str, Doc("English name.")]
    supports_formality: NotRequired[Literal[False]]


class DeepLUsage(TypedDict):
    """Characters translated by this process through the DeepL API; no quota."""

    character_count: int
    character_limit: int


class DeepLError(TypedDict):
    """DeepL's error shape."""

    message: Annotated[str, Doc("The message.")]
    detail: ErrorCode


COMPAT_MODELS = (
    ChatCompletionRequest,
    ChatCompletion,
    ChatCompletionChunk,
    OpenAIErrorResponse,
    LibreTranslateRequest,
    LibreTranslateResponse,
    DetectRequest,
    LibreTranslateLanguage,
    FrontendSettings,
    LibreTranslateError,
    DeepLTranslateRequest,
    DeepLTranslateResponse,
    DeepLLanguagesRequest,
    DeepLUsageRequest,
    DeepLLanguage,
    DeepLUsage,
    DeepLError,
)
