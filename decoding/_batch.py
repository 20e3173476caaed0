"""Several target sequences stepped together: one decoder call per step for the whole batch.

Every per-sequence tensor lives in a *slot* of a host buffer that has room for more sequences and
longer sequences than are running now; a batch of B sequences is the first B slots. Nothing is
copied per step:

* **key/value caches** (manifest ``in_place`` states) are bound to ONNX Runtime as both input and
  output. The graph writes the step's entry at each row's ``position_ids`` and masks everything after
  it, so rows of different lengths share one buffer without padding bookkeeping, and stale values
  left in a slot by an earlier sequence are never read.
* **source tensors** (cross-attention keys/values) are written once when a sequence joins; the
  ``source_attention_mask`` hides the unused end of each slot.
* **fixed-size state** (an RNN hidden state) is fed back: the step's output is written into the slot.
* the **input tokens and positions** are small buffers updated in place between steps.

Buffers are bound once per row range (an ``IOBinding``: rows ``0:B`` for a full step, the newest
rows for a newcomers' first step) and the bindings are kept until the buffers are reallocated:
binding costs ~10 µs per tensor in ONNX Runtime's Python API, a third of a millisecond per call
for a Marian decoder, paid on every arrival and departure otherwise. A
sequence that leaves gives its slot to the last one (one row copied, not the batch); capacities
grow when exceeded. Each row's math is exactly what it would be alone, so greedy outputs are
token-identical whatever else shares the batch (the batching tests check this). The manifest says
which tensor is which; this code never looks at the model family.

Who owns what: the batch owns tensors, never tokens. :meth:`DecodeBatch.step` runs the graph and
returns each row's top ids (and logits when asked); the row's *owner* — a ``Translation`` in
the server, a bare ``GreedySequence`` in tests — picks the token and says whether its sequence
ended; :meth:`DecodeBatch.feed` takes the next inputs. :func:`advance_batch` is that whole step, the
one both drivers (``TranslationStream`` and ``BatchScheduler``) call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import onnxruntime

from ._graphs import EncodedSource, Seq2SeqGraphs
from ._manifest import SourceTensor, StateTensor

_MIN_ROWS, _MIN_TIME, _MIN_SOURCE = 4, 16, 8  # first capacities
_MAX_BINDINGS = 64  # row ranges bound at once; past that the cache starts over (cheap to rebuild)


class Stepper(Protocol):
    """Who owns a row's sequence and decides what each step's output means (a ``Translation``, or
    a bare ``GreedySequence``). The batch only runs the graph and moves tensors."""

    @property
    def needs_logits(self) -> bool: ...

    def advance(self, top_ids: np.ndarray, logits: np.ndarray | None, step_ms: float) -> int | None:
        """Take this step's output; return the next input token, or None when the sequence ended."""
        ...


@dataclass(eq=False)
class Row:
    """One sequence in a batch. ``tag`` is the caller's handle (a request, a stream)."""

    owner: Stepper
    source_length: int
    tag: Any = None


@dataclass(frozen=True, slots=True)
class StepOutput:
    row: Row
    top_ids: np.ndarray  # (k,) best next tokens, best first
    logits: np.ndarray | None  # (vocab,) only when asked for


class DecodeBatch:
    def __init__(self, graphs: Seq2SeqGraphs) -> None:
        self._graphs = graphs
        spec = graphs.manifest.decoder
        self._spec = spec
        self._decoder_start = graphs.manifest.tokens.decoder_start
        self._caches = [s for s in spec.state if s.in_place]
        self._carried = [s for s in spec.state if not s.in_place]
        self.rows: list[Row] = []
        self._rows_capacity = self._time_capacity = self._source_capacity = 0
        self._buffers: dict[str, np.ndarray] = {}
        self._batch_axis: dict[str, int] = {}  # buffer name -> its batch axis
        self._bindings: dict[tuple[int, int, bool], _Binding] = {}  # (first slot, end slot, with_logits)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def capacity(self) -> tuple[int, int, int]:
        """(rows, cache positions, source positions) the buffers have room for."""
        return self._rows_capacity, self._time_capacity, self._source_capacity

    # -- joining and leaving -------------------------------------------------------------------------

    def add(self, encoded: EncodedSource, *, max_new_tokens: int, owner: Stepper, tag: Any = None) -> Row:
        """Join a sequence (its encoder already ran); it takes its first step with the others."""
        slot = len(self.rows)
        # room for the whole output now: growing later would copy every running sequence's cache
        self._reserve(rows=slot + 1, source=encoded.length, time=max_new_tokens)
        b = self._buffers
        b["input_ids"][slot] = self._decoder_start
        b["position_ids"][slot] = 0
        if self._spec.source_attention_mask:
            b["source_mask"][slot] = 0
            b["source_mask"][slot, : encoded.length] = 1
        for t in self._spec.source_tensors:
            _slot_view(b[t.name], t.batch_axis, slot, t.source_axis, encoded.length)[...] = encoded.outputs[
                t.name
            ]
        for s in self._carried:
            initial = encoded.outputs[s.initial.partition(":")[2]]
            _slot_view(b[s.input], s.batch_axis, slot)[...] = initial
        row = Row(owner=owner, source_length=encoded.length, tag=tag)
        self.rows.append(row)
        return row

    def remove(self, rows: list[Row]) -> None:
        """Drop rows (finished or cancelled): the last row moves into each freed slot."""
        gone = {id(row) for row in rows}
        slots = sorted((i for i, row in enumerate(self.rows) if id(row) in gone), reverse=True)
        for slot in slots:
            last = len(self.rows) - 1
            if slot != last:
                for name, array in self._buffers.items():
                    axis = self._batch_axis[name]
                    _slot_view(array, axis, slot)[...] = _slot_view(array, axis, last)
                self.rows[slot] = self.rows[last]
            self.rows.pop()

    # -- stepping ------------------------------------------------------------------------------------

    def step(self, *, with_logits: bool = False, newest: int | None = None) -> list[StepOutput]:
        """One decoder call for every row, or only for the ``newest`` rows (the last ones added: a
        newcomer's first step need not wait for a full batch step). The batch chooses nothing: each
        row's owner reads its output and :meth:`feed` gives the batch the tokens for the next step.

        Returns:
            The stepped rows' outputs, in batch order (views into the batch's buffers: valid until
            the next step).
        """
        start, stop = self._stepped(newest)
        if start >= stop:
            return []
        furthest = int(self._buffers["position_ids"][start:stop].max())
        if self._caches and furthest >= self._time_capacity:
            self._reserve(time=furthest + 1)  # before taking any view: this reallocates the buffers
        key = (start, stop, with_logits)
        binding = self._bindings.get(key)
        if binding is None:
            if len(self._bindings) >= _MAX_BINDINGS:
                self._bindings.clear()
            binding = self._bind(start, stop, with_logits)
            self._bindings[key] = binding
        binding.refresh()
        self._graphs.run_bound(binding.io)
        top_ids = self._buffers["top_ids"][start:stop]
        logits = self._buffers["logits"][start:stop] if with_logits else None
        binding.store_carried(self._buffers, start)
        return [
            StepOutput(row, top_ids[i], None if logits is None else logits[i])
            for i, row in enumerate(self.rows[start:stop])
        ]

    def stepped_rows(self, newest: int | None = None) -> list[Row]:
        """The rows :meth:`step` runs for ``newest``: every row, or the last ``newest`` added."""
        start, stop = self._stepped(newest)
        return self.rows[start:stop]

    def _stepped(self, newest: int | None) -> tuple[int, int]:
        stop = len(self.rows)
        return (0 if newest is None else max(0, stop - newest)), stop

    def feed(self, tokens: list[tuple[Row, int]]) -> None:
        """Each row's next input token (its position moves one on)."""
        slots = {id(row): i for i, row in enumerate(self.rows)}
        inputs, positions = self._buffers["input_ids"], self._buffers["position_ids"]
        for row, token in tokens:
            slot = slots[id(row)]
            inputs[slot, 0] = token
            positions[slot, 0] += 1

    def _bind(self, start: int, stop: int, with_logits: bool) -> _Binding:
        """Bind slots ``start:stop`` (views: the graph reads and writes the batch's own buffers)."""
        spec, b = self._spec, self._buffers
        rows = slice(start, stop)
        binding = _Binding(self._graphs.new_binding(), with_logits)
        binding.input(spec.input_ids, b["input_ids"][rows])
        if spec.position_ids:
            binding.input(spec.position_ids, b["position_ids"][rows])
        if spec.source_attention_mask:
            binding.input(spec.source_attention_mask, b["source_mask"][rows])
        for t in spec.source_tensors:
            binding.input(t.name, _rows_view(b[t.name], t.batch_axis, stop, start))
        for s in self._caches:
            binding.in_place(s.input, s.output, b[s.input][rows])
        for s in self._carried:
            binding.carried(s, _rows_view(b[s.input], s.batch_axis, stop, start))
        binding.output(spec.top_ids, b["top_ids"][rows])
        if with_logits:
            if "logits" not in b or b["logits"].shape[0] < self._rows_capacity:
                b["logits"] = np.zeros((self._rows_capacity, self._graphs.vocab_size), dtype=np.float32)
                self._batch_axis["logits"] = 0
            binding.output(spec.logits, b["logits"][rows])
        return binding

    # -- capacity ------------------------------------------------------------------------------------

    def _reserve(self, *, rows: int = 0, time: int = 0, source: int = 0) -> None:
        """Grow (never shrink) the buffers to hold ``rows`` sequences of the given lengths."""
        new_rows = _grown(self._rows_capacity, rows, _MIN_ROWS)
        new_time = _grown(self._time_capacity, time, _MIN_TIME) if self._caches else 0
        new_source = _grown(self._source_capacity, source, _MIN_SOURCE)
        if (new_rows, new_time, new_source) == self.capacity:
            return
        old = self._buffers
        self._buffers, self._batch_axis = {}, {}
        self._allocate("input_ids", (new_rows, 1), np.int64, 0)
        self._allocate("position_ids", (new_rows, 1), np.int64, 0)
        self._allocate("top_ids", (new_rows, 2), np.int64, 0)
        self._allocate("source_mask", (new_rows, new_source), np.int64, 0)
        for t in self._spec.source_tensors:
            self._allocate_like(t.name, t, new_rows, {t.source_axis: new_source})
        for s in self._caches:
            self._allocate_like(s.input, s, new_rows, {s.time_axis: new_time})
        for s in self._carried:
            self._allocate_like(s.input, s, new_rows, {})
        for name, array in old.items():  # keep what the running sequences have
            if name in self._buffers:
                _copy_overlap(array, self._buffers[name])
        self._rows_capacity, self._time_capacity, self._source_capacity = new_rows, new_time, new_source
        self._bindings.clear()

    def _allocate(self, name: str, shape: tuple[int, ...], dtype: Any, batch_axis: int) -> None:
        # zeros, not empty: masked positions are multiplied by 0, which only gives 0 if they are finite
        self._buffers[name] = np.zeros(shape, dtype=dtype)
        self._batch_axis[name] = batch_axis

    def _allocate_like(
        self, name: str, layout: SourceTensor | StateTensor, rows: int, sizes: dict[int | None, int]
    ) -> None:
        """A buffer for decoder input ``name``: fixed sizes from the graph, the rest from ``sizes``."""
        dims = self._graphs.input_dims(name)
        shape = []
        for axis, dim in enumerate(dims):
            if axis == layout.batch_axis:
                shape.append(rows)
            elif axis in sizes:
                shape.append(sizes[axis])
            else:
                assert isinstance(dim, int), f"{name}: axis {axis} has no fixed size"
                shape.append(dim)
        self._allocate(name, tuple(shape), np.float32, layout.batch_axis)


def advance_batch(batch: DecodeBatch, *, newest: int | None = None) -> list[tuple[Row, bool]]:
    """The one step function of both drivers (``TranslationStream``, ``BatchScheduler``): the decoder
    runs once for every row (or only the ``newest`` ones), each stepped row's owner advances its own
    sequence, rows whose owner ended leave the batch.

    Returns:
        (row, ended) for every row that took the step, in batch order.

    Raises:
        InferenceError: the decoder failed; nothing advanced.
    """
    started = time.perf_counter()
    with_logits = any(row.owner.needs_logits for row in batch.stepped_rows(newest))
    outputs = batch.step(with_logits=with_logits, newest=newest)
    step_ms = (time.perf_counter() - started) * 1000
    fed: list[tuple[Row, int]] = []
    stepped: list[tuple[Row, bool]] = []
    for output in outputs:
        token = output.row.owner.advance(output.top_ids, output.logits, step_ms)
        if token is not None:
            fed.append((output.row, token))
        stepped.append((output.row, token is None))
    batch.feed(fed)
    batch.remove([row for row, ended in stepped if ended])
    return stepped


class _Binding:
    """An IOBinding over the batch's buffers, kept across steps while the batch's shape is unchanged."""

    def __init__(self, io: onnxruntime.IOBinding, with_logits: bool) -> None:
        self.io = io
        self.with_logits = with_logits
        self._keep: list[Any] = []  # numpy views the bound OrtValues point into must stay alive
        self._copied: list[tuple[str, np.ndarray]] = []  # inputs that had to be copied: rebind per step
        self._carried: list[tuple[StateTensor, int]] = []  # fed-back states: (spec, output index)
        self._outputs = 0

    def _value(self, array: np.ndarray) -> onnxruntime.OrtValue:
        self._keep.append(array)
        return onnxruntime.OrtValue.ortvalue_from_numpy(array)

    def input(self, name: str, view: np.ndarray) -> None:
        if view.flags.c_contiguous:
            self.io.bind_ortvalue_input(name, self._value(view))
        else:  # e.g. a batch slice along a non-leading axis: copied each step instead
            self._copied.append((name, view))

    def in_place(self, input_name: str, output_name: str, view: np.ndarray) -> None:
        value = self._value(view)
        self.io.bind_ortvalue_input(input_name, value)
        self.io.bind_ortvalue_output(output_name, value)
        self._outputs += 1

    def carried(self, spec: StateTensor, view: np.ndarray) -> None:
        self.input(spec.input, view)
        self.io.bind_output(spec.output, "cpu")
        self._carried.append((spec, self._outputs))
        self._outputs += 1

    def output(self, name: str, view: np.ndarray) -> None:
        self.io.bind_ortvalue_output(name, self._value(view))
        self._outputs += 1

    def refresh(self) -> None:
        for name, view in self._copied:
            self.io.bind_ortvalue_input(
                name, onnxruntime.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(view))
            )

    def store_carried(self, buffers: dict[str, np.ndarray], start: int = 0) -> None:
        """Write fed-back states (e.g. the GRU's new hidden state) into their slots (from ``start``)."""
        if not self._carried:
            return
        outputs = self.io.get_outputs()
        for spec, index in self._carried:
            new = outputs[index].numpy()
            stop = start + new.shape[spec.batch_axis]
            _rows_view(buffers[spec.input], spec.batch_axis, stop, start)[...] = new


def _grown(capacity: int, needed: int, minimum: int) -> int:
    """Grow by at least a quarter (and at least ``minimum``), so that a batch filling up one sequence
    at a time reallocates a logarithmic number of times."""
    if needed <= capacity:
        return capacity
    return max(needed, capacity + max(minimum, capacity // 4))


def _index(
    ndim: int, axis: int, rows: slice | int, other_axis: int | None = None, other: slice | None = None
) -> tuple[slice | int, ...]:
    index: list[slice | int] = [slice(None)] * ndim
    index[axis] = rows
    if other_axis is not None and other is not None:
        index[other_axis] = other
    return tuple(index)


def _slot_view(
    array: np.ndarray, batch_axis: int, slot: int, length_axis: int | None = None, length: int | None = None
) -> np.ndarray:
    """One sequence's slot (kept as a size-1 batch axis), optionally cut to ``length`` on another axis."""
    other = slice(0, length) if length is not None else None
    return array[_index(array.ndim, batch_axis, slice(slot, slot + 1), length_axis, other)]


def _rows_view(array: np.ndarray, batch_axis: int, stop: int, start: int = 0) -> np.ndarray:
    return array[_index(array.ndim, batch_axis, slice(start, stop))]


def _copy_overlap(old: np.ndarray, new: np.ndarray) -> None:
    """Copy ``old`` into the leading corner of the bigger ``new``."""
    new[tuple(slice(0, n) for n in old.shape)] = old
