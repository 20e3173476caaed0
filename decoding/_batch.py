"""Several target sequences stepped together: one decoder call per step for the whole batch.

Sequences join and leave at step boundaries, so the batch tensors are rebuilt only then:

* **state that grows** (a KV cache, ``time_axis`` set) is *left*-padded: a sequence that joins late
  gets zero-filled past positions, masked out through ``self_attention_mask``. When the oldest
  sequences leave, columns that are padding for every remaining row are trimmed away.
* **source tensors** (cross-attention keys/values) are *right*-padded to the longest source in the
  batch, masked through ``source_attention_mask``, and trimmed when the longest source leaves.
* **fixed-size state** (an RNN hidden state) is just stacked along its batch axis.

Every row carries its own position, so a row's math is exactly what it would be alone: greedy
outputs are token-identical whatever else shares the batch (the batching tests check this).
The manifest says which axis is which; this code never looks at the model family.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._graphs import EncodedSource, Seq2SeqGraphs
from ._greedy import GreedySequence


@dataclass(eq=False)
class Row:
    """One sequence in a batch. ``tag`` is the caller's handle (a request, a stream)."""

    sequence: GreedySequence
    source_length: int
    tag: Any = None
    steps: int = field(default=0)  # decoder steps taken (tokens generated)


class DecodeBatch:
    def __init__(self, graphs: Seq2SeqGraphs) -> None:
        self._graphs = graphs
        self._spec = graphs.manifest.decoder
        self._decoder_start = graphs.manifest.tokens.decoder_start
        self._grows = any(s.time_axis is not None for s in self._spec.state)
        self.rows: list[Row] = []
        self._reset()

    def _reset(self) -> None:
        self._tokens = np.zeros((0, 1), dtype=np.int64)  # (B, 1) token fed at the next step
        self._positions = np.zeros((0, 1), dtype=np.int64)  # (B, 1) its position in the target
        self._past_mask = np.zeros((0, 0), dtype=np.int64)  # (B, T) 1 = real cached position
        self._source_mask = np.zeros((0, 0), dtype=np.int64)  # (B, S) 1 = real source token
        self._sources: dict[str, np.ndarray] = {}
        self._states: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def past_length(self) -> int:
        """T: cached positions per row, padding included."""
        return int(self._past_mask.shape[1])

    @property
    def needs_logits(self) -> bool:
        return any(row.sequence.needs_logits for row in self.rows)

    def add(self, encoded: EncodedSource, sequence: GreedySequence, tag: Any = None) -> Row:
        """Join a sequence (its encoder already ran); it takes its first step with the others."""
        time = self.past_length
        width = max(self._source_mask.shape[1], encoded.length)
        states = {}
        for s in self._spec.state:
            if s.initial == "empty":
                states[s.input] = self._graphs.empty_state(s.input, s.batch_axis, s.time_axis or 0, time)
            else:
                states[s.input] = encoded.outputs[s.initial.partition(":")[2]]
        sources = {
            t.name: _pad_to(encoded.outputs[t.name], t.source_axis, width) for t in self._spec.source_tensors
        }
        source_mask = np.zeros((1, width), dtype=np.int64)
        source_mask[0, : encoded.length] = 1
        if self.rows:
            for t in self._spec.source_tensors:
                self._sources[t.name] = _pad_to(self._sources[t.name], t.source_axis, width)
        self._source_mask = _pad_to(self._source_mask, 1, width)
        self._sources = {
            t.name: _stack(self._sources.get(t.name), sources[t.name], t.batch_axis)
            for t in self._spec.source_tensors
        }
        self._states = {
            s.input: _stack(self._states.get(s.input), states[s.input], s.batch_axis)
            for s in self._spec.state
        }
        self._source_mask = np.concatenate([self._source_mask, source_mask])
        self._past_mask = np.concatenate([self._past_mask, np.zeros((1, time), dtype=np.int64)])
        self._tokens = np.concatenate([self._tokens, [[self._decoder_start]]])
        self._positions = np.concatenate([self._positions, [[0]]])
        row = Row(sequence=sequence, source_length=encoded.length, tag=tag)
        self.rows.append(row)
        return row

    def remove(self, rows: list[Row]) -> None:
        """Drop rows (finished or cancelled) and trim padding nobody needs any more."""
        gone = {id(row) for row in rows}
        keep = [i for i, row in enumerate(self.rows) if id(row) not in gone]
        if len(keep) == len(self.rows):
            return
        self.rows = [self.rows[i] for i in keep]
        if not self.rows:
            self._reset()
            return
        self._tokens, self._positions = self._tokens[keep], self._positions[keep]
        self._past_mask, self._source_mask = self._past_mask[keep], self._source_mask[keep]
        self._states = {
            s.input: np.take(self._states[s.input], keep, axis=s.batch_axis) for s in self._spec.state
        }
        self._sources = {
            t.name: np.take(self._sources[t.name], keep, axis=t.batch_axis) for t in self._spec.source_tensors
        }
        self._trim()

    def _trim(self) -> None:
        real = self._past_mask.any(axis=0)
        start = int(np.argmax(real)) if real.any() else real.shape[0]
        if start:
            self._past_mask = np.ascontiguousarray(self._past_mask[:, start:])
            for s in self._spec.state:
                if s.time_axis is not None:
                    self._states[s.input] = _slice(self._states[s.input], s.time_axis, start, None)
        width = max(row.source_length for row in self.rows)
        if width < self._source_mask.shape[1]:
            self._source_mask = np.ascontiguousarray(self._source_mask[:, :width])
            for t in self._spec.source_tensors:
                if t.source_axis is not None:
                    self._sources[t.name] = _slice(self._sources[t.name], t.source_axis, 0, width)

    def step(self) -> list[tuple[Row, int]]:
        """One decoder call for every row; each row picks its token. Finished rows leave the batch.

        Returns:
            (row, token) for every row, in batch order, eos tokens included.
        """
        if not self.rows:
            return []
        spec = self._spec
        batch = len(self.rows)
        ones = np.ones((batch, 1), dtype=np.int64)
        feeds: dict[str, np.ndarray] = {spec.input_ids: self._tokens, **self._sources, **self._states}
        if spec.position_ids:
            feeds[spec.position_ids] = self._positions
        if spec.self_attention_mask:
            feeds[spec.self_attention_mask] = np.concatenate([self._past_mask, ones], axis=1)
        if spec.source_attention_mask:
            feeds[spec.source_attention_mask] = self._source_mask
        want_logits = self.needs_logits
        names = [spec.top_ids, *(s.output for s in spec.state)] + ([spec.logits] if want_logits else [])
        outputs = self._graphs.step(feeds, names)
        top_ids = outputs[0]
        logits = outputs[-1] if want_logits else None
        self._states = {s.input: out for s, out in zip(spec.state, outputs[1:], strict=False)}
        if self._grows:
            self._past_mask = np.concatenate([self._past_mask, ones], axis=1)
        chosen = []
        for i, row in enumerate(self.rows):
            token = row.sequence.choose(top_ids[i], None if logits is None else logits[i])
            self._tokens[i, 0] = token
            self._positions[i, 0] += 1
            row.steps += 1
            chosen.append((row, token))
        self.remove([row for row, _ in chosen if row.sequence.finished])
        return chosen


def _stack(batch: np.ndarray | None, row: np.ndarray, axis: int) -> np.ndarray:
    return row if batch is None else np.concatenate([batch, row], axis=axis)


def _pad_to(array: np.ndarray, axis: int | None, width: int) -> np.ndarray:
    """Right-pad ``array`` with zeros along ``axis`` to ``width``."""
    if axis is None or array.shape[axis] >= width:
        return array
    pad = [(0, 0)] * array.ndim
    pad[axis] = (0, width - array.shape[axis])
    return np.pad(array, pad)


def _slice(array: np.ndarray, axis: int, start: int, stop: int | None) -> np.ndarray:
    index = [slice(None)] * array.ndim
    index[axis] = slice(start, stop)
    return np.ascontiguousarray(array[tuple(index)])
