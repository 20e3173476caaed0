"""Loading a model bundle: manifest, tokenizer and ONNX sessions, validated once and then shared."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ._errors import BundleNotFoundError
from ._graphs import Seq2SeqGraphs
from ._greedy import DecodeOptions
from ._manifest import Manifest
from ._manifest_reader import load_manifest
from ._runtime import RuntimeOptions
from ._stream import TranslationStream
from ._types import Result
from .tokenizers import Tokenizer, load_tokenizer

logger = logging.getLogger("liuyi.bundle")

MODELS_DIR = Path(__file__).parent / "models"
DEFAULT_BUNDLE = MODELS_DIR / "cn2en-zh-en"


@dataclass(frozen=True, kw_only=True)
class LoadOptions:
    runtime: RuntimeOptions = field(default_factory=RuntimeOptions)  # ONNX Runtime session options
    max_input_chars: int = 5000  # longer texts are rejected before any work (split them client-side)
    verify_checksums: bool = True  # sha256 every file at load; costs ~1 s per 300 MB


class Bundle:
    """A loaded model: thread-safe, so one instance serves every request."""

    def __init__(
        self,
        path: Path,
        manifest: Manifest,
        tokenizer: Tokenizer,
        graphs: Seq2SeqGraphs,
        options: LoadOptions,
    ) -> None:
        self.path = path
        self.manifest = manifest
        self.tokenizer = tokenizer
        self.graphs = graphs
        self.options = options
        self.max_input_chars = options.max_input_chars

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def direction(self) -> str:
        return self.manifest.direction

    @property
    def model_id(self) -> str:
        """What clients pick this bundle-and-direction by: the name, plus the direction when the
        bundle serves several (``nllb-200-distilled-600M-zh-en``)."""
        if len(self.manifest.served_directions) == 1:
            return self.name
        return f"{self.name}-{self.direction}"

    def for_direction(self, direction: str) -> Bundle:
        """This bundle translating ``direction`` (one of ``manifest.served_directions``): the same
        graphs and name (so one scheduler batches every direction), the manifest's languages and the
        tokenizer set for that direction.

        Raises:
            ValueError: the bundle does not serve ``direction``.
        """
        if direction == self.direction:
            return self
        manifest = self.manifest.for_direction(direction)
        tokenizer = self.tokenizer.for_direction(manifest.source_lang, manifest.target_lang)
        return Bundle(self.path, manifest, tokenizer, self.graphs, self.options)

    def stream(
        self, text: str, *, options: DecodeOptions | None = None, cancel: threading.Event | None = None
    ) -> TranslationStream:
        """Start translating ``text``; iterate the result for :class:`Delta` / :class:`SegmentDone`
        events and a final :class:`Result`.

        Arguments:
            text: source text, any length up to ``max_input_chars``; long text is split into sentences.
            options: decoding limits and the repetition guard.
            cancel: set it (from any thread) to stop before the next decoder step.

        Raises:
            EmptyInputError, InputTooLongError, InvalidOptionError: at once, before any work.
        """
        return TranslationStream(self, text, options=options, cancel=cancel)

    def translate(self, text: str, *, options: DecodeOptions | None = None) -> Result:
        """Translate and return only the final result."""
        for event in self.stream(text, options=options):
            if isinstance(event, Result):
                return event
        raise AssertionError("a translation stream always ends with a Result")

    def warm_up(self) -> None:
        """Run one short translation so the first real request does not pay for lazy initialisation."""
        sample = "你好。" if self.manifest.source_lang == "zh" else "Hello."
        self.translate(sample, options=DecodeOptions(max_new_tokens=4))


def load_bundle(path: str | Path = DEFAULT_BUNDLE, *, options: LoadOptions | None = None) -> Bundle:
    """Load and validate a bundle directory.

    Raises:
        BundleNotFoundError: ``path`` is not a directory.
        BundleError (a subclass): a file is missing or corrupt, or a graph does not match the manifest.
    """
    path = Path(path)
    options = options or LoadOptions()
    if not path.is_dir():
        raise BundleNotFoundError(path, "no such bundle directory")
    manifest = load_manifest(path, verify_checksums=options.verify_checksums)
    if not manifest.batch_invariant:
        logger.warning(
            "%s: this int8 bundle scales activations per batch (converted before 2026-12-03), so a "
            "translation can change with the server's load; convert it again (liuyi pull NAME --int8 "
            "--force, or liuyi export ... --int8)",
            path,
        )
    tokenizer = load_tokenizer(path, manifest.tokenizer, manifest.tokens).for_direction(
        manifest.source_lang, manifest.target_lang
    )
    graphs = Seq2SeqGraphs(path, manifest, options.runtime)
    return Bundle(path, manifest, tokenizer, graphs, options)


def bundled_models() -> list[Path]:
    """Bundles shipped inside the package (work offline, no download)."""
    return (
        sorted(p for p in MODELS_DIR.iterdir() if (p / "manifest.json").is_file())
        if MODELS_DIR.is_dir()
        else []
    )
