"""Marian (opus-mt) as two ONNX-exportable graphs, written out by hand on the checkpoint's weights.

Why not export transformers' own forward? Its cache objects and mask helpers do not map onto a
*step* graph with the layout the greedy loop needs, and two things matter for speed:

* the **encoder graph also projects the encoder output into every decoder layer's cross-attention
  keys and values**, so decoder steps never recompute them (they are fixed for the whole sequence);
* the **decoder graph is one step for a batch of sequences** whose caches may be left-padded
  (``self_attention_mask``) and whose sources may be right-padded (``source_attention_mask``), with
  a position per row, so sequences that started at different times can be stepped together.

The math follows ``transformers.models.marian.modeling_marian`` line for line (post-layer-norm
blocks, scaled embeddings, sinusoidal positions, ``final_logits_bias``); the parity tests hold it to
transformers' greedy ``generate()`` token for token.

Shapes: B batch, S source length, T cached target length, D model width, H heads, K head width.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

# Large negative instead of -inf: a fully padded row then softmaxes to uniform instead of NaN.
NEG = torch.finfo(torch.float32).min


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, L, D) -> (B, H, L, K)"""
    batch, length, width = x.shape
    return x.view(batch, length, heads, width // heads).transpose(1, 2)


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, L, K) -> (B, L, D)"""
    batch, heads, length, head_width = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * head_width)


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, scaling: float
) -> torch.Tensor:
    """softmax(q kᵀ · scaling + bias) v; q (B,H,Lq,K), k/v (B,H,Lk,K), bias broadcast to (B,H,Lq,Lk)."""
    scores = torch.matmul(q, k.transpose(2, 3)) * scaling + bias
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def _padding_bias(mask: torch.Tensor) -> torch.Tensor:
    """(B, L) int mask, 1 = attend -> (B, 1, 1, L) additive bias."""
    return (1.0 - mask[:, None, None, :].to(torch.float32)) * NEG


class MarianEncoderGraph(nn.Module):
    """input_ids (B,S), attention_mask (B,S) -> cross_key_i, cross_value_i (B,H,S,K) per decoder layer."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.encoder: Any = model.model.encoder
        self.decoder_layers: Any = model.model.decoder.layers
        self.heads: int = model.config.decoder_attention_heads
        self.encoder_heads: int = model.config.encoder_attention_heads

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        enc = self.encoder
        x = enc.embed_tokens(input_ids) * enc.embed_scale  # (B, S, D)
        x = x + enc.embed_positions.weight[: input_ids.shape[1]]
        bias = _padding_bias(attention_mask)
        for layer in enc.layers:
            attn = layer.self_attn
            q = _split_heads(attn.q_proj(x), self.encoder_heads)
            k = _split_heads(attn.k_proj(x), self.encoder_heads)
            v = _split_heads(attn.v_proj(x), self.encoder_heads)
            x = layer.self_attn_layer_norm(
                x + attn.out_proj(_merge_heads(_attend(q, k, v, bias, attn.scaling)))
            )
            x = layer.final_layer_norm(x + layer.fc2(layer.activation_fn(layer.fc1(x))))
        outputs: list[torch.Tensor] = []
        for layer in self.decoder_layers:  # cross-attention K/V, computed once per source
            outputs.append(_split_heads(layer.encoder_attn.k_proj(x), self.heads))
            outputs.append(_split_heads(layer.encoder_attn.v_proj(x), self.heads))
        return tuple(outputs)


class MarianDecoderStepGraph(nn.Module):
    """One greedy step for B sequences, with key/value caches written in place.

    Inputs: input_ids (B,1); position_ids (B,1): the index of the token fed, which is also where its
    key/value go in the cache; source_attention_mask (B,S); per layer cache_key_i, cache_value_i
    (B,H,C,K) with C >= position + 1 (a capacity the host grows); per layer cross_key_i,
    cross_value_i (B,H,S,K).
    Outputs: logits (B,V), top_ids (B,2), then per layer the updated caches (B,H,C,K).

    Cache entries past each row's position are never read (masked), so the host may hand over a
    larger buffer than needed and may leave stale values from earlier sequences in it.
    """

    def __init__(self, model: Any, suppress_ids: list[int]) -> None:
        super().__init__()
        self.decoder: Any = model.model.decoder
        self.lm_head: Any = model.lm_head
        self.heads: int = model.config.decoder_attention_heads
        self.layers: int = len(self.decoder.layers)
        bias = model.final_logits_bias.detach().clone()[0]  # (V,)
        bias[suppress_ids] = float("-inf")  # e.g. <pad>: transformers bans it via bad_words_ids
        self.register_buffer("logits_bias", bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        source_attention_mask: torch.Tensor,
        *caches: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        dec = self.decoder
        cache, cross = caches[: 2 * self.layers], caches[2 * self.layers :]
        x = (
            dec.embed_tokens(input_ids) * dec.embed_scale + dec.embed_positions.weight[position_ids]
        )  # (B,1,D)
        capacity = cache[0].shape[2]
        filled = torch.arange(capacity, device=input_ids.device)[None, :] <= position_ids  # (B,C)
        self_bias = ((~filled).to(torch.float32) * NEG)[:, None, None, :]  # (B,1,1,C)
        source_bias = _padding_bias(source_attention_mask)  # (B,1,1,S)
        where = position_ids[:, 0]  # (B,)
        updated: list[torch.Tensor] = []
        for i, layer in enumerate(dec.layers):
            attn = layer.self_attn
            q = _split_heads(attn.q_proj(x), self.heads)  # (B,H,1,K)
            k = cache_write(cache[2 * i], _split_heads(attn.k_proj(x), self.heads), where)  # (B,H,C,K)
            v = cache_write(cache[2 * i + 1], _split_heads(attn.v_proj(x), self.heads), where)
            updated += [k, v]
            x = layer.self_attn_layer_norm(
                x + attn.out_proj(_merge_heads(_attend(q, k, v, self_bias, attn.scaling)))
            )
            xattn = layer.encoder_attn
            q = _split_heads(xattn.q_proj(x), self.heads)
            h = _attend(q, cross[2 * i], cross[2 * i + 1], source_bias, xattn.scaling)
            x = layer.encoder_attn_layer_norm(x + xattn.out_proj(_merge_heads(h)))
            x = layer.final_layer_norm(x + layer.fc2(layer.activation_fn(layer.fc1(x))))
        logits = self.lm_head(x[:, 0]) + self.logits_bias  # (B,V)
        top_ids = torch.topk(logits, 2, dim=-1).indices  # (B,2), best first
        return (logits, top_ids, *updated)


# --- writing one step into a cache, in place --------------------------------------------------------
# PyTorch has no in-place "write row b at index[b]" that exports to ONNX as such (index_put becomes
# a ScatterND that copies the whole cache). So the write is a custom op, exported as ONNX's
# TensorScatter (opset 24): ONNX Runtime updates the cache buffer in place when the caller binds the
# same buffer as input and output — per step, only the new entries are written, nothing is copied.


@torch.library.custom_op("liuyi::cache_write", mutates_args=())
def cache_write(cache: torch.Tensor, update: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """cache (B,H,C,K), update (B,H,1,K), index (B,): cache with update[b] written at index[b]."""
    out = cache.clone()
    out[torch.arange(cache.shape[0]), :, index] = update[:, :, 0]
    return out


@cache_write.register_fake
def _cache_write_shape(cache: torch.Tensor, update: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(cache)


def cache_write_onnx(cache: Any, update: Any, index: Any) -> Any:
    """The ONNX translation of :func:`cache_write` (used by torch.onnx.export)."""
    from onnxscript.onnx_opset import opset24

    return opset24.TensorScatter(cache, update, index, axis=2)


ONNX_TRANSLATIONS: dict[Callable[..., Any], Callable[..., Any]] = {
    torch.ops.liuyi.cache_write.default: cache_write_onnx
}
