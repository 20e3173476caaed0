"""Converters that turn trained models into liuyi bundles (need the ``[export]`` extra).

python -m decoding.export SRC OUT [--int8]      # a Hugging Face Marian checkpoint
python -m decoding.export.cn2en --source DIR OUT  # the bundled default zh->en model

``convert_checkpoint(checkpoint_dir, output_dir, ...)`` is what ``liuyi pull`` calls.
"""

from __future__ import annotations

from ._convert_stub import convert_checkpoint

__all__ = ["convert_checkpoint"]
