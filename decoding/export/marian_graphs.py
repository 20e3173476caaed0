"""Marian (opus-mt) as two ONNX-exportable graphs, written out by hand on the checkpoint's weights.

Why not export transformers' own forward? Its cache objects and mask helpers do not map onto a
*step* graph with the layout the greedy loop needs, and two things matter for speed:

* the **encoder graph also projects the encoder output into every decoder layer's cross-attention
  keys and values**, so decoder steps never recompute them (they are fixed for the whole sequence);
* the **decoder graph is one step for a batch of sequences**, each at its own position, writing its
  key/value cache in place and attending with ONNX Runtime's fused kernels, so sequences that started
  at different times are stepped together and nothing is copied per step.

The math follows ``transformers.models.marian.modeling_marian`` line for line (post-layer-norm
blocks, scaled embeddings, sinusoidal positions, ``final_logits_bias``); the parity tests hold it to
transformers' greedy ``generate()`` token for token.

Shapes: B batch, S source length, C cache capacity, D model width, H heads, K head width.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .attention_ops import cached_self_attention, cross_attention, padded_self_attention


class MarianEncoderGraph(nn.Module):
    """input_ids (B,S), attention_mask (B,S) -> cross_key_i, cross_value_i (B,H,S,K) per decoder layer."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.encoder: Any = model.model.encoder
        self.heads: int = model.config.decoder_attention_heads
        self.encoder_heads: int = model.config.encoder_attention_heads
        # Every decoder layer's cross-attention key and value projections, stacked: one (2L*D x D)
        # matmul instead of 2L small ones (the encoder's cost is what the first token waits for).
        projections = [
            p
            for layer in model.model.decoder.layers
            for p in (layer.encoder_attn.k_proj, layer.encoder_attn.v_proj)
        ]
        self.cross_weight = nn.Parameter(
            torch.cat([p.weight for p in projections]).detach(), requires_grad=False
        )
        self.cross_bias = nn.Parameter(torch.cat([p.bias for p in projections]).detach(), requires_grad=False)
        self.cross_count = len(projections)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        enc = self.encoder
        x = enc.embed_tokens(input_ids) * enc.embed_scale  # (B, S, D)
        x = x + enc.embed_positions.weight[: input_ids.shape[1]]
        for layer in enc.layers:
            attn = layer.self_attn
            h = padded_self_attention(
                attn.q_proj(x),
                attn.k_proj(x),
                attn.v_proj(x),
                attention_mask,
                self.encoder_heads,
                attn.scaling,
            )
            x = layer.self_attn_layer_norm(x + attn.out_proj(h))
            x = layer.final_layer_norm(x + layer.fc2(layer.activation_fn(layer.fc1(x))))
        batch, length, width = x.shape
        kv = nn.functional.linear(x, self.cross_weight, self.cross_bias)  # (B,S,2L*D): K/V, once per source
        kv = kv.view(batch, length, self.cross_count, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        return tuple(kv.unbind(0))  # 2L x (B,H,S,K)


class MarianDecoderStepGraph(nn.Module):
    """One greedy step for B sequences, with key/value caches written in place.

    Inputs: input_ids (B,1); position_ids (B,1): the index of the token fed, which is also where its
    key/value go in the cache; source_attention_mask (B,S); per layer cache_key_i, cache_value_i
    (B,H,C,K) with C >= position + 1 (a capacity the host grows); per layer cross_key_i,
    cross_value_i (B,H,S,K).
    Outputs: logits (B,V), top_ids (B,2), then per layer the updated caches (B,H,C,K).

    Cache entries past each row's position are never read, so the host may hand over a larger
    buffer than needed and leave stale values from earlier sequences in it. Both attentions are
    ONNX Runtime's fused kernels (see :mod:`decoding.export.attention_ops`).
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
        where = position_ids[:, 0]  # (B,)
        updated: list[torch.Tensor] = []
        for i, layer in enumerate(dec.layers):
            attn = layer.self_attn
            h, key_cache, value_cache = cached_self_attention(
                attn.q_proj(x),
                attn.k_proj(x),
                attn.v_proj(x),
                cache[2 * i],
                cache[2 * i + 1],
                where,
                self.heads,
                attn.scaling,
            )
            updated += [key_cache, value_cache]
            x = layer.self_attn_layer_norm(x + attn.out_proj(h))
            xattn = layer.encoder_attn
            h = cross_attention(
                xattn.q_proj(x),
                cross[2 * i],
                cross[2 * i + 1],
                source_attention_mask,
                self.heads,
                xattn.scaling,
            )
            x = layer.encoder_attn_layer_norm(x + xattn.out_proj(h))
            x = layer.final_layer_norm(x + layer.fc2(layer.activation_fn(layer.fc1(x))))
        logits = self.lm_head(x[:, 0]) + self.logits_bias  # (B,V)
        top_ids = torch.topk(logits, 2, dim=-1).indices  # (B,2), best first
        return (logits, top_ids, *updated)
