"""Export a Marian checkpoint with torch: for checkpoints that ship no ``model.safetensors``.

The torch-free converter (:mod:`decoding.export.marian`) reads only safetensors; older opus-mt
uploads have just ``pytorch_model.bin``. This exporter loads such a checkpoint with transformers,
exports the hand-written graphs of :mod:`decoding.export.marian_graphs` with ``torch.onnx.export``
(the same inputs, outputs, fused kernels and in-place caches as the torch-free graphs), checks them
against the PyTorch modules on a sample batch, and writes the bundle exactly as the torch-free
converter does. Needs the ``[export]`` extra (torch, transformers); the bundle it writes needs none.

    python -m decoding.export.marian_torch CHECKPOINT_DIR OUT [--int8]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .._languages import LANGUAGES
from ._checkpoint import ConvertOptions, read_checkpoint
from ._common import prepare_output_dir, run_for_cli, session_for_check
from ._seq2seq import quantize_graphs
from .marian import finish_bundle, plan_bundle, suppressed_ids
from .transformer import graph_names

OPSET = 18


def convert(
    source: Path, output_dir: Path, *, force: bool = False, options: ConvertOptions | None = None
) -> Path:
    """Export the Marian checkpoint directory ``source`` to a bundle in ``output_dir``, with torch.

    Arguments, Returns, Raises: as :func:`decoding.export.marian.convert` (which needs safetensors).
    """
    import torch
    from transformers import MarianMTModel

    options = options or ConvertOptions()
    checkpoint = read_checkpoint(Path(source))
    plan = plan_bundle(checkpoint, options, output_dir=Path(output_dir), force=force)
    model = MarianMTModel.from_pretrained(str(source)).eval().float()
    if (model.config.d_model // model.config.decoder_attention_heads) % 8:
        raise ValueError("the fused attention kernels need a head width that is a multiple of 8")
    output_dir = prepare_output_dir(output_dir, force=force)
    suppress = suppressed_ids(checkpoint)
    encoder_names, decoder_in, decoder_out = graph_names(model.config.decoder_layers)
    with torch.no_grad():
        _export_encoder(model, output_dir / "encoder.onnx", encoder_names)
        _export_decoder(model, suppress, output_dir / "decoder.onnx", decoder_in, decoder_out)
        _check_against_torch(model, suppress, output_dir, encoder_names, decoder_in, decoder_out)
    weight_files = quantize_graphs(output_dir) if options.int8 else None  # float32: weights inline
    finish_bundle(checkpoint, plan, output_dir, options, weight_files=weight_files)
    return output_dir


def _export_encoder(model: Any, path: Path, outputs: list[str]) -> None:
    import torch
    from torch.export import Dim

    from .marian_graphs import MarianEncoderGraph

    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 0], [5, 6, 7, 0, 1, 1, 1]], dtype=torch.long)
    mask = torch.tensor([[1] * 7, [1, 1, 1, 1, 0, 0, 0]], dtype=torch.long)
    batch, source = Dim("batch"), Dim("source")
    _onnx_export(
        MarianEncoderGraph(model).eval(),
        (ids, mask),
        path,
        ["input_ids", "attention_mask"],
        outputs,
        ({0: batch, 1: source}, {0: batch, 1: source}),
    )


def _export_decoder(
    model: Any, suppress: list[int], path: Path, inputs: list[str], outputs: list[str]
) -> None:
    import torch
    from torch.export import Dim

    from .marian_graphs import MarianDecoderStepGraph

    feeds = _sample_decoder_feeds(model, batch=2, capacity=6, source=5)
    batch, capacity, source = Dim("batch"), Dim("capacity"), Dim("source")
    layers = model.config.decoder_layers
    caches = tuple([{0: batch, 2: capacity}] * (2 * layers) + [{0: batch, 2: source}] * (2 * layers))
    shapes = ({0: batch}, {0: batch}, {0: batch, 1: source}, caches)
    args = tuple(torch.from_numpy(feeds[name]) for name in inputs)
    _onnx_export(MarianDecoderStepGraph(model, suppress).eval(), args, path, inputs, outputs, shapes)


def _onnx_export(
    module: Any,
    args: tuple[Any, ...],
    path: Path,
    inputs: list[str],
    outputs: list[str],
    shapes: tuple[Any, ...],
) -> None:
    """torch.export-based ONNX export (the supported exporter since torch 2.9), one self-contained file.

    torch's exporter trips over its own deprecations (FutureWarning/DeprecationWarning from its
    internals); they say nothing about our graphs, so they are silenced here and only here."""
    import torch

    from .attention_ops import onnx_translations

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            module,
            args,
            str(path),
            input_names=inputs,
            output_names=outputs,
            dynamic_shapes=shapes,
            opset_version=OPSET,
            custom_translation_table=onnx_translations(),
            dynamo=True,
            external_data=False,
            optimize=True,
            verbose=False,
        )


def _sample_decoder_feeds(model: Any, *, batch: int, capacity: int, source: int) -> dict[str, np.ndarray]:
    """Two rows at different positions in a cache with spare capacity, one source right-padded."""
    config = model.config
    heads, width = config.decoder_attention_heads, config.d_model // config.decoder_attention_heads
    rng = np.random.default_rng(0)
    feeds = {
        "input_ids": rng.integers(0, config.vocab_size, size=(batch, 1)).astype(np.int64),
        "position_ids": np.array([[capacity - 3], [1]], dtype=np.int64)[:batch],
        "source_attention_mask": np.ones((batch, source), dtype=np.int64),
    }
    feeds["source_attention_mask"][1:, -1] = 0  # second row: right-padded source
    for i in range(config.decoder_layers):
        for kind in ("key", "value"):
            feeds[f"cache_{kind}_{i}"] = rng.standard_normal((batch, heads, capacity, width)).astype(
                np.float32
            )
            feeds[f"cross_{kind}_{i}"] = rng.standard_normal((batch, heads, source, width)).astype(np.float32)
    return feeds


def _check_against_torch(
    model: Any,
    suppress: list[int],
    out: Path,
    encoder_names: list[str],
    decoder_in: list[str],
    decoder_out: list[str],
) -> None:
    """The exported graphs must compute what the PyTorch modules compute (before any quantization)."""
    import torch

    from .marian_graphs import MarianDecoderStepGraph, MarianEncoderGraph

    ids = np.array([[7, 3, 9, 4, 0], [8, 2, 0, 1, 1]], dtype=np.int64)
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=np.int64)
    expected_enc = MarianEncoderGraph(model)(torch.from_numpy(ids), torch.from_numpy(mask))
    got_enc = session_for_check(out / "encoder.onnx").run(
        encoder_names, {"input_ids": ids, "attention_mask": mask}
    )
    feeds = _sample_decoder_feeds(model, batch=2, capacity=7, source=5)
    expected_dec = MarianDecoderStepGraph(model, suppress)(*(torch.from_numpy(feeds[n]) for n in decoder_in))
    got_dec = _run_with_caches_in_place(
        session_for_check(out / "decoder.onnx"), feeds, decoder_in, decoder_out
    )
    for name, want, got in zip(
        [*encoder_names, *decoder_out], [*expected_enc, *expected_dec], [*got_enc, *got_dec], strict=True
    ):
        want_np = want.numpy()
        if want_np.dtype == np.int64:
            ok = np.array_equal(want_np, got)
        else:
            finite = np.isfinite(want_np)
            ok = bool(np.array_equal(finite, np.isfinite(got))) and np.allclose(
                want_np[finite], got[finite], atol=1e-4, rtol=1e-4
            )
        if not ok:
            raise RuntimeError(f"exported graph output {name!r} differs from PyTorch")


def _run_with_caches_in_place(
    session: Any, feeds: dict[str, np.ndarray], inputs: list[str], outputs: list[str]
) -> list[np.ndarray]:
    """Run one step the way the engine does: each cache bound as both input and output, so the
    graph updates it in place (the fused attention kernel only writes in place when bound so)."""
    import onnxruntime

    io = session.io_binding()
    caches = {name: feeds[name].copy() for name in inputs if name.startswith("cache_")}
    for name in inputs:
        if name in caches:
            value = onnxruntime.OrtValue.ortvalue_from_numpy(caches[name])
            io.bind_ortvalue_input(name, value)
            io.bind_ortvalue_output(name.replace("cache_", "updated_"), value)
        else:
            io.bind_cpu_input(name, feeds[name])
    io.bind_output("logits")
    io.bind_output("top_ids")
    session.run_with_iobinding(io)
    logits, top_ids = io.copy_outputs_to_cpu()[-2:]
    return [logits, top_ids, *(caches[name.replace("updated_", "cache_")] for name in outputs[2:])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m decoding.export.marian_torch",
        description="Export a Marian checkpoint without safetensors to a liuyi bundle (needs torch).",
    )
    parser.add_argument(
        "source", type=Path, help="checkpoint directory (config.json, pytorch_model.bin, ...)"
    )
    parser.add_argument("output", type=Path, help="bundle directory to create")
    parser.add_argument("--int8", action="store_true", help="dynamic int8 quantization")
    parser.add_argument("--source-lang", choices=LANGUAGES, help="default: from the checkpoint")
    parser.add_argument("--target-lang", choices=LANGUAGES, help="default: from the checkpoint")
    parser.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    args = parser.parse_args(argv)
    options = ConvertOptions(int8=args.int8, source_lang=args.source_lang, target_lang=args.target_lang)
    return run_for_cli(lambda: convert(args.source, args.output, force=args.force, options=options))


if __name__ == "__main__":
    sys.exit(main())
