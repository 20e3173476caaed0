"""Greedy token choice for one sequence: argmax, plus the few rules a serving decoder needs.

The decoder graph already returns the two best ids per row (``top_ids``), so the common case never
copies the (batch, vocab) logits out of ONNX Runtime: argmax is ``top_ids[0]``, and forbidding eos
before ``min_new_tokens`` is ``top_ids[1]`` (the best non-eos token). Only the optional repetition
guard needs the full logits row.

The rules follow transformers' logits processors, in transformers' order, so greedy outputs match
``generate(num_beams=1, do_sample=False)`` token for token: no-repeat-ngram, then min-new-tokens,
then forced eos at the length limit. A multilingual model's target-language token (transformers'
``forced_bos_token_id``) is forced as the first token, per sequence, so rows writing different
languages share one batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._errors import InvalidOptionError
from ._manifest import Manifest
from ._types import FinishReason


@dataclass(frozen=True, kw_only=True)
class DecodeOptions:
    # Tokens to generate per segment, eos included. None: the manifest's ratio * source tokens +
    # extra. Larger values are capped at the manifest's max_target_tokens.
    max_new_tokens: int | None = None
    # The caller's limit on the text's length in characters, when tighter than the bundle's (a
    # server's setting). None: the bundle's max_input_chars alone.
    max_input_chars: int | None = None
    # eos is not allowed before this many tokens (benchmarks use it to fix the output length).
    min_new_tokens: int = 0
    # Repetition guard: never produce the same n-gram twice (0 = off, as in transformers).
    no_repeat_ngram_size: int = 0


def resolve_lengths(options: DecodeOptions, source_tokens: int, manifest: Manifest) -> tuple[int, int]:
    """(max_new_tokens, min_new_tokens) for one segment.

    Raises:
        InvalidOptionError: a value is not a positive integer, or min exceeds max.
    """
    cap = manifest.limits.max_target_tokens
    if options.max_new_tokens is None:
        generation = manifest.generation
        wanted = int(generation.max_new_tokens_ratio * source_tokens) + generation.max_new_tokens_extra
    else:
        wanted = positive_int("max_new_tokens", options.max_new_tokens)
    max_new = min(wanted, cap)
    min_new = options.min_new_tokens
    if isinstance(min_new, bool) or not isinstance(min_new, int) or min_new < 0:
        raise InvalidOptionError("min_new_tokens must be an integer >= 0")
    if min_new > max_new:
        raise InvalidOptionError(f"min_new_tokens ({min_new}) exceeds max_new_tokens ({max_new})")
    if (
        isinstance(options.no_repeat_ngram_size, bool)
        or not isinstance(options.no_repeat_ngram_size, int)
        or options.no_repeat_ngram_size < 0
    ):
        raise InvalidOptionError("no_repeat_ngram_size must be an integer >= 0")
    return max_new, min_new


def positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidOptionError(f"'{name}' must be an integer >= 1", field=name)
    return value


class GreedySequence:
    """The tokens of one target sequence and the rule that picks the next one."""

    def __init__(
        self,
        *,
        decoder_start: int,
        eos: int,
        max_new_tokens: int,
        min_new_tokens: int = 0,
        forced_eos_at_limit: bool = False,
        no_repeat_ngram_size: int = 0,
        forced_first: int | None = None,
    ) -> None:
        self.tokens: list[int] = []
        self._forced_first = forced_first
        self.finish_reason: FinishReason | None = None
        self._eos = eos
        self._max_new = max_new_tokens
        self._min_new = min_new_tokens
        self._forced_eos = forced_eos_at_limit
        self._ngram = no_repeat_ngram_size
        self._history = [decoder_start]  # transformers counts n-grams over the decoder input, start included
        self._seen: dict[tuple[int, ...], set[int]] = (
            {(): {decoder_start}} if no_repeat_ngram_size == 1 else {}
        )

    @property
    def max_new_tokens(self) -> int:
        return self._max_new

    @property
    def needs_logits(self) -> bool:
        return self._ngram > 0

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def choose(self, top_ids: np.ndarray, logits: np.ndarray | None = None) -> int:
        """Pick, record and return the next token from this row's ``top_ids`` (and logits if needed)."""
        step = len(self.tokens)
        if self._forced_eos and step == self._max_new - 1:
            token = self._eos
        elif step == 0 and self._forced_first is not None:
            token = self._forced_first
        elif self._ngram > 0 and logits is not None:
            token = self._choose_guarded(logits, step)
        else:
            token = int(top_ids[0])
            if token == self._eos and step < self._min_new:
                token = int(top_ids[1])
        self._record(token)
        if token == self._eos:
            natural = int(top_ids[0]) == self._eos and not (step == 0 and self._forced_first is not None)
            self.finish_reason = (
                "stop" if natural or not self._forced_eos or step < self._max_new - 1 else "length"
            )
        elif len(self.tokens) >= self._max_new:
            self.finish_reason = "length"
        return token

    def advance(self, top_ids: np.ndarray, logits: np.ndarray | None, step_ms: float = 0.0) -> int | None:
        """A batch row's step (``decoding._batch.Stepper``): choose, then the next input token, or
        None once the sequence ended."""
        token = self.choose(top_ids, logits)
        return None if self.finished else token

    def cancel(self) -> None:
        if self.finish_reason is None:
            self.finish_reason = "cancelled"

    def _choose_guarded(self, logits: np.ndarray, step: int) -> int:
        scores = logits.astype(np.float32, copy=True)
        n = self._ngram
        if len(self._history) + 1 >= n:
            banned = self._seen.get(tuple(self._history[len(self._history) - n + 1 :]), ())
            scores[list(banned)] = -np.inf
        if step < self._min_new:
            scores[self._eos] = -np.inf
        return int(np.argmax(scores))

    def _record(self, token: int) -> None:
        self.tokens.append(token)
        self._history.append(token)
        n = self._ngram
        if n > 0 and len(self._history) >= n:
            gram = self._history[-n:]
            self._seen.setdefault(tuple(gram[:-1]), set()).add(gram[-1])
