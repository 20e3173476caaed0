"""Hugging Face's BART-style weight names (Marian, M2M100/NLLB share them) -> :mod:`transformer` pieces."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .transformer import Attention, Layer, Linear, Norm


class Weights:
    """A checkpoint's tensors by name, with the layer layout Marian and M2M100 have in common."""

    def __init__(self, tensors: dict[str, np.ndarray], source: Path) -> None:
        self.tensors = tensors
        self.source = source

    def tensor(self, *names: str) -> np.ndarray:
        """The first of ``names`` present (tied weights are saved under one of their names).

        Raises:
            ValueError: none is present.
        """
        for name in names:
            if name in self.tensors:
                return self.tensors[name]
        raise ValueError(f"{self.source}: the weights lack {names[0]}")

    def linear(self, prefix: str) -> Linear:
        return Linear(self.tensor(f"{prefix}.weight"), self.tensors.get(f"{prefix}.bias"))

    def norm(self, prefix: str) -> Norm:
        return Norm(self.tensor(f"{prefix}.weight"), self.tensor(f"{prefix}.bias"))

    def attention(self, prefix: str) -> Attention:
        return Attention(*(self.linear(f"{prefix}.{p}_proj") for p in ("q", "k", "v", "out")))

    def layers(self, prefix: str, count: int, *, decoder: bool) -> tuple[Layer, ...]:
        """``{prefix}.layers.{i}`` for i < count: self-attention, (cross-attention,) feed-forward."""
        return tuple(
            Layer(
                self_attn=self.attention(f"{prefix}.layers.{i}.self_attn"),
                self_norm=self.norm(f"{prefix}.layers.{i}.self_attn_layer_norm"),
                fc1=self.linear(f"{prefix}.layers.{i}.fc1"),
                fc2=self.linear(f"{prefix}.layers.{i}.fc2"),
                final_norm=self.norm(f"{prefix}.layers.{i}.final_layer_norm"),
                cross_attn=self.attention(f"{prefix}.layers.{i}.encoder_attn") if decoder else None,
                cross_norm=self.norm(f"{prefix}.layers.{i}.encoder_attn_layer_norm") if decoder else None,
            )
            for i in range(count)
        )
