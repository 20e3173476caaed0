"""int8 quantization that streams the weights: one tensor at a time, in blocks of rows.

Why not onnxruntime's ``quantize_dynamic``: it loads the whole graph with its weights, keeps
copies of them and builds numpy temporaries of whole tensors. Converting NLLB-200-600M peaked at
~10.5 GB RSS for a 2.4 GB float32 graph, so a 16 GB laptop could not convert NLLB-1.3B. Here the
graph is loaded without its external data, each weight is read from ``<graph>.data`` block by
block (a memory map of a few rows at a time), quantized, and appended to the new ``<graph>.data``:
peak memory is a few blocks plus the int8 graph's protobuf, whatever the model's size (CTranslate2's
converters work the same way).

The weights are those ``quantize_dynamic(weight_type=QInt8, per_channel=True, reduce_range=True,
op_types_to_quantize=["MatMul", "Gemm", "Gather"])`` writes, bit for bit, and so is the whole graph
with ``activations="per-tensor"`` — the same nodes in the same order (tests/test_quantize.py compares
them). By default one difference is made afterwards: each activation is quantized one row at a
time, so that a sequence's tokens do not depend on what else shares its batch (:mod:`._quantize_rows`).
The graph rewriting follows onnxruntime's quantizer rule by rule, its numbers come from
onnxruntime's own per-tensor helpers (``compute_scale_zp``, ``quantize_nparray``):

* MatMul with a constant float weight: the activation quantized on the fly (uint8,
  DynamicQuantizeLinear), the weight int8, symmetric, one scale per output channel (keeps greedy
  outputs much closer to float32 than one scale per tensor), MatMulInteger, then Cast and two Muls
  rescale to float. Packed query|key|value weights are one matmul: per-channel scales keep them exact.
* Gemm (only torch-exported graphs have one: the output projection sharing the embedding table) is
  first rewritten to MatMul over a transposed copy of its weight, as onnxruntime does.
* Gather from a float table (embeddings): the table uint8, one scale; a DequantizeLinear after the
  lookup. For opus-mt the tables are 65001 x 512 floats (133 MB) in each graph, most of a bundle's
  memory, while a step reads only one row of them.

Weights use 7 bits (``reduce_range``), deliberately — do not "fix" without reading this. ONNX
Runtime multiplies uint8 activations by int8 weights; on x86 CPUs without VNNI (AVX2-only, AVX-512
without VNNI) its kernel adds pairs of products in saturating 16-bit lanes, and 255 * 127 * 2
overflows them: on an AMD EPYC (AVX2) only 45 % of greedy tokens agreed with float32, against 94 %
on a VNNI Xeon. With 7-bit weights (|w| <= 64) the pair sum (255 * 64 * 2) always fits. A bundle
made on one CPU is served on others, so the safe choice is made for all of them; it costs a bit of
precision on VNNI machines (tests/test_int8.py holds the agreement).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from ._quantize_rows import ActivationScales, quantize_activations_per_row
from ._quantize_weights import (
    BLOCK_BYTES,
    DataFile,
    QuantizedNames,
    WeightJob,
    is_external,
    read_float,
    vector_times_weight,
    write_initializers,
)

OP_TYPES = ("MatMul", "Gemm", "Gather")  # what liuyi quantizes; the rest of the graph stays float


def quantize_graph(
    path: Path, *, block_bytes: int = BLOCK_BYTES, activations: ActivationScales = "per-row"
) -> str:
    """Replace the float32 graph at ``path`` by its dynamic-int8 version, weights in ``<graph>.data``.

    Arguments:
        path: an ONNX graph whose weights are inline or external (any file beside it).
        block_bytes: how many float32 bytes of a weight are read and quantized at once.
        activations: "per-row" (what bundles use) or "per-tensor" (onnxruntime's graph exactly).

    Returns:
        the name of the weight file written beside the graph (for the manifest).

    Raises:
        ValueError: the graph has something onnxruntime's quantizer would treat in a way this one
            does not reproduce (subgraphs, float16 weights, an opset before 11).
    """
    path = Path(path)
    model = _load_plan(path)
    jobs = _rewrite(model)
    replaced, column_sums = (
        _per_row(model, jobs, path.parent, block_bytes) if activations == "per-row" else ({}, {})
    )
    data_name = f"{path.name}.data"
    partial_data = path.with_name(data_name + ".partial")
    partial_graph = path.with_name(path.name + ".partial")
    try:
        with partial_data.open("wb") as stream:
            write_initializers(
                model, jobs, DataFile(stream, data_name), path.parent, block_bytes, replaced, column_sums
            )
        onnx.save_model(model, str(partial_graph))  # tensors already external: the protobuf only
    except BaseException:
        partial_data.unlink(missing_ok=True)
        partial_graph.unlink(missing_ok=True)
        raise
    partial_data.chmod(path.stat().st_mode & 0o777)  # readable by whoever may read the graph
    partial_data.replace(path.with_name(data_name))  # the float32 weights go only now: they were read
    partial_graph.replace(path)
    return data_name


def _per_row(
    model: onnx.ModelProto, jobs: dict[str, WeightJob], base: Path, block_bytes: int
) -> tuple[dict[str, np.ndarray], dict[str, tuple[str, np.ndarray | None]]]:
    """Quantize activations per row (:mod:`._quantize_rows`). Returns the values of the negated
    biases (``-(bias + beta @ W)``, W the float weight read a block at a time) and, for the writer,
    quantized weight -> (the initializer its scaled column sums and its bias go to, the bias)
    (placeholders added here)."""
    float_weights = {name: job.source.name for name, job in jobs.items() if job.per_channel}
    sources = {job.source.name: job.source for job in jobs.values()}
    initializers = {t.name: t for t in model.graph.initializer}
    replaced: dict[str, np.ndarray] = {}
    plan = quantize_activations_per_row(model, float_weights=float_weights)
    for subtracted in plan.biases:
        values = read_float(initializers[subtracted.bias], base).astype(np.float64)
        if subtracted.beta is not None and subtracted.weight is not None:
            beta = read_float(initializers[subtracted.beta], base)
            values += vector_times_weight(beta, sources[subtracted.weight], base, block_bytes)
        replaced[subtracted.output] = (-values).astype(np.float32)
        model.graph.initializer.append(
            _placeholder(subtracted.output, TensorProto.FLOAT, list(initializers[subtracted.bias].dims))
        )
    tables: dict[str, tuple[str, np.ndarray | None]] = {}
    placeholders = []
    for sums in plan.column_sums:  # placed last: written once every weight has been
        columns = list(initializers[sums.scale].dims[-1:])
        placeholders.append(_placeholder(sums.output, TensorProto.FLOAT, [2, *columns]))
        bias = None if sums.bias is None else read_float(initializers[sums.bias], base)
        tables[sums.weight] = (sums.output, bias)
    still_read = {name for node in model.graph.node for name in node.input}
    kept = [_copy(t) for t in model.graph.initializer if t.name in still_read or t.name in replaced]
    del model.graph.initializer[:]
    model.graph.initializer.extend([*kept, *placeholders])
    return replaced, tables


def _copy(tensor: TensorProto) -> TensorProto:
    copied = TensorProto()
    copied.CopyFrom(tensor)
    return copied


def _load_plan(path: Path) -> onnx.ModelProto:
    """The graph without its weights, Gemm rewritten and shapes inferred, as onnxruntime prepares it."""
    from onnxruntime.quantization.onnx_model import ONNXModel
    from onnxruntime.quantization.quant_utils import add_infer_metadata, get_opset_version

    model = onnx.load(str(path), load_external_data=False)
    if get_opset_version(model) < 11:
        raise ValueError(f"{path.name}: opset {get_opset_version(model)}; int8 needs 11 or later")
    if any(
        a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
        for n in model.graph.node
        for a in n.attribute
    ):
        raise ValueError(f"{path.name}: graphs with subgraphs are not quantized")
    initializers = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:  # onnxruntime reads (and copies) the weight of each Gemm it rewrites
        if node.op_type == "Gemm" and is_external(initializers.get(node.input[1])):
            raise ValueError(f"{path.name}: Gemm {node.name!r} with an external weight is not quantized")
    ONNXModel(model).replace_gemm_with_matmul()
    model = onnx.shape_inference.infer_shapes(model)  # reads shapes and small inline constants only
    add_infer_metadata(model)
    return model


def _rewrite(model: onnx.ModelProto) -> dict[str, WeightJob]:
    """Rewrite ``model``'s nodes as onnxruntime's dynamic quantizer does; the quantized initializers
    are placeholders (name, type, shape) until :func:`write_initializers`. Returns the placeholders'
    jobs by the quantized weight's name."""
    from onnxruntime.quantization.onnx_model import ONNXModel
    from onnxruntime.quantization.quant_utils import __producer__, __version__

    rewriter = _Rewriter(model)
    for node in list(model.graph.node):
        rewriter.visit(node)
    for output in model.graph.output:
        rewriter.dequantize(output.name)
    model.graph.ClearField("node")
    model.graph.node.extend(rewriter.nodes)
    graph = ONNXModel(model)
    graph.clean_initializers()  # the float weights now quantized, unless a float node still reads them
    graph.topological_sort()  # the order onnxruntime writes
    model.producer_name, model.producer_version = __producer__, __version__
    return rewriter.jobs


class _Rewriter:
    """onnxruntime's ``ONNXQuantizer.quantize_model`` in IntegerOps mode, for the three op types
    liuyi quantizes (operators/matmul.py ``MatMulInteger``, operators/gather.py ``GatherQuant``,
    operators/base_operator.py for every other node), with ``MatMulConstBOnly`` as
    ``quantize_dynamic`` sets it."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.initializers = {t.name: t for t in model.graph.initializer}
        self.original_names = {node.name for node in model.graph.node}
        self.nodes: list[onnx.NodeProto] = []
        self.quantized: dict[str, QuantizedNames] = {}
        self.generated = {i.name for i in model.graph.input if i.name not in self.initializers}
        self.jobs: dict[str, WeightJob] = {}

    def visit(self, node: onnx.NodeProto) -> None:
        added = len(self.nodes)
        if node.op_type == "MatMul" and self._float_weight(node.input[1]):
            self._matmul(node)
        elif node.op_type == "Gather" and self._float_weight(node.input[0]):
            self._gather(node)
        else:
            for name in node.input:
                self.dequantize(name)
            self.nodes.append(node)
        self.generated.update(out for n in self.nodes[added:] for out in n.output)

    def dequantize(self, name: str) -> None:
        """A DequantizeLinear where a float node reads a value that was quantized."""
        value = self.quantized.get(name)
        node_name = name + "_DequantizeLinear"
        if value is None or name in self.generated or node_name in self.original_names:
            return
        if any(n.name == node_name for n in self.nodes):
            return
        inputs = [value.name, value.scale, value.zero_point]
        self.nodes.append(helper.make_node("DequantizeLinear", inputs, [name], node_name, axis=value.axis))

    def _float_weight(self, name: str) -> bool:
        tensor = self.initializers.get(name)
        if tensor is None:
            return False
        if tensor.data_type == TensorProto.FLOAT16:
            raise ValueError(f"float16 weight {name!r}: only float32 graphs are quantized")
        return tensor.data_type == TensorProto.FLOAT

    def _matmul(self, node: onnx.NodeProto) -> None:
        activation = self._activation(node.input[0])
        weight = self.quantized.get(node.input[1]) or self._plan(node.input[1], per_channel=True)
        name = node.name + "_quant" if node.name else ""
        integer_out = node.output[0] + "_output_quantized"
        inputs = [activation.name, weight.name, activation.zero_point, weight.zero_point]
        self.nodes.append(helper.make_node("MatMulInteger", inputs, [integer_out], name))
        cast_out = integer_out + "_cast_output"
        to = self.initializers[node.input[1]].data_type  # MatMul's output type: its weight's
        self.nodes.append(helper.make_node("Cast", [integer_out], [cast_out], integer_out + "_cast", to=to))
        scales = [activation.scale, weight.scale]
        scales_mul = name + "_scales_mul" if name else "_".join(scales) + "_mul"
        if not any(n.name == scales_mul for n in self.nodes):
            self.nodes.append(helper.make_node("Mul", scales, [scales_mul + ":0"], scales_mul))
        output_mul = name + "_output_scale_mul" if name else ""
        self.nodes.append(
            helper.make_node("Mul", [cast_out, scales_mul + ":0"], [node.output[0]], output_mul)
        )

    def _gather(self, node: onnx.NodeProto) -> None:
        table = self.quantized.get(node.input[0]) or self._plan(node.input[0], per_channel=False)
        output = node.output[0]
        self.quantized[output] = QuantizedNames(output + "_quantized", table.scale, table.zero_point)
        node.output[0], node.input[0] = output + "_quantized", table.name
        self.nodes.append(node)

    def _activation(self, name: str) -> QuantizedNames:
        """The MatMul input quantized to uint8 on the fly (one DynamicQuantizeLinear per value)."""
        if name in self.quantized:
            return self.quantized[name]
        if name in self.initializers:  # a constant left operand: quantized like an embedding table
            return self._plan(name, per_channel=False)
        value = QuantizedNames(name + "_quantized", name + "_scale", name + "_zero_point")
        outputs = [value.name, value.scale, value.zero_point]
        self.nodes.append(
            helper.make_node("DynamicQuantizeLinear", [name], outputs, name + "_QuantizeLinear")
        )
        self.quantized[name] = value
        return value

    def _plan(self, name: str, *, per_channel: bool) -> QuantizedNames:
        """Placeholders for ``name``'s int8 (per channel) or uint8 form; the data comes later."""
        source = TensorProto()
        source.CopyFrom(self.initializers[name])  # kept: the graph drops the float weight later
        axis = len(source.dims) - 1 if per_channel else None
        names = QuantizedNames(name + "_quantized", name + "_scale", name + "_zero_point", axis)
        channels = [source.dims[-1]] if per_channel else []
        kind = TensorProto.INT8 if per_channel else TensorProto.UINT8
        self.model.graph.initializer.extend(
            [
                _placeholder(names.scale, source.data_type, channels),
                _placeholder(names.zero_point, kind, channels),
                _placeholder(names.name, kind, list(source.dims)),
            ]
        )
        self.jobs[names.name] = WeightJob(source=source, names=names, per_channel=per_channel)
        self.quantized[name] = names
        return names


def _placeholder(name: str, data_type: int, dims: list[int]) -> TensorProto:
    tensor = TensorProto(name=name, data_type=data_type)
    tensor.dims.extend(dims)
    return tensor
