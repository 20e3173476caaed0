"""Parity helpers shared by every family's tests: transformers' side and the engine's side.

minGPT's order: logits first (``allclose``), then greedy ids, then text.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from decoding import Bundle, DecodeOptions
from decoding._batch import DecodeBatch, advance_batch
from decoding._greedy import GreedySequence


def reference_ids(model: Any, encoded: dict[str, Any], **generate_kwargs: Any) -> list[int]:
    """transformers' greedy ids for one tokenized source, decoder start dropped."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = model.generate(**encoded, num_beams=1, do_sample=False, **generate_kwargs)
    return out[0].tolist()[1:]  # type: ignore[no-any-return]


def reference_logits(
    model: Any, encoded: dict[str, Any], decoder_start: int, targets: list[int]
) -> np.ndarray:
    """(T, V) next-token logits of transformers' model, fed ``targets`` (teacher forcing)."""
    decoder_input = torch.tensor([[decoder_start, *targets[:-1]]])
    with torch.no_grad():
        out = model(**encoded, decoder_input_ids=decoder_input)
    return out.logits[0].numpy()  # type: ignore[no-any-return]


def engine_ids(bundle: Bundle, text: str, options: DecodeOptions) -> list[int]:
    """Token ids the engine generated for a one-sentence text (eos included)."""
    result = bundle.translate(text, options=options)
    assert len(result.segments) == 1, "parity inputs are single sentences"
    return list(result.segments[0].token_ids)


class _TeacherForced(GreedySequence):
    """Feeds given tokens instead of choosing, and keeps every step's logits row."""

    def __init__(self, tokens: list[int], *, decoder_start: int, eos: int) -> None:
        super().__init__(decoder_start=decoder_start, eos=eos, max_new_tokens=len(tokens))
        self.forced = tokens
        self.logits: list[np.ndarray] = []

    @property
    def needs_logits(self) -> bool:
        return True

    def choose(self, top_ids: np.ndarray, logits: np.ndarray | None = None) -> int:
        assert logits is not None
        self.logits.append(logits.copy())
        token = self.forced[len(self.tokens)]
        self.tokens.append(token)
        if len(self.tokens) == len(self.forced):
            self.finish_reason = "length"
        return token


def engine_logits(
    bundle: Bundle, source_ids: list[int], decoder_start: int, targets: list[int]
) -> np.ndarray:
    """(T, V) logits the bundle's decoder graph computes through the engine's own batch, fed ``targets``."""
    sequence = _TeacherForced(targets, decoder_start=decoder_start, eos=bundle.manifest.tokens.eos)
    batch = DecodeBatch(bundle.graphs)
    batch.add(bundle.graphs.encode(source_ids), max_new_tokens=len(targets), owner=sequence)
    while batch.rows:
        advance_batch(batch)
    return np.stack(sequence.logits)


def assert_logits_close(engine: np.ndarray, reference: np.ndarray) -> None:
    """Equal where the engine's graph allows the token; ids it bans (-inf, e.g. <pad>) are skipped."""
    allowed = np.isfinite(engine)
    assert allowed.mean() > 0.99
    np.testing.assert_allclose(engine[allowed], reference[allowed], rtol=1e-4, atol=1e-4)


@dataclass(frozen=True)
class MultilingualReference:
    """transformers' side of a model whose source starts with its language's token and whose output
    is forced to start with the target's (NLLB-200, M2M100)."""

    model: Any
    tokenizer: Any
    src_lang: Callable[[str], str]  # liuyi's language code -> what the tokenizer's src_lang takes
    language_id: Callable[[str], int]  # liuyi's language code -> id of its language token

    def encoded(self, direction: str, text: str) -> Any:
        self.tokenizer.src_lang = self.src_lang(direction.split("-")[0])
        return self.tokenizer(text, return_tensors="pt")

    def generate(self, direction: str, text: str, **kwargs: Any) -> list[int]:
        forced = self.language_id(direction.split("-")[1])
        return reference_ids(self.model, self.encoded(direction, text), forced_bos_token_id=forced, **kwargs)


def assert_step_logits_match(
    bundle: Bundle, reference: MultilingualReference, direction: str, text: str
) -> None:
    """The bundle's step logits, fed transformers' greedy output for ``text``, equal transformers'."""
    source = reference.encoded(direction, text)
    targets = reference.generate(direction, text, max_new_tokens=12)
    start = bundle.manifest.tokens.decoder_start
    assert_logits_close(
        engine_logits(bundle, source.input_ids[0].tolist(), start, targets),
        reference_logits(reference.model, source, start, targets),
    )


def assert_greedy_matches(
    bundle: Bundle, reference: MultilingualReference, direction: str, text: str
) -> None:
    """Greedy ids equal ``generate()``'s with the target language forced first; text equal its decode."""
    want = reference.generate(direction, text, max_new_tokens=24)
    result = bundle.for_direction(direction).translate(text, options=DecodeOptions(max_new_tokens=24))
    assert list(result.segments[0].token_ids) == want
    assert want[0] == reference.language_id(direction.split("-")[1])
    assert result.translation == reference.tokenizer.decode(want, skip_special_tokens=True)


def assert_inputs_end_both_ways(bundle: Bundle, texts: list[str]) -> None:
    """Some of ``texts`` end on eos and some at the length limit, so parity covers both endings."""
    options = DecodeOptions(max_new_tokens=24)
    assert {bundle.translate(text, options=options).finish_reason for text in texts} == {"stop", "length"}
