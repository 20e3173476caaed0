"""Converters that turn trained checkpoints into liuyi bundles, without torch.

python -m decoding.export SRC OUT [--int8]             # a Hugging Face checkpoint (Marian, M2M100/NLLB)
python -m decoding.export.marian_torch SRC OUT         # Marian without safetensors (needs [export])
python -m decoding.export.cn2en SRC OUT                # the bundled default zh->en model (needs [export])

:func:`convert_checkpoint` reads ``config.json``'s ``model_type`` and hands the checkpoint to its
family's ``convert(source, output_dir, *, force, options)``; it is what ``liuyi pull`` calls.
Every converter (``cn2en`` and ``marian_torch`` too) takes ``(source, output_dir, *, force=False)``.
"""

from __future__ import annotations

from ._checkpoint import ConvertOptions
from ._dispatch import FAMILIES, convert_checkpoint

__all__ = ["FAMILIES", "ConvertOptions", "convert_checkpoint"]
