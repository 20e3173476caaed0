"""Activations quantized one row at a time, so a sequence's int8 math ignores the rest of its batch.

onnxruntime's dynamic quantizer (what :mod:`._quantize` reproduces) quantizes each matmul's input
with ``DynamicQuantizeLinear``: one scale and zero point for the whole tensor, i.e. for every
sequence of the batch at once. A row's numbers then depend on the largest value of any other row:
on an opus-mt-shaped int8 bundle, 2 of 16 sentences decoded in one batch began with a different
token than decoded alone. Greedy output must not change with the server's load (the batch
scheduler and the cache both rely on it), so liuyi's int8 graphs give every row (one token of one
sequence) its own scale instead, as CTranslate2 does for its int8 models:

    m = max(|x_row|);   q = QuantizeLinear(x / m, 1/127, 128)    uint8, symmetric around 128

``m`` stands where the scale was and the 1/127 is folded into the weights' scales (a product of
constants ONNX Runtime folds at load), so a quantization costs four small operators. The zero
point stays the scalar 128, so ``MatMulInteger`` and the weights are unchanged and ONNX Runtime
still fuses ``MatMulInteger -> Cast -> Mul`` into one ``MatMulIntegerToFloat``. The uint8 values
lie in [1, 255]: with 7-bit weights the AVX2 kernel's pairwise 16-bit sums cannot saturate (see
:mod:`._quantize`).

Three details keep it exact and close to float32:

* **Biases are subtracted, not added**: fused with its bias Add, onnxruntime 1.32's
  ``MatMulIntegerToFloat`` gets the bias wrong when the activation scale is per row (it showed as
  the eos logit losing its +2); a ``Sub`` of the negated bias is not fused, the rest still is
  (tests/test_int8.py compares the fused graph with the unfused one).
* **LayerNorm outputs are centred**: symmetric levels waste half of themselves on a row that sits
  off zero, and a LayerNorm's bias shifts every row by the same vector. Such an activation has the
  bias ``beta`` subtracted before quantizing, and ``beta @ W`` (float, at conversion) goes into the
  matmul's own bias; in exact arithmetic nothing changes.
* **The logits' input keeps onnxruntime's asymmetric rule**, applied to each row (scale and zero
  point from the row's own minimum and maximum): its rounding decides the argmax. ONNX Runtime's
  integer matmul takes a single zero point, so the rows' zero points are taken out afterwards,
  together with the bias, by one K = 2 matmul fused into a Gemm over the (rows, vocabulary) output:
  ``y + (scale * zero point, 1) @ (-column sums of W * W's scales; bias)``, the column sums
  computed while the weights are written. A decoder alone in its batch computes exactly what
  onnxruntime's graph computes.

Measured (greedy tokens agreeing with float32): tiny test model 84.5 % per row vs 83.4 % with one
scale per tensor; opus-mt-shaped random model 92.3 % vs 86.5 % of tokens before the first
difference (52 sentences, 32 tokens). Cost, ``bench/ab_bundles.py`` paired on 1 thread: encoder
+6 %, a batch-1 decoder step unchanged, a batch-16 step +5 %.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import onnx
from onnx import helper, numpy_helper

ActivationScales = Literal["per-row", "per-tensor"]  # per-tensor: exactly onnxruntime's graph

_LEVELS = "per_row_levels"  # 1/127
_TINY = "per_row_tiny"  # the smallest normal float32: the logits' input scale of an all-zero row
_ONE = "per_row_one"
_MIDDLE = "per_row_zero_point"  # uint8 128
_LAST_AXIS = "per_row_last_axis"
_PASS_THROUGH = ("Squeeze", "Unsqueeze", "Reshape", "Identity")  # keep a LayerNorm's bias shape per row
_ZERO = "per_row_float_zero"
_INVERSE_RANGE = "per_row_inverse_range"  # 1/255
_UINT8_ZERO = "per_row_uint8_zero"


@dataclass(frozen=True)
class SubtractedBias:
    """A matmul's bias, now subtracted (see below): the initializer ``output`` must hold
    ``-(bias + beta @ weight)``, ``beta`` the centred LayerNorm's bias (None: not centred) and
    ``weight`` the float initializer the matmul quantized."""

    bias: str
    output: str
    weight: str | None
    beta: str | None


@dataclass(frozen=True)
class ColumnSums:
    """An initializer to fill when the weights are written, float32, shaped (2, columns): minus the
    column sums of the quantized ``weight`` times its per-column ``scale``, then ``bias`` (zeros
    when None)."""

    weight: str
    scale: str
    output: str
    bias: str | None


@dataclass
class RowQuantization:
    """What the writer of the initializers must still do for a graph quantized per row."""

    biases: list[SubtractedBias]
    column_sums: list[ColumnSums]


def quantize_activations_per_row(model: onnx.ModelProto, *, float_weights: dict[str, str]) -> RowQuantization:
    """Rewrite every ``DynamicQuantizeLinear`` of ``model`` (in place) as per-row quantization with
    the same three outputs: symmetric (LayerNorm outputs centred), or asymmetric for the input of
    a matmul that makes a graph output (the logits).

    Arguments:
        model: a graph as :mod:`._quantize` rewrote it.
        float_weights: quantized weight name -> the float initializer it is made from.

    Returns:
        the biases and column sums the caller must write with the initializers.
    """
    graph = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    initializers = {t.name for t in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    nodes: list[onnx.NodeProto] = []
    plan = RowQuantization(biases=[], column_sums=[])
    corrections: dict[str, list[onnx.NodeProto]] = {}  # a matmul's output -> what must follow it
    outputs = {o.name for o in graph.output}
    folded: set[str] = set()  # weight scales already divided by 127
    for node in graph.node:
        if node.op_type != "DynamicQuantizeLinear":
            nodes.append(node)
            nodes.extend(corrections.pop(node.output[0], []) if node.output else [])
            continue
        chains = _matmul_chains(node, consumers, initializers)
        if any(chain[-1].output[0] in outputs for chain in chains):  # the logits: asymmetric rows
            nodes.extend(_affine_per_row(node, axes_as_input=opset >= 18))
            graph.initializer.append(numpy_helper.from_array(np.array(0, np.uint8), node.output[2]))
            for chain in chains:
                plan.column_sums.append(_zero_point_correction(node, chain, producers, corrections))
            continue
        beta = _layer_norm_bias(node.input[0], producers, initializers)
        if beta and not all(len(chain) == 4 and chain[0].input[1] in float_weights for chain in chains):
            beta = None  # beta @ W needs each matmul's own bias to go into
        x = node.input[0]
        if beta:
            x = f"{node.name}_centred"
            nodes.append(helper.make_node("Sub", [node.input[0], beta], [x], x))
        plan.biases += [_subtract_bias(chain, beta, float_weights) for chain in chains if len(chain) == 4]
        nodes.extend(_per_row(node, x, axes_as_input=opset >= 18))
        _fold_levels(node, consumers, nodes, folded)
        graph.initializer.append(numpy_helper.from_array(np.array(128, np.uint8), node.output[2]))
    assert not corrections, "a quantized matmul's output was not found after it"
    if len(nodes) != len(graph.node):
        graph.initializer.extend(
            [
                numpy_helper.from_array(np.array(0.0, np.float32), _ZERO),
                numpy_helper.from_array(np.array(1 / 255, np.float32), _INVERSE_RANGE),
                numpy_helper.from_array(np.array(0, np.uint8), _UINT8_ZERO),
                numpy_helper.from_array(np.array(1 / 127, np.float32), _LEVELS),
                numpy_helper.from_array(np.array(np.finfo(np.float32).tiny, np.float32), _TINY),
                numpy_helper.from_array(np.array(1.0, np.float32), _ONE),
                numpy_helper.from_array(np.array(128, np.uint8), _MIDDLE),
                numpy_helper.from_array(np.array([-1], np.int64), _LAST_AXIS),
            ]
        )
    graph.ClearField("node")
    graph.node.extend(nodes)
    return plan


def _per_row(node: onnx.NodeProto, x: str, *, axes_as_input: bool) -> list[onnx.NodeProto]:
    """The nodes replacing one ``DynamicQuantizeLinear`` (quantizing ``x``): its quantized output
    computed per row, and as its "scale" output the row's largest magnitude — the 1/127 is applied
    by ``QuantizeLinear`` and folded into the weights' scales (:func:`_fold_levels`). An all-zero
    row divides 0 by 0, but its "scale" 0 makes its product 0 whatever the quantized values are.
    Its zero-point output becomes a constant (the caller adds it)."""
    quantized, scale, _ = node.output
    name = node.name or node.input[0] + "_QuantizeLinear"
    magnitude = helper.make_node("Abs", [x], [f"{name}_abs"], f"{name}_abs")
    if axes_as_input:  # opset 18 moved ReduceMax's axes from an attribute to an input
        row_max = helper.make_node("ReduceMax", [magnitude.output[0], _LAST_AXIS], [scale], keepdims=1)
    else:
        row_max = helper.make_node("ReduceMax", [magnitude.output[0]], [scale], axes=[-1], keepdims=1)
    row_max.name = f"{name}_row_max"
    unit = helper.make_node("Div", [x, scale], [f"{name}_unit"], f"{name}_unit")
    rounded = helper.make_node(
        "QuantizeLinear", [unit.output[0], _LEVELS, _MIDDLE], [quantized], f"{name}_uint8"
    )
    return [magnitude, row_max, unit, rounded]


def _fold_levels(
    quantize: onnx.NodeProto,
    consumers: dict[str, list[onnx.NodeProto]],
    nodes: list[onnx.NodeProto],
    folded: set[str],
) -> None:
    """Each ``Mul(activation scale, weight scale)`` reading this value's scale (now a row maximum)
    gets ``weight scale / 127`` instead: a product of constants that ONNX Runtime folds at load."""
    for product in consumers.get(quantize.output[1], []):
        weight_scale = next(name for name in product.input if name != quantize.output[1])
        per_level = f"{weight_scale}_per_level"
        if per_level not in folded:  # a weight shared by two matmuls is folded once
            folded.add(per_level)
            nodes.append(helper.make_node("Mul", [weight_scale, _LEVELS], [per_level], per_level))
        product.input[list(product.input).index(weight_scale)] = per_level


def _layer_norm_bias(value: str, producers: dict[str, onnx.NodeProto], initializers: set[str]) -> str | None:
    """The constant bias of the LayerNormalization ``value`` comes from, if it does."""
    node = producers.get(value)
    while node is not None and node.op_type in _PASS_THROUGH:
        node = producers.get(node.input[0])
    if node is None or node.op_type != "LayerNormalization" or len(node.input) < 3:
        return None
    return node.input[2] if node.input[2] in initializers else None


def _matmul_chains(
    quantize: onnx.NodeProto, consumers: dict[str, list[onnx.NodeProto]], initializers: set[str]
) -> list[list[onnx.NodeProto]]:
    """For each matmul reading this quantized value: MatMulInteger -> Cast -> Mul (scales), then
    the Add of its constant bias when there is one."""
    chains = []
    for matmul in consumers.get(quantize.output[0], []):
        chain = [matmul]
        for op in ("Cast", "Mul", "Add"):
            following = consumers.get(chain[-1].output[0], [])
            if len(following) != 1 or following[0].op_type != op:
                break
            chain.append(following[0])
        if matmul.op_type != "MatMulInteger" or len(chain) < 3:
            raise ValueError(f"{quantize.name!r}: a reader that is not a quantized matmul ({matmul.op_type})")
        if len(chain) == 4 and not any(name in initializers for name in chain[3].input):
            chain.pop()  # an Add of two computed values: not a bias
        chains.append(chain)
    return chains


def _subtract_bias(
    chain: list[onnx.NodeProto], beta: str | None, float_weights: dict[str, str]
) -> SubtractedBias:
    """Turn the chain's ``Add(y, bias)`` into ``Sub(y, -bias)``. Why: ONNX Runtime fuses
    MatMulInteger -> Cast -> Mul -> Add into one MatMulIntegerToFloat, and with a per-row scale the
    fused kernel gets the bias wrong (onnxruntime 1.32; tests/test_int8.py would show it); it does
    not fuse a Sub, and the scale without the bias it fuses correctly."""
    add = chain[3]
    bias = next(name for name in add.input if name != chain[2].output[0])
    negated = f"{bias}_negated_for_{add.name or add.output[0]}"
    add.op_type = "Sub"
    add.input[:] = [chain[2].output[0], negated]
    return SubtractedBias(bias=bias, output=negated, weight=float_weights.get(chain[0].input[1]), beta=beta)


def _affine_per_row(node: onnx.NodeProto, *, axes_as_input: bool) -> list[onnx.NodeProto]:
    """``DynamicQuantizeLinear``'s rule applied to each row: scale = (max - min) / 255 with the
    range widened to hold 0, zero point = round(-min / scale), q = saturate(round(x / scale) + zp).
    Also makes ``{name}_row_terms`` = (scale * zero point, 1): the row's part of the correction."""
    x = node.input[0]
    quantized, scale, _ = node.output
    name = node.name or x + "_QuantizeLinear"
    made: list[onnx.NodeProto] = []

    def step(op: str, inputs: list[str], suffix: str, **attributes: Any) -> str:
        made.append(helper.make_node(op, inputs, [f"{name}_{suffix}"], f"{name}_{suffix}", **attributes))
        return f"{name}_{suffix}"

    def reduce(op: str, suffix: str) -> str:
        if axes_as_input:
            return step(op, [x, _LAST_AXIS], suffix, keepdims=1)
        return step(op, [x], suffix, axes=[-1], keepdims=1)

    high = step("Max", [reduce("ReduceMax", "row_max"), _ZERO], "high")
    low = step("Min", [reduce("ReduceMin", "row_min"), _ZERO], "low")
    exact = step("Mul", [step("Sub", [high, low], "range"), _INVERSE_RANGE], "row_scale")
    made.append(helper.make_node("Max", [exact, _TINY], [scale], f"{name}_scale"))
    zero_point = step(
        "Round", [step("Neg", [step("Div", [low, scale], "low_scaled")], "zero_point_exact")], "zero_point"
    )
    shifted = step("Add", [step("Div", [x, scale], "scaled"), zero_point], "shifted")
    made.append(
        helper.make_node("QuantizeLinear", [shifted, _ONE, _UINT8_ZERO], [quantized], f"{name}_uint8")
    )
    offset = step("Mul", [scale, zero_point], "row_offset")
    step("Concat", [offset, step("Div", [scale, scale], "row_one")], "row_terms", axis=-1)
    return made


def _zero_point_correction(
    quantize: onnx.NodeProto,
    chain: list[onnx.NodeProto],
    producers: dict[str, onnx.NodeProto],
    corrections: dict[str, list[onnx.NodeProto]],
) -> ColumnSums:
    """Take the rows' zero points out of one matmul's output, and add its bias, in one step:
    ``y + (scale * zero point, 1) @ (-column sums * weight scale; bias)`` — a matmul with K = 2
    and an Add, which ONNX Runtime fuses into a single Gemm pass over the (rows, vocabulary)
    output. (The bias is not left to the matmul: see :func:`_subtract_bias`.)"""
    matmul, scaled = chain[0], chain[2]
    # Mul(cast, activation scale * weight scale): the product's other factor is the weight's scale
    product = producers[
        next(name for name in scaled.input if name in producers and name != chain[1].output[0])
    ]
    weight_scale = next(n for n in product.input if n != quantize.output[1])
    name = matmul.name or matmul.output[0]
    add = chain[3] if len(chain) == 4 else None
    bias = next(n for n in add.input if n != scaled.output[0]) if add is not None else None
    sums = ColumnSums(weight=matmul.input[1], scale=weight_scale, output=f"{name}_row_terms_table", bias=bias)
    row_terms = f"{quantize.name or quantize.input[0] + '_QuantizeLinear'}_row_terms"
    offsets = f"{name}_zero_points_and_bias"
    corrections[scaled.output[0]] = [helper.make_node("MatMul", [row_terms, sums.output], [offsets], offsets)]
    if add is not None:
        add.input[:] = [scaled.output[0], offsets]
    else:
        corrected = scaled.output[0]
        scaled.output[0] = corrected + "_uncorrected"
        add = helper.make_node("Add", [scaled.output[0], offsets], [corrected], f"{name}_corrected")
        corrections[scaled.output[0]] = [*corrections.pop(corrected), add]
    return sums
