"""The encoder and one-step decoder graphs of an encoder-decoder transformer, written as ONNX directly.

The converters read a checkpoint's weights (numpy, from safetensors) into :class:`Transformer` and
get back the two graphs a bundle runs — no torch involved. Marian (post-norm) and M2M100/NLLB
(pre-norm with final layer norms) differ only in the fields of :class:`Transformer`.

* encoder: input_ids (B,S), attention_mask (B,S) -> cross_key_i, cross_value_i (B,H,S,K) for every
  decoder layer, from one stacked (2L*D x D) projection (the encoder's cost is what the first token
  waits for; one matmul instead of 2L small ones).
* decoder step: input_ids (B,1), position_ids (B,1) = the index of the token fed = where its
  key/value go in the cache, source_attention_mask (B,S), per layer cache_key_i/cache_value_i
  (B,H,C,K) and cross_key_i/cross_value_i (B,H,S,K) -> logits (B,V), top_ids (B,2) best first,
  updated_key_i/updated_value_i: the caches, written in place when the host binds each cache as
  both input and output.

Self-attention projects query, key and value with one matmul (weights stacked): the int8 graph
then quantizes the layer's input once and runs one wide integer matmul instead of three narrow ones.

Attention uses ONNX Runtime's fused CPU kernels (``com.microsoft`` domain): ``GroupQueryAttention``
appends the step's key/value to the cache at each row's ``seqlens_k`` and attends to that row's
filled positions only, so rows of different lengths share one buffer; ``MultiHeadAttention`` with a
key padding mask does cross-attention and the encoder's self-attention.

Shapes: B batch, S source length, C cache capacity, D model width, H heads, K head width, V vocab.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, BinaryIO

import numpy as np
import onnx

from ._onnx import FLOAT, INT32, INT64, MICROSOFT, GraphBuilder


@dataclass(frozen=True)
class Linear:
    weight: np.ndarray  # (out, in), as PyTorch stores it
    bias: np.ndarray | None


@dataclass(frozen=True)
class Norm:
    scale: np.ndarray
    bias: np.ndarray
    epsilon: float = 1e-5


@dataclass(frozen=True)
class Attention:
    q: Linear
    k: Linear
    v: Linear
    out: Linear


@dataclass(frozen=True)
class Layer:
    self_attn: Attention
    self_norm: Norm
    fc1: Linear
    fc2: Linear
    final_norm: Norm
    cross_attn: Attention | None = None  # decoder layers only
    cross_norm: Norm | None = None


@dataclass(frozen=True, kw_only=True)
class Transformer:
    pre_norm: bool  # layer norm before each block (M2M100/NLLB) or after the residual add (Marian)
    activation: str  # "swish", "relu", "gelu"
    encoder_heads: int
    decoder_heads: int
    embed_scale: float  # token embeddings are multiplied by this (sqrt(D) when scale_embedding)
    encoder_embed: np.ndarray  # (V_source, D)
    decoder_embed: np.ndarray  # (V, D)
    lm_head: np.ndarray  # (V, D)
    logits_bias: np.ndarray  # (V,), -inf on ids generation must never produce
    encoder_positions: np.ndarray  # (P, D): row i is position i of the source (any offset applied)
    decoder_positions: np.ndarray  # (P, D): row i is the target position fed at cache slot i
    encoder_layers: tuple[Layer, ...]
    decoder_layers: tuple[Layer, ...]
    encoder_norm: Norm | None = None  # final layer norms of pre-norm models
    decoder_norm: Norm | None = None

    @property
    def nbytes(self) -> int:
        """Bytes of all weights (what the graphs will hold, vocabulary matrices once per use)."""

        def size(value: Any) -> int:
            if isinstance(value, np.ndarray):
                return int(value.nbytes)
            if isinstance(value, tuple):
                return sum(size(item) for item in value)
            if is_dataclass(value):
                return sum(size(getattr(value, f.name)) for f in fields(value))
            return 0

        return size(self)

    @property
    def width(self) -> int:
        return int(self.decoder_embed.shape[1])

    def check_fused_kernels(self) -> None:
        """Raises ValueError when ONNX Runtime's fused attention kernels cannot run this shape."""
        for heads in (self.encoder_heads, self.decoder_heads):
            if self.width % heads or (self.width // heads) % 8:
                raise ValueError(
                    f"the fused attention kernels need a head width that is a multiple of 8; this model has "
                    f"d_model {self.width} over {heads} heads"
                )


def graph_names(layers: int) -> tuple[list[str], list[str], list[str]]:
    """(encoder outputs, decoder inputs, decoder outputs) for a decoder with ``layers`` layers."""
    cross = [f"cross_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    cache = [f"cache_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    updated = [f"updated_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    return (
        cross,
        ["input_ids", "position_ids", "source_attention_mask", *cache, *cross],
        [
            "logits",
            "top_ids",
            *updated,
        ],
    )


def build_encoder(
    model: Transformer, *, data: BinaryIO | None = None, data_name: str = ""
) -> onnx.ModelProto:
    """The encoder graph; weights streamed into ``data`` (named ``data_name`` beside the graph) if given."""
    g = GraphBuilder("encoder", data=data, data_name=data_name)
    ids = g.input("input_ids", INT64, ["batch", "source"])
    mask = g.input("attention_mask", INT64, ["batch", "source"])
    length = g.node("Slice", [g.node("Shape", [ids]), g.const([1]), g.const([2])])  # (1,) = S
    positions = g.node(
        "Slice", [g.weight("encoder.positions", model.encoder_positions), g.const([0]), length]
    )
    x = g.add(_embed(g, "encoder", model.encoder_embed, ids, model.embed_scale), positions)  # (B,S,D)
    key_mask = g.node("Cast", [mask], to=INT32)
    for i, layer in enumerate(model.encoder_layers):
        name = f"encoder.layers.{i}"

        def self_attention(h: str, name: str = name, layer: Layer = layer) -> str:
            a = layer.self_attn
            qkv = g.linear(h, f"{name}.self_attn.qkv", *_stacked([a.q, a.k, a.v]))
            q, k, v = g.node("Split", [qkv, g.const([model.width] * 3)], outputs=3, axis=-1)
            out = g.node(
                "MultiHeadAttention",
                [q, k, v, "", key_mask],
                domain=MICROSOFT,
                num_heads=model.encoder_heads,
                scale=_scale(model.width, model.encoder_heads),
            )
            return g.linear(out, f"{name}.self_attn.out", *_wb(a.out))

        x = _block(g, model, x, f"{name}.self_attn_norm", layer.self_norm, self_attention)
        x = _block(g, model, x, f"{name}.final_norm", layer.final_norm, _ffn(g, model, layer, name))
    if model.encoder_norm is not None:
        x = _norm(g, "encoder.norm", model.encoder_norm, x)

    # every decoder layer's cross-attention key and value, stacked: (B,S,2L*D) -> 2L x (B,H,S,K)
    layers = model.decoder_layers
    stacked = [p for layer in layers for p in (_cross(layer).k, _cross(layer).v)]
    kv = g.linear(
        x,
        "decoder.cross_kv",
        np.concatenate([p.weight for p in stacked]),
        np.concatenate([_bias(p) for p in stacked]),
    )
    heads = model.decoder_heads
    kv = g.node("Reshape", [kv, g.const([0, 0, len(stacked), heads, model.width // heads])])
    kv = g.node("Transpose", [kv], perm=[2, 0, 3, 1, 4])  # (2L,B,H,S,K)
    names, _, _ = graph_names(len(layers))
    parts = g.node("Split", [kv, g.const([1] * len(stacked))], outputs=len(stacked), axis=0)
    for part, out_name in zip(parts if len(stacked) > 1 else [parts], names, strict=True):
        g.node("Squeeze", [part, g.const([0])], outputs=[out_name])
        g.output(out_name, FLOAT, ["batch", heads, "source", model.width // heads])
    return g.model()


def build_decoder(
    model: Transformer, *, data: BinaryIO | None = None, data_name: str = ""
) -> onnx.ModelProto:
    """The one-step decoder graph; weights streamed into ``data`` if given (see :func:`build_encoder`)."""
    g = GraphBuilder("decoder_step", data=data, data_name=data_name)
    heads, width = model.decoder_heads, model.width
    head_width = width // heads
    ids = g.input("input_ids", INT64, ["batch", 1])
    position_ids = g.input("position_ids", INT64, ["batch", 1])
    source_mask = g.input("source_attention_mask", INT64, ["batch", "source"])
    layers = len(model.decoder_layers)
    cross_names, inputs, outputs = graph_names(layers)
    for name in inputs[3 : 3 + 2 * layers]:
        g.input(name, FLOAT, ["batch", heads, "capacity", head_width])
    for name in cross_names:
        g.input(name, FLOAT, ["batch", heads, "source", head_width])

    positions = g.node("Gather", [g.weight("decoder.positions", model.decoder_positions), position_ids])
    x = g.add(_embed(g, "decoder", model.decoder_embed, ids, model.embed_scale), positions)  # (B,1,D)
    where = g.node("Squeeze", [position_ids, g.const([1])])  # (B,)
    seqlens = g.node("Cast", [where], to=INT32)  # GQA's seqlens_k: tokens before this one = its slot
    total = g.node("Cast", [g.add(g.node("ReduceMax", [where], keepdims=1), g.const([1]))], to=INT32)
    key_mask = g.node("Cast", [source_mask], to=INT32)
    scale = _scale(width, heads)
    for i, layer in enumerate(model.decoder_layers):
        name = f"decoder.layers.{i}"

        def self_attention(h: str, name: str = name, layer: Layer = layer, i: int = i) -> str:
            a = layer.self_attn
            # packed query|key|value (GQA splits it): one matmul instead of three
            qkv = g.linear(h, f"{name}.self_attn.qkv", *_stacked([a.q, a.k, a.v]))
            out = g.node(
                "GroupQueryAttention",
                [qkv, "", "", f"cache_key_{i}", f"cache_value_{i}", seqlens, total],
                outputs=[g._fresh("gqa"), f"updated_key_{i}", f"updated_value_{i}"],
                domain=MICROSOFT,
                num_heads=heads,
                kv_num_heads=heads,
                scale=scale,
            )[0]
            return g.linear(out, f"{name}.self_attn.out", *_wb(a.out))

        def cross_attention(h: str, name: str = name, layer: Layer = layer, i: int = i) -> str:
            a = _cross(layer)
            q = g.linear(h, f"{name}.cross_attn.q", *_wb(a.q))
            out = g.node(
                "MultiHeadAttention",
                [q, f"cross_key_{i}", f"cross_value_{i}", "", key_mask],
                domain=MICROSOFT,
                num_heads=heads,
                scale=scale,
            )
            return g.linear(out, f"{name}.cross_attn.out", *_wb(a.out))

        assert layer.cross_norm is not None
        x = _block(g, model, x, f"{name}.self_attn_norm", layer.self_norm, self_attention)
        x = _block(g, model, x, f"{name}.cross_attn_norm", layer.cross_norm, cross_attention)
        x = _block(g, model, x, f"{name}.final_norm", layer.final_norm, _ffn(g, model, layer, name))
    if model.decoder_norm is not None:
        x = _norm(g, "decoder.norm", model.decoder_norm, x)

    last = g.node("Squeeze", [x, g.const([1])])  # (B,D)
    logits = g.node(
        "Add",
        [
            g.node(
                "MatMul", [last, g.weight("lm_head.weight_t", model.lm_head.T.astype(np.float32, copy=False))]
            ),
            g.weight("logits_bias", model.logits_bias.astype(np.float32)),
        ],
        outputs=["logits"],
    )
    g.node("TopK", [logits, g.const([2])], outputs=[g._fresh("top_values"), "top_ids"], axis=-1)
    vocab = int(model.lm_head.shape[0])
    g.output("logits", FLOAT, ["batch", vocab])
    g.output("top_ids", INT64, ["batch", 2])
    for name in outputs[2:]:
        g.output(name, FLOAT, ["batch", heads, "capacity", head_width])
    return g.model()


def _embed(g: GraphBuilder, name: str, table: np.ndarray, ids: str, scale: float) -> str:
    x = g.node("Gather", [g.weight(f"{name}.embed_tokens", table.astype(np.float32, copy=False)), ids])
    return x if scale == 1.0 else g.mul(x, g.const(scale, np.float32))


def _block(
    g: GraphBuilder, model: Transformer, x: str, norm_name: str, norm: Norm, body: Callable[[str], str]
) -> str:
    """A residual block: pre-norm ``x + body(norm(x))`` or post-norm ``norm(x + body(x))``."""
    if model.pre_norm:
        return g.add(x, body(_norm(g, norm_name, norm, x)))
    return _norm(g, norm_name, norm, g.add(x, body(x)))


def _ffn(g: GraphBuilder, model: Transformer, layer: Layer, name: str) -> Callable[[str], str]:
    def ffn(h: str) -> str:
        hidden = g.activation(g.linear(h, f"{name}.fc1", *_wb(layer.fc1)), model.activation)
        return g.linear(hidden, f"{name}.fc2", *_wb(layer.fc2))

    return ffn


def _norm(g: GraphBuilder, name: str, norm: Norm, x: str) -> str:
    return g.layer_norm(x, name, norm.scale.astype(np.float32), norm.bias.astype(np.float32), norm.epsilon)


def _wb(linear: Linear) -> tuple[np.ndarray, np.ndarray | None]:
    return linear.weight, linear.bias


def _stacked(parts: list[Linear]) -> tuple[np.ndarray, np.ndarray | None]:
    """Projections of the same input as one (weights stacked on the output axis). A step then quantizes
    its input and enters the integer matmul once, with one wide matrix that splits evenly between
    threads. Exact: int8 weights are scaled per output channel, so each keeps its own scale."""
    weight = np.concatenate([p.weight for p in parts])
    if all(p.bias is None for p in parts):
        return weight, None
    return weight, np.concatenate([_bias(p) for p in parts])


def _bias(linear: Linear) -> np.ndarray:
    return linear.bias if linear.bias is not None else np.zeros(linear.weight.shape[0], dtype=np.float32)


def _cross(layer: Layer) -> Attention:
    assert layer.cross_attn is not None, "decoder layers have cross-attention"
    return layer.cross_attn


def _scale(width: int, heads: int) -> float:
    return float((width // heads) ** -0.5)
