"""Decoder attention as ONNX Runtime's fused CPU kernels, written as PyTorch custom ops.

A decoder step attends twice per layer. Written with plain tensor ops that is ~20 ONNX nodes per
layer (reshapes, transposes, two matmuls, a mask, a softmax, a cache write), each with its own
dispatch cost; at batch 1 those costs are a large share of a 2 ms step. ONNX Runtime has fused
kernels for exactly these two cases (``com.microsoft`` domain, CPU implementations):

* ``GroupQueryAttention`` for **self-attention over the key/value cache**: it appends the step's
  key/value to a cache buffer *in place* (when the caller binds the same buffer as input and output)
  at each row's own length (``seqlens_k``), and attends to that row's filled positions only — so rows
  of different lengths share one buffer and the unused capacity is never read.
* ``MultiHeadAttention`` for **cross-attention** to the precomputed encoder keys/values, with a key
  padding mask for right-padded sources — and for the encoder's own self-attention.

Each op below has a PyTorch implementation (the reference the exporter traces and checks against)
and an ONNX translation (what the exported graph contains). The ONNX schemas of the two contrib
ops are registered with ``onnx.defs`` so the exporter can emit them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# Large negative instead of -inf: a fully masked row then softmaxes to uniform instead of NaN.
NEG = torch.finfo(torch.float32).min


@torch.library.custom_op("liuyi::cached_self_attention", mutates_args=())
def cached_self_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    position: torch.Tensor,
    heads: int,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """query/key/value (B,1,D) of this step; caches (B,H,C,K); position (B,) where this step goes.

    Returns the attention output (B,1,D) and the caches with this step written at ``position``.
    """
    batch, _, width = query.shape
    head_width = width // heads
    rows = torch.arange(batch)
    key_cache, value_cache = key_cache.clone(), value_cache.clone()
    key_cache[rows, :, position] = key.view(batch, heads, head_width)
    value_cache[rows, :, position] = value.view(batch, heads, head_width)
    q = query.view(batch, 1, heads, head_width).transpose(1, 2)  # (B,H,1,K)
    scores = torch.matmul(q, key_cache.transpose(2, 3)) * scale  # (B,H,1,C)
    filled = torch.arange(key_cache.shape[2])[None, :] <= position[:, None]  # (B,C)
    scores = scores + (~filled).to(scores.dtype)[:, None, None, :] * NEG
    out = torch.matmul(torch.softmax(scores, dim=-1), value_cache)  # (B,H,1,K)
    return out.transpose(1, 2).reshape(batch, 1, width), key_cache, value_cache


@cached_self_attention.register_fake
def _cached_self_attention_shape(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    position: torch.Tensor,
    heads: int,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.empty_like(query), torch.empty_like(key_cache), torch.empty_like(value_cache)


@torch.library.custom_op("liuyi::cross_attention", mutates_args=())
def cross_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_mask: torch.Tensor,
    heads: int,
    scale: float,
) -> torch.Tensor:
    """query (B,1,D); key/value (B,H,S,K), already projected; key_mask (B,S) 1 = real token."""
    batch, _, width = query.shape
    q = query.view(batch, 1, heads, width // heads).transpose(1, 2)
    scores = torch.matmul(q, key.transpose(2, 3)) * scale
    scores = scores + (1.0 - key_mask[:, None, None, :].to(scores.dtype)) * NEG
    return torch.matmul(torch.softmax(scores, dim=-1), value).transpose(1, 2).reshape(batch, 1, width)


@cross_attention.register_fake
def _cross_attention_shape(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_mask: torch.Tensor,
    heads: int,
    scale: float,
) -> torch.Tensor:
    return torch.empty_like(query)


@torch.library.custom_op("liuyi::padded_self_attention", mutates_args=())
def padded_self_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_mask: torch.Tensor,
    heads: int,
    scale: float,
) -> torch.Tensor:
    """The encoder's self-attention: query/key/value (B,S,D) projected, key_mask (B,S) 1 = real token."""
    batch, length, width = query.shape

    def split(x: torch.Tensor) -> torch.Tensor:
        return x.view(batch, length, heads, width // heads).transpose(1, 2)

    scores = torch.matmul(split(query), split(key).transpose(2, 3)) * scale
    scores = scores + (1.0 - key_mask[:, None, None, :].to(scores.dtype)) * NEG
    out = torch.matmul(torch.softmax(scores, dim=-1), split(value))
    return out.transpose(1, 2).reshape(batch, length, width)


@padded_self_attention.register_fake
def _padded_self_attention_shape(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_mask: torch.Tensor,
    heads: int,
    scale: float,
) -> torch.Tensor:
    return torch.empty_like(query)


def _register_contrib_schemas() -> None:
    """Teach onnx (and so the exporter) the signatures of the two ONNX Runtime contrib ops we emit."""
    import onnx
    from onnx.defs import OpSchema

    param, optional = OpSchema.FormalParameter, OpSchema.FormalParameterOption.Optional
    floats, int32s = ("T", ["tensor(float)"], ""), ("M", ["tensor(int32)"], "")

    def attribute(name: str, kind: Any) -> Any:
        return OpSchema.Attribute(name, kind, name, required=False)

    schemas = [
        OpSchema(
            "GroupQueryAttention",
            "com.microsoft",
            1,
            doc="ONNX Runtime contrib op (subset used by liuyi)",
            inputs=[
                param("query", "T"),
                # optional as in ONNX Runtime: the torch-free exporter packs q|k|v into ``query``
                param("key", "T", param_option=optional),
                param("value", "T", param_option=optional),
                param("past_key", "T"),
                param("past_value", "T"),
                param("seqlens_k", "M"),
                param("total_sequence_length", "M"),
            ],
            outputs=[param("output", "T"), param("present_key", "T"), param("present_value", "T")],
            type_constraints=[floats, int32s],
            attributes=[
                attribute("num_heads", OpSchema.AttrType.INT),
                attribute("kv_num_heads", OpSchema.AttrType.INT),
                attribute("scale", OpSchema.AttrType.FLOAT),
            ],
        ),
        OpSchema(
            "MultiHeadAttention",
            "com.microsoft",
            1,
            doc="ONNX Runtime contrib op (subset used by liuyi)",
            inputs=[
                param("query", "T"),
                param("key", "T"),
                param("value", "T"),
                param("bias", "T", param_option=optional),
                param("key_padding_mask", "M", param_option=optional),
            ],
            outputs=[param("output", "T")],
            type_constraints=[floats, int32s],
            attributes=[
                attribute("num_heads", OpSchema.AttrType.INT),
                attribute("scale", OpSchema.AttrType.FLOAT),
            ],
        ),
    ]
    for schema in schemas:
        try:
            onnx.defs.get_schema(schema.name, 1, schema.domain)
        except onnx.defs.SchemaError:
            onnx.defs.register_schema(schema)


def onnx_translations() -> dict[Callable[..., Any], Callable[..., Any]]:
    """``custom_translation_table`` for torch.onnx.export: our custom ops -> the contrib kernels."""
    import onnxscript
    from onnxscript.onnx_opset import opset18 as op

    _register_contrib_schemas()
    microsoft = onnxscript.values.Opset("com.microsoft", 1)
    int32 = onnxscript.INT32.dtype

    def self_attention_onnx(
        query: Any,
        key: Any,
        value: Any,
        key_cache: Any,
        value_cache: Any,
        position: Any,
        heads: int,
        scale: float,
    ) -> Any:
        lengths = op.Cast(position, to=int32)  # GQA's seqlens_k: tokens before this one = where it goes
        longest = op.Cast(op.Add(op.ReduceMax(position, keepdims=1), op.Constant(value_ints=[1])), to=int32)
        return microsoft.GroupQueryAttention(
            query,
            key,
            value,
            key_cache,
            value_cache,
            lengths,
            longest,
            num_heads=heads,
            kv_num_heads=heads,
            scale=scale,
        )

    def cross_attention_onnx(
        query: Any, key: Any, value: Any, key_mask: Any, heads: int, scale: float
    ) -> Any:
        return microsoft.MultiHeadAttention(
            query, key, value, None, op.Cast(key_mask, to=int32), num_heads=heads, scale=scale
        )

    return {
        torch.ops.liuyi.cached_self_attention.default: self_attention_onnx,
        torch.ops.liuyi.cross_attention.default: cross_attention_onnx,
        torch.ops.liuyi.padded_self_attention.default: cross_attention_onnx,
    }
