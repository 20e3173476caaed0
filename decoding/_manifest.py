"""The bundle manifest: what a model directory must declare so one greedy loop can drive it.

A bundle is a directory holding ``manifest.json``, ``encoder.onnx``, ``decoder.onnx`` and the
tokenizer files. The decoder graph is a *single step* graph: it takes one token per sequence plus
the state from the previous step and returns the best next tokens and the new state. The first step
is the same graph fed an empty (zero-length) state, so there is no separate "first step" graph.

What differs between model families is described here, not coded in the loop:

* ``decoder.source_tensors`` — encoder outputs fed unchanged to every step (Marian's precomputed
  cross-attention keys/values). ``source_axis`` is the axis padded when sequences with different
  source lengths share a batch; the loop then also feeds ``source_attention_mask``.
* ``decoder.state`` — tensors carried from step to step. Either a fixed-size state fed back (a GRU's
  hidden state: ``time_axis`` null, ``initial`` ``"encoder:<output>"``), or a cache *written in place*
  (Marian's self-attention keys/values: ``in_place`` true, ``initial`` ``"empty"``): the host owns a
  buffer whose ``time_axis`` is a capacity it grows, binds it as both input and output, and the graph
  writes each step's entry at ``position_ids`` and masks everything after it. ``batch_axis`` says
  where sequences are stacked (it must be 0 for in-place caches, so a batch is a contiguous slice).

The JSON format is documented in the README ("Bundle format"). This module is its typed shape and
``write_manifest``; ``_manifest_reader.load_manifest`` reads and validates it. They are the only
code that writes or reads it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

FORMAT = "liuyi-bundle/1"
MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True, kw_only=True)
class SpecialTokens:
    decoder_start: int  # first input token of every target sequence
    eos: int  # ends a sequence; never shown to users
    pad: int | None = None  # fills unused batch rows; None if the model has none
    unk: int | None = None  # what unknown source pieces become; None for vocabularies that drop them


@dataclass(frozen=True, kw_only=True)
class Limits:
    max_source_tokens: int  # encoder positions, eos included; longer sentences are split further
    max_target_tokens: int  # hard cap on generated tokens per segment, eos included


@dataclass(frozen=True, kw_only=True)
class Generation:
    # Marian checkpoints set forced_eos_token_id: transformers then forces eos as the last allowed
    # token. Honouring it keeps token-for-token parity with generate() at the length limit.
    forced_eos_at_limit: bool = False
    # default max_new_tokens = ratio * source tokens + extra, capped by limits.max_target_tokens
    max_new_tokens_ratio: float = 2.0
    max_new_tokens_extra: int = 10
    # target language -> the token every target sequence in that language starts with (NLLB/M2M100
    # language codes: transformers' forced_bos_token_id). Empty for models that need none.
    forced_first_tokens: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class TokenizerSpec:
    kind: str  # "marian-sentencepiece" or "word-vocab"
    files: dict[str, str]  # role -> file name inside the bundle
    options: dict[str, Any] = field(default_factory=dict)  # kind-specific, e.g. a target language code


@dataclass(frozen=True, kw_only=True)
class SourceTensor:
    name: str  # encoder output name, fed to the decoder input of the same name
    batch_axis: int
    source_axis: int | None  # padded (right) when sources of different lengths share a batch


@dataclass(frozen=True, kw_only=True)
class StateTensor:
    input: str  # decoder input fed with the previous step's state
    output: str  # decoder output holding the state after this step
    batch_axis: int
    time_axis: int | None  # a cache's capacity axis; None for a fixed-size RNN state
    initial: str  # "empty" or "encoder:<output name>"
    in_place: bool = False  # the output is the input buffer, updated at position_ids (a KV cache)


@dataclass(frozen=True, kw_only=True)
class EncoderSpec:
    file: str
    input_ids: str  # (batch, source) int64
    attention_mask: str | None  # (batch, source) int64, 1 = real token; None if the graph has none
    outputs: tuple[str, ...]  # outputs the decoder consumes


@dataclass(frozen=True, kw_only=True)
class DecoderSpec:
    file: str
    input_ids: str  # (batch, 1) int64: the previous token
    top_ids: str  # (batch, k>=2) int64: best next tokens, best first (k>=2 lets min_new_tokens skip eos)
    logits: str  # (batch, vocab) float32: only fetched when a logits processor needs it
    position_ids: str | None = None  # (batch, 1) int64: index of the token fed = its cache slot
    source_attention_mask: str | None = None  # (batch, source) int64: 0 marks right padding
    source_tensors: tuple[SourceTensor, ...] = ()
    state: tuple[StateTensor, ...] = ()


@dataclass(frozen=True, kw_only=True)
class FileEntry:
    sha256: str
    bytes: int


@dataclass(frozen=True, kw_only=True)
class Manifest:
    name: str  # unique model name, e.g. "cn2en-gru-zh-en"
    source_lang: str  # "zh" or "en"
    target_lang: str
    family: str  # "marian", "gru-seq2seq", ... (informational: the loop never branches on it)
    tokens: SpecialTokens
    limits: Limits
    generation: Generation
    tokenizer: TokenizerSpec
    encoder: EncoderSpec
    decoder: DecoderSpec
    files: dict[str, FileEntry]  # every file but manifest.json, with its checksum
    license: str  # SPDX id or short name
    license_file: str | None = None  # full license text, inside the bundle
    attribution: str = ""  # who made the weights and where they come from
    quantization: str | None = None  # None (float32) or "int8" (dynamic quantization)
    # int8 only: how activations are scaled. "per-row": each sequence's math ignores the rest of its
    # batch (decoding/export/_quantize_rows.py). None: one scale per batch (bundles converted before
    # 2026-12-03), so a translation may change with what else the server is translating.
    activation_scales: str | None = None
    # Every "src-tgt" a multilingual bundle serves (the first is source_lang-target_lang); empty for a
    # single-direction bundle. The registry routes each to the bundle, with this manifest's
    # source_lang/target_lang replaced (see :meth:`for_direction`).
    directions: tuple[str, ...] = ()
    format: str = FORMAT

    @property
    def direction(self) -> str:
        return f"{self.source_lang}-{self.target_lang}"

    @property
    def batch_invariant(self) -> bool:
        """Whether a sequence decodes to the same tokens whatever shares its batch."""
        return self.quantization is None or self.activation_scales == "per-row"

    @property
    def served_directions(self) -> tuple[str, ...]:
        return self.directions or (self.direction,)

    def for_direction(self, direction: str) -> Manifest:
        """This manifest as seen by requests in ``direction`` (one of :attr:`served_directions`)."""
        if direction not in self.served_directions:
            raise ValueError(f"{self.name} does not translate {direction}")
        source, target = direction.split("-")
        return replace(self, source_lang=source, target_lang=target)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_entries(bundle_dir: Path, names: list[str]) -> dict[str, FileEntry]:
    """Checksum the named files of a bundle being written."""
    return {
        name: FileEntry(sha256=sha256_file(bundle_dir / name), bytes=(bundle_dir / name).stat().st_size)
        for name in sorted(names)
    }


def write_manifest(bundle_dir: Path, manifest: Manifest) -> Path:
    path = bundle_dir / MANIFEST_NAME
    path.write_text(json.dumps(asdict(manifest), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path
