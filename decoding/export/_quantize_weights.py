"""Writing quantized weights block by block: the data half of :mod:`._quantize`.

Each weight is read from the float32 ``<graph>.data`` through memory maps of one block of rows
(``BLOCK_BYTES``) — twice: once for its minima and maxima, once to quantize — and appended to the
new ``<graph>.data``. The numbers come from onnxruntime's own helpers (``compute_scale_zp``,
``quantize_nparray``) or, for per-channel scales, their formula applied to all channels at once;
tests/test_quantize.py checks every byte against ``quantize_dynamic``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BLOCK_BYTES = 16 << 20  # float32 bytes read at once: bounds peak memory (a few temporaries of it)
INLINE_BELOW = 4096  # smaller tensors stay in the protobuf; larger ones go to <graph>.data
PAGE = 4096  # external tensors start on a page boundary, so ONNX Runtime can map them


@dataclass(frozen=True)
class QuantizedNames:
    """Where a tensor's quantized form lives (onnxruntime's ``QuantizedValue``); ``axis``: the
    channel axis of a per-channel weight, None for one scale."""

    name: str
    scale: str
    zero_point: str
    axis: int | None = None


@dataclass(frozen=True)
class WeightJob:
    """A float initializer to quantize when the initializers are written."""

    source: TensorProto
    names: QuantizedNames
    per_channel: bool  # int8 7-bit symmetric per last-axis channel, else uint8 with one scale


def is_external(tensor: TensorProto | None) -> bool:
    return tensor is not None and tensor.data_location == TensorProto.EXTERNAL


class DataFile:
    """The new ``<graph>.data``: tensors appended one after the other, each on a page boundary."""

    def __init__(self, stream: BinaryIO, location: str) -> None:
        self._stream = stream
        self._location = location

    def append(self, tensor: TensorProto, blocks: Iterator[np.ndarray]) -> None:
        """Write ``blocks`` (the tensor's bytes in C order) and point ``tensor`` at them."""
        offset = -self._stream.tell() % PAGE + self._stream.tell()
        self._stream.seek(offset)
        for block in blocks:
            self._stream.write(np.ascontiguousarray(block).data)
        tensor.ClearField("raw_data")
        tensor.ClearField("external_data")
        tensor.data_location = TensorProto.EXTERNAL
        length = self._stream.tell() - offset
        for key, value in (("location", self._location), ("offset", offset), ("length", length)):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)


def write_initializers(
    model: onnx.ModelProto,
    jobs: dict[str, WeightJob],
    data: DataFile,
    base: Path,
    block_bytes: int,
    replaced: dict[str, np.ndarray] | None = None,
    column_sums: dict[str, tuple[str, np.ndarray | None]] | None = None,
) -> None:
    """Quantize each job and copy each kept tensor, in the graph's initializer order, one at a time;
    a float tensor named in ``replaced`` is written with those values instead of its own, and for a
    quantized weight named in ``column_sums`` minus its column sums times its scales, and the bias
    given there (or zeros), fill the placeholder named there, shaped (2, columns) (it must come
    after every weight in the initializer list)."""
    by_name = {t.name: t for t in model.graph.initializer}
    replaced = dict(replaced or {})
    column_sums = column_sums or {}
    for tensor in list(model.graph.initializer):
        job = jobs.get(tensor.name)
        if tensor.name in replaced:
            values = replaced[tensor.name].astype(np.float32).reshape(list(tensor.dims))
            tensor.CopyFrom(numpy_helper.from_array(values, tensor.name))
            if values.nbytes >= INLINE_BELOW:
                data.append(tensor, iter([values.reshape(-1)]))
        elif job is not None:
            scale, zero_point = _quantization_parameters(job, base, block_bytes)
            for name, values in ((job.names.scale, scale), (job.names.zero_point, zero_point)):
                if name in by_name:  # built as onnxruntime builds them: the same protobuf
                    made = helper.make_tensor(
                        name, by_name[name].data_type, list(by_name[name].dims), values.reshape(-1).tolist()
                    )
                    by_name[name].CopyFrom(made)
            blocks = _quantized_blocks(job, scale, zero_point, base, block_bytes)
            if tensor.name in column_sums:
                sums = np.zeros(tensor.dims[-1], dtype=np.int64)
                blocks = _summing_columns(blocks, sums)
            if _nbytes(tensor) >= INLINE_BELOW:
                data.append(tensor, blocks)
            else:
                tensor.raw_data = b"".join(block.tobytes() for block in blocks)
            if tensor.name in column_sums:  # every block has gone through _summing_columns by now
                table, bias = column_sums[tensor.name]
                offsets = -sums * scale.astype(np.float64)
                replaced[table] = np.stack([offsets, np.zeros_like(offsets) if bias is None else bias])
        elif is_external(tensor):
            data.append(tensor, _external_bytes(tensor, base, block_bytes))
        elif tensor.HasField("raw_data") and len(tensor.raw_data) >= INLINE_BELOW:
            data.append(tensor, iter([np.frombuffer(tensor.raw_data, dtype=np.uint8)]))


def _summing_columns(blocks: Iterator[np.ndarray], sums: np.ndarray) -> Iterator[np.ndarray]:
    """Pass quantized (rows, columns) blocks through, adding each column into ``sums``."""
    for block in blocks:
        sums += block.sum(axis=0, dtype=np.int64)
        yield block


def read_float(tensor: TensorProto, base: Path) -> np.ndarray:
    """A (small) float32 tensor's values, flattened, wherever they are stored."""
    return np.concatenate([block.reshape(-1) for block in _float_rows(tensor, base, BLOCK_BYTES)])


def vector_times_weight(vector: np.ndarray, weight: TensorProto, base: Path, block_bytes: int) -> np.ndarray:
    """``vector @ weight`` for a (K, N) float weight, read a block of rows at a time (float64 sums)."""
    total = np.zeros(weight.dims[-1], dtype=np.float64)
    start = 0
    for block in _float_rows(weight, base, block_bytes):
        total += vector[start : start + len(block)].astype(np.float64) @ block.astype(np.float64)
        start += len(block)
        del block
    return total


def _nbytes(tensor: TensorProto) -> int:
    return (
        int(np.prod(tensor.dims, dtype=np.int64)) * helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    )


def _quantization_parameters(job: WeightJob, base: Path, block_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """(scale, zero point) of a job: one pass over the weight for its minima and maxima."""
    from onnxruntime.quantization.quant_utils import compute_scale_zp, get_qmin_qmax_for_qType

    low: np.ndarray | None = None
    high: np.ndarray | None = None
    for block in _float_rows(job.source, base, block_bytes):
        axis = 0 if job.per_channel else None
        block_low, block_high = block.min(axis=axis), block.max(axis=axis)
        low = block_low if low is None else np.minimum(low, block_low)
        high = block_high if high is None else np.maximum(high, block_high)
        del block
    if low is None or high is None:
        raise ValueError(f"{job.source.name!r} is empty")
    if not job.per_channel:  # onnxruntime's quantize_initializer_impl: uint8, asymmetric, full range
        qmin, qmax = get_qmin_qmax_for_qType(TensorProto.UINT8, reduce_range=False, symmetric=False)
        zero_point, scale = compute_scale_zp(np.array(low), np.array(high), qmin, qmax, symmetric=False)
        return np.asarray(scale), np.asarray(zero_point)
    return _symmetric_per_channel(low, high)


def _symmetric_per_channel(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's ``compute_scale_zp`` for int8, 7 bits, symmetric, over a vector of channels
    at once (it takes one channel per call: 256206 Python calls for NLLB's output projection)."""
    from onnxruntime.quantization.quant_utils import get_qmin_qmax_for_qType

    qmin, qmax = get_qmin_qmax_for_qType(TensorProto.INT8, reduce_range=True, symmetric=True)
    zero = np.array(0, dtype=low.dtype)
    absmax = np.maximum(np.abs(np.minimum(low, zero)), np.abs(np.maximum(high, zero)))
    spread = absmax.astype(np.float64) - (-absmax).astype(np.float64)
    exact = spread / (np.array(qmax, dtype=np.float64) - np.array(qmin, dtype=np.float64))
    scale = exact.astype(low.dtype)
    scale[exact < np.finfo(low.dtype).tiny] = 1.0  # an all-zero channel: scale 1, as onnxruntime
    middle = np.round((qmin + qmax) / np.array(2.0, dtype=np.float64))
    return scale, np.full(scale.shape, middle, dtype=qmin.dtype)


def _quantized_blocks(
    job: WeightJob, scale: np.ndarray, zero_point: np.ndarray, base: Path, block_bytes: int
) -> Iterator[np.ndarray]:
    """The weight quantized block by block with onnxruntime's ``quantize_nparray`` (elementwise:
    the same values whether it sees a channel, a block or the whole tensor)."""
    from onnxruntime.quantization.quant_utils import quantize_nparray

    kind = TensorProto.INT8 if job.per_channel else TensorProto.UINT8
    for block in _float_rows(job.source, base, block_bytes):
        yield quantize_nparray(kind, block, scale, zero_point)
        del block


def _float_rows(tensor: TensorProto, base: Path, block_bytes: int) -> Iterator[np.ndarray]:
    """A float32 tensor as (rows, last axis) blocks of about ``block_bytes``; an external one read
    through a memory map of just that block, dropped before the next."""
    columns = tensor.dims[-1] if tensor.dims else 1
    rows = int(np.prod(tensor.dims, dtype=np.int64)) // max(columns, 1)
    step = max(1, block_bytes // max(columns * 4, 1))
    if not is_external(tensor):
        array = numpy_helper.to_array(tensor).astype(np.float32, copy=False).reshape(rows, columns)
        for start in range(0, rows, step):
            yield array[start : start + step]
        return
    location, offset, _ = _external_location(tensor, base)
    for start in range(0, rows, step):
        count = min(step, rows - start)
        yield np.memmap(
            location, dtype="<f4", mode="r", offset=offset + start * columns * 4, shape=(count, columns)
        )


def _external_bytes(tensor: TensorProto, base: Path, block_bytes: int) -> Iterator[np.ndarray]:
    """An external tensor's bytes, unchanged, a block at a time."""
    location, offset, length = _external_location(tensor, base)
    for start in range(0, length, block_bytes):
        count = min(block_bytes, length - start)
        yield np.memmap(location, dtype=np.uint8, mode="r", offset=offset + start, shape=(count,))


def _external_location(tensor: TensorProto, base: Path) -> tuple[Path, int, int]:
    """(file, offset, length) of an external tensor; the file must lie beside the graph."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = base / info["location"]
    if os.path.commonpath([location.resolve(), base.resolve()]) != str(base.resolve()):
        raise ValueError(f"{tensor.name!r}: external data outside the graph's directory")
    offset = int(info.get("offset", 0))
    length = int(info["length"]) if "length" in info else _nbytes(tensor)
    return location, offset, length
