"""liuyi's own wire shapes: the request body, the stream events, the replies and the error body.

Each is a ``TypedDict``: the builders (``_events.py``, ``_native.py``, ``_errors.py``) are
checked against it by mypy, and the OpenAPI document's component schemas are generated from it
(``_wire_schema.py``). Adding a field is one line here plus the builder that fills it. Facts that
depend on the running app (the languages its models serve, its length limit) are added to the
generated schemas by ``_openapi.py``.
"""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired, TypedDict, Union

from ._error_codes import ErrorCode
from ._wire_schema import NOT_BLANK, Doc, Named

Language = Annotated[str, Named("Language", "A language code, resolved (never `auto`).")]
FinishReason = Annotated[
    Literal["stop", "length", "cancelled"],
    Named(
        "FinishReason",
        "`stop`: the model ended the sentence. `length`: `max_new_tokens` was reached (the translation may "
        "be cut short). `cancelled`: only on a `segment` event of a stream that then ends with an `error` "
        "event.",
    ),
]


class TranslateRequest(TypedDict):
    """A text to translate. Unknown fields are ignored."""

    text: Annotated[
        str,
        Doc(
            "The text. Long texts are split into sentences (segments), translated in order; the layout "
            "between them is kept.",
            minLength=1,
            pattern=NOT_BLANK,
        ),
    ]
    source: NotRequired[
        Annotated[
            str | None,
            Doc(
                "Language of `text`: any spelling of a language the models translate from (case-insensitive; "
                "`_` may replace `-`). `auto` (the default; also empty or null) guesses from the text: "
                "Chinese once Han characters are at least a quarter as many as Latin letters; a text without "
                "letters (digits, emoji) goes to a loaded model. A text guessed to be in a language no model "
                "translates from is a 400 `unsupported_direction`.",
                default="auto",
            ),
        ]
    ]
    target: NotRequired[
        Annotated[
            str | None,
            Doc(
                "Language to translate into, as `source` spells it. Absent, empty or null: the other "
                "language of the pair."
            ),
        ]
    ]
    max_new_tokens: NotRequired[
        Annotated[
            int | None,
            Doc(
                "Most tokens to generate **per segment**, end-of-sentence included. Default: in proportion "
                "to the segment's source tokens (set by the model). Values above the model's limit "
                "(`max_new_tokens` in GET /v1/models) are capped to it.",
                minimum=1,
            ),
        ]
    ]


class SegmentSpan(TypedDict):
    """Where a segment is in the source text."""

    index: Annotated[int, Doc("Position of the segment in the text, from 0.", minimum=0)]
    start: Annotated[int, Doc("Offset of its first character in `text` (Unicode code points).", minimum=0)]
    end: Annotated[int, Doc("Offset just past its last character: the span is `text[start:end]`.", minimum=0)]


class SegmentResult(TypedDict):
    """One segment's translation."""

    index: Annotated[int, Doc("Position of the segment in the text, from 0.", minimum=0)]
    start: Annotated[int, Doc("Offset of its first character in `text` (Unicode code points).", minimum=0)]
    end: Annotated[int, Doc("Offset just past its last character: the span is `text[start:end]`.", minimum=0)]
    translation: Annotated[str, Doc("This segment's translation, without the layout text around it.")]
    finish_reason: FinishReason
    input_tokens: Annotated[int, Doc("Source tokens of this segment, end-of-sentence included.", minimum=0)]
    output_tokens: Annotated[
        int, Doc("Tokens generated for this segment, end-of-sentence included.", minimum=0)
    ]


class Usage(TypedDict):
    """Token counts, summed over segments (end-of-sentence tokens included)."""

    input_tokens: Annotated[int, Doc("Source tokens.", minimum=0)]
    output_tokens: Annotated[int, Doc("Generated tokens.", minimum=0)]


class Timings(TypedDict):
    """Milliseconds per stage, summed over segments (3 decimals). For a cache hit the stages are 0
    and `ttft_ms` = `total_ms` = the replay time."""

    queue_ms: Annotated[float, Doc("Waiting for a place in the batch.")]
    ttft_ms: Annotated[float, Doc("Arrival to the first generated token.")]
    total_ms: Annotated[float, Doc("Arrival to the last token.")]
    tokenize_ms: Annotated[float, Doc("Splitting and tokenizing the text.")]
    encode_ms: Annotated[float, Doc("Running the encoder.")]
    decode_ms: Annotated[float, Doc("Decoder steps.")]
    detokenize_ms: Annotated[float, Doc("Turning tokens into text.")]


Translation = Annotated[str, Doc("The whole translation, with the layout between sentences kept.")]
Cached = Annotated[bool, Doc("Served from the translation cache (timings then measure the replay).")]
ModelName = Annotated[str, Doc("Name of the model bundle that translated (an `id` of GET /v1/models).")]
UnknownChars = Annotated[
    int,
    Doc("Source characters outside the model's vocabulary (a hint the text is out of domain).", minimum=0),
]


class StartEvent(TypedDict):
    """First event: what will be translated, and how the text was split into segments."""

    type: Literal["start"]
    id: Annotated[str, Doc("The request id (also the `X-Request-ID` header).")]
    model: Annotated[str, Doc("Name of the model bundle translating.")]
    direction: Annotated[str, Doc("`<source>-<target>`.", examples=["zh-en"])]
    source: Language
    target: Language
    cached: Annotated[bool, Doc("The stream is a replay of a cached translation (arrives at once).")]
    segments: Annotated[list[SegmentSpan], Doc("The segments (sentences) in order.")]


class DeltaEvent(TypedDict):
    """New text. Final: it never changes and never ends inside a character. Joining every delta
    gives `done.translation` exactly."""

    type: Literal["delta"]
    text: Annotated[str, Doc("The text to append.")]
    index: Annotated[
        int, Doc("Token index inside its segment; -1 for layout text between segments.", minimum=-1)
    ]
    segment: Annotated[int, Doc("Index of the segment it belongs to.", minimum=0)]


class SegmentEvent(SegmentResult):
    """A segment finished decoding."""

    type: Literal["segment"]


class DoneEvent(TypedDict):
    """Last event of a successful stream."""

    type: Literal["done"]
    translation: Translation
    finish_reason: FinishReason
    cached: Cached
    model: ModelName
    usage: Usage
    unknown_source_chars: UnknownChars
    timings: Timings


class ErrorFields(TypedDict):
    """The error."""

    code: ErrorCode
    message: Annotated[str, Doc("What went wrong, for people.")]
    param: NotRequired[Annotated[str, Doc("The request field or header at fault, when there is one.")]]
    limit: NotRequired[
        Annotated[int, Doc("`body_too_large` (bytes), `text_too_long` (characters): the limit.")]
    ]
    length: NotRequired[Annotated[int, Doc("`text_too_long`: the length sent.")]]
    retry_after: NotRequired[Annotated[int, Doc("`overloaded`: seconds to wait (also `Retry-After`).")]]


class ErrorEvent(ErrorFields):
    """Last event of a failed stream: an error after the response had started (status 200 already
    sent), e.g. `request_timeout`, `shutting_down`, `inference_failed`. Same fields as error bodies."""

    type: Literal["error"]


class PingEvent(TypedDict):
    """Heartbeat after the heartbeat interval without an event (NDJSON only; SSE sends a comment line
    instead). Ignore it."""

    type: Literal["ping"]


StreamEvent = Annotated[
    Union[StartEvent, DeltaEvent, SegmentEvent, DoneEvent, ErrorEvent, PingEvent],  # noqa: UP007
    Named(
        "StreamEvent",
        "One event of a translation stream: `start`, then `delta`/`segment`/`ping` events, then exactly "
        "one `done` or `error`.",
    ),
]


class TranslateResponse(TypedDict):
    """A finished translation."""

    translation: Translation
    source: Language
    target: Language
    model: ModelName
    cached: Cached
    finish_reason: FinishReason
    usage: Usage
    unknown_source_chars: UnknownChars
    timings: Timings
    segments: Annotated[list[SegmentResult], Doc("Per-segment results, in order.")]
    id: Annotated[str, Doc("The request id (also the `X-Request-ID` header; find it in the logs).")]


class ErrorResponse(TypedDict):
    """liuyi's error body (native endpoints)."""

    error: ErrorFields


class Model(TypedDict):
    """A loaded model bundle (one per translation direction)."""

    id: Annotated[str, Doc("Bundle name: the `model` of responses and events.")]
    object: Literal["model"]
    owned_by: Literal["liuyi"]
    aliases: Annotated[list[str], Doc("Other names (e.g. for OpenAI clients' `model`).")]
    source: Language
    target: Language
    direction: Annotated[str, Doc("`<source>-<target>`.")]
    family: Annotated[str, Doc("Architecture, informational (`marian`, `gru-seq2seq`, ...).")]
    quantization: Annotated[str | None, Doc("null (float32) or `int8`.")]
    license: Annotated[str, Doc("License of the weights (SPDX id or short name).")]
    attribution: Annotated[str, Doc("Who made the weights and where they come from.")]
    max_input_chars: Annotated[int, Doc("Longest `text` accepted, in characters.")]
    max_new_tokens: Annotated[int, Doc("Most tokens generated per segment (caps `max_new_tokens`).")]


class ModelList(TypedDict):
    """The loaded models."""

    object: Literal["list"]
    data: Annotated[list[Model], Doc("One per direction.")]


class Health(TypedDict):
    """The process is up."""

    status: Literal["ok"]


class Readiness(TypedDict):
    """Whether the server takes translations."""

    status: Annotated[
        Literal["ready", "starting", "draining"],
        Doc("`starting` (loading, warming up) and `draining` come with 503."),
    ]
    models: NotRequired[Annotated[list[str], Doc("Bundle names, when ready.")]]


NATIVE_MODELS = (
    TranslateRequest,
    StreamEvent,
    TranslateResponse,
    ErrorResponse,
    ModelList,
    Health,
    Readiness,
)
