"""A small ONNX graph builder on ``onnx.helper``: enough to write a transformer without torch.

Each method appends one node and returns the name of its output, so graph code reads like the math
(``x = g.add(x, g.linear(h, w))``). Weights become initializers; ONNX Runtime's contrib ops go in
the ``com.microsoft`` domain.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, BinaryIO

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18
MICROSOFT = "com.microsoft"


class GraphBuilder:
    """``data``: a file to stream the weights into (external data, as ONNX names it) instead of
    keeping them in the protobuf — for graphs over protobuf's 2 GiB limit, and so that a 3 GB graph
    is never held in memory twice while it is written."""

    def __init__(self, name: str, *, data: BinaryIO | None = None, data_name: str = "") -> None:
        self.name = name
        self._data = data
        self._data_name = data_name
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.value_info: list[onnx.ValueInfoProto] = []
        self._count = 0
        self._constants: dict[tuple[str, bytes, tuple[int, ...]], str] = {}

    # --- graph interface ---------------------------------------------------------------------
    def input(self, name: str, elem_type: int, shape: Sequence[int | str]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        return name

    def output(self, name: str, elem_type: int, shape: Sequence[int | str]) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))

    def weight(self, name: str, array: np.ndarray) -> str:
        if self._data is None or array.nbytes < 4096:
            self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
            return name
        tensor = onnx.TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype))
        tensor.dims.extend(array.shape)
        offset = -self._data.tell() % 4096 + self._data.tell()  # page-aligned, so it can be mapped
        self._data.seek(offset)
        write_c_order(self._data, array)
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", self._data_name), ("offset", offset), ("length", array.nbytes)):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)
        self.initializers.append(tensor)
        return name

    def const(self, value: Any, dtype: type = np.int64) -> str:
        """A small constant (shapes, axes, scalars), shared between nodes that need the same one."""
        array: np.ndarray = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.tobytes(), array.shape)
        if key not in self._constants:
            self._constants[key] = self.weight(f"const_{len(self._constants)}", array)
        return self._constants[key]

    def node(
        self,
        op: str,
        inputs: Sequence[str],
        *,
        outputs: Sequence[str] | int = 1,
        domain: str = "",
        **attributes: Any,
    ) -> Any:
        """Append ``op``; returns its output name (or a list of names when ``outputs`` > 1 or a list)."""
        names = [self._fresh(op) for _ in range(outputs)] if isinstance(outputs, int) else list(outputs)
        self.nodes.append(
            helper.make_node(
                op, list(inputs), names, name=self._fresh(f"{op}_node"), domain=domain, **attributes
            )
        )
        if domain == MICROSOFT:  # onnx cannot infer contrib ops' types; the int8 quantizer needs them
            self.value_info += [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names]
        return names[0] if len(names) == 1 else names

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name, self.inputs, self.outputs, self.initializers, value_info=self.value_info
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MICROSOFT, 1)],
            producer_name="liuyi",
        )
        model.ir_version = 9  # what ONNX Runtime >= 1.16 reads
        return model

    def _fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count}"

    # --- building blocks ----------------------------------------------------------------------
    def add(self, a: str, b: str) -> str:
        return self.node("Add", [a, b])

    def mul(self, a: str, b: str) -> str:
        return self.node("Mul", [a, b])

    def linear(self, x: str, name: str, weight: np.ndarray, bias: np.ndarray | None) -> str:
        """x @ weight.T + bias, with ``weight`` (out, in) as PyTorch stores it: one MatMul (what the
        int8 quantizer turns into an integer matmul) and one Add."""
        y: str = self.node(
            "MatMul", [x, self.weight(f"{name}.weight_t", weight.T.astype(np.float32, copy=False))]
        )
        if bias is not None:
            y = self.add(y, self.weight(f"{name}.bias", bias.astype(np.float32, copy=False)))
        return y

    def layer_norm(self, x: str, name: str, scale: np.ndarray, bias: np.ndarray, epsilon: float) -> str:
        return self.node(
            "LayerNormalization",
            [x, self.weight(f"{name}.weight", scale), self.weight(f"{name}.bias", bias)],
            axis=-1,
            epsilon=epsilon,
        )

    def activation(self, x: str, kind: str) -> str:
        if kind in ("swish", "silu"):
            return self.mul(x, self.node("Sigmoid", [x]))
        if kind == "relu":
            return self.node("Relu", [x])
        if kind == "gelu":  # exact (erf) gelu, as torch.nn.functional.gelu
            erf = self.node("Erf", [self.node("Div", [x, self.const(np.sqrt(2.0), np.float32)])])
            half = self.mul(x, self.const(0.5, np.float32))
            return self.mul(half, self.add(erf, self.const(1.0, np.float32)))
        raise ValueError(f"activation {kind!r} is not supported (swish, silu, relu, gelu are)")


FLOAT, INT64, INT32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


def write_c_order(stream: BinaryIO, array: np.ndarray, block_bytes: int = 16 << 20) -> None:
    """Write ``array``'s bytes in C order without a copy of the whole array: a contiguous one (a
    weight mapped from the checkpoint) as it is, a view (a transposed weight) in blocks of rows —
    ``tobytes()`` of NLLB's 256206 x 1024 output projection was a 1 GB copy at the conversion's peak."""
    if array.flags.c_contiguous:
        stream.write(array.data)
        return
    rows = max(1, block_bytes // max(1, array[0].nbytes))
    for start in range(0, len(array), rows):
        stream.write(np.ascontiguousarray(array[start : start + rows]).data)
