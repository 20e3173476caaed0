"""liuyi's decoding engine: ONNX encoder once, ONNX decoder one step per token, clean text deltas.

    bundle = load_bundle()                    # the bundled zh->en model
    for event in bundle.stream("你好。"):
        ...                                   # Delta, SegmentDone, then Result

Knows nothing of HTTP; ``server/`` builds on this.
"""

from __future__ import annotations

from ._batch import DecodeBatch, Row, StepOutput, Stepper, advance_batch
from ._bundle import DEFAULT_BUNDLE, Bundle, LoadOptions, bundled_models, load_bundle
from ._errors import (
    BundleError,
    BundleFileMissingError,
    BundleNotFoundError,
    ChecksumMismatchError,
    DecodingError,
    EmptyInputError,
    EngineBusyError,
    GraphMismatchError,
    InferenceError,
    InputError,
    InputTooLongError,
    InvalidOptionError,
    ManifestError,
    UnsupportedDirectionError,
    UnsupportedLanguageError,
)
from ._graphs import EncodedSource, Seq2SeqGraphs
from ._greedy import DecodeOptions, GreedySequence
from ._job import PlannedSegment, Translation, check_input, nonblank
from ._languages import (
    CLIENT_SPELLINGS,
    LANGUAGE_TABLE,
    LANGUAGES,
    Detection,
    Language,
    detect_language,
    language_name,
    normalize_language,
)
from ._manifest import Manifest
from ._manifest_reader import load_manifest
from ._registry import ModelRegistry
from ._runtime import RuntimeOptions
from ._scheduler import BatchScheduler
from ._stream import TranslationStream
from ._types import Delta, Event, FinishReason, Result, SegmentDone, SourceSegment, Timings

__all__ = [
    "CLIENT_SPELLINGS",
    "DEFAULT_BUNDLE",
    "LANGUAGES",
    "LANGUAGE_TABLE",
    "BatchScheduler",
    "Bundle",
    "BundleError",
    "BundleFileMissingError",
    "BundleNotFoundError",
    "ChecksumMismatchError",
    "DecodeBatch",
    "DecodeOptions",
    "DecodingError",
    "Delta",
    "Detection",
    "EmptyInputError",
    "EncodedSource",
    "EngineBusyError",
    "Event",
    "FinishReason",
    "GraphMismatchError",
    "GreedySequence",
    "InferenceError",
    "InputError",
    "InputTooLongError",
    "InvalidOptionError",
    "Language",
    "LoadOptions",
    "Manifest",
    "ManifestError",
    "ModelRegistry",
    "PlannedSegment",
    "Result",
    "Row",
    "RuntimeOptions",
    "SegmentDone",
    "Seq2SeqGraphs",
    "SourceSegment",
    "StepOutput",
    "Stepper",
    "Timings",
    "Translation",
    "TranslationStream",
    "UnsupportedDirectionError",
    "UnsupportedLanguageError",
    "advance_batch",
    "bundled_models",
    "check_input",
    "detect_language",
    "language_name",
    "load_bundle",
    "load_manifest",
    "nonblank",
    "normalize_language",
]
