"""Writing a transformer bundle: the two graphs, optional int8, and the manifest that describes them.

Every encoder-decoder family converts to the same graph interface (see
:mod:`decoding.export.transformer`), so the encoder/decoder sections of the manifest — source
tensors, in-place key/value caches — are the same for all of them and written only here.
"""

from __future__ import annotations

from pathlib import Path

import onnx

from .._manifest import (
    DecoderSpec,
    EncoderSpec,
    Generation,
    Limits,
    Manifest,
    SourceTensor,
    SpecialTokens,
    StateTensor,
    TokenizerSpec,
    file_entries,
    write_manifest,
)
from ._quantize import quantize_graph
from .transformer import Transformer, build_decoder, build_encoder, graph_names

GRAPHS = ("encoder.onnx", "decoder.onnx")


def write_graphs(model: Transformer, output_dir: Path) -> list[str]:
    """Build, save and check ``encoder.onnx`` and ``decoder.onnx`` (float32), each with its weights
    in ``<graph>.data``: memory-mapped by ONNX Runtime (see :func:`._common.move_weights_beside`), past
    protobuf's 2 GiB limit (NLLB-600M's decoder holds two 1 GB vocabulary matrices), and a 3 GB
    graph is never held in memory twice while it is written.

    Returns:
        the weight files written besides the two graphs, for the manifest.
    """
    for build, name in ((build_encoder, "encoder.onnx"), (build_decoder, "decoder.onnx")):
        path, data = output_dir / name, output_dir / f"{name}.data"
        with data.open("wb") as stream:
            onnx.save(build(model, data=stream, data_name=data.name), str(path))
        onnx.checker.check_model(str(path))  # by path: works with external data
    return [f"{name}.data" for name in GRAPHS]


def quantize_graphs(output_dir: Path) -> list[str]:
    """Quantize both graphs to int8 in place, one weight at a time (see :mod:`._quantize`: memory
    stays about a block of the largest weight, not the model). The int8 weights replace the
    float32 ones in ``<graph>.data``.

    Returns:
        the weight files besides the two graphs, for the manifest.
    """
    return [quantize_graph(output_dir / name) for name in GRAPHS]


def graph_specs(layers: int) -> tuple[EncoderSpec, DecoderSpec]:
    """The manifest's encoder and decoder sections for graphs with ``layers`` decoder layers."""
    encoder_names, _, _ = graph_names(layers)
    encoder = EncoderSpec(
        file="encoder.onnx",
        input_ids="input_ids",
        attention_mask="attention_mask",
        outputs=tuple(encoder_names),
    )
    decoder = DecoderSpec(
        file="decoder.onnx",
        input_ids="input_ids",
        top_ids="top_ids",
        logits="logits",
        position_ids="position_ids",
        source_attention_mask="source_attention_mask",
        source_tensors=tuple(SourceTensor(name=name, batch_axis=0, source_axis=2) for name in encoder_names),
        state=tuple(
            StateTensor(
                input=f"cache_{kind}_{i}",
                output=f"updated_{kind}_{i}",
                batch_axis=0,
                time_axis=2,
                initial="empty",
                in_place=True,
            )
            for i in range(layers)
            for kind in ("key", "value")
        ),
    )
    return encoder, decoder


def write_transformer_manifest(
    output_dir: Path,
    *,
    layers: int,
    name: str,
    directions: tuple[str, ...],
    family: str,
    tokens: SpecialTokens,
    limits: Limits,
    generation: Generation,
    tokenizer: TokenizerSpec,
    files: list[str],
    license: str,
    attribution: str,
    int8: bool,
) -> None:
    """Write ``manifest.json`` for a bundle whose graphs came from :func:`write_graphs`.

    ``directions`` lists "src-tgt" pairs, the first being the bundle's ``source_lang``/``target_lang``.
    """
    encoder, decoder = graph_specs(layers)
    source_lang, target_lang = directions[0].split("-")
    manifest = Manifest(
        name=name,
        source_lang=source_lang,
        target_lang=target_lang,
        directions=directions if len(directions) > 1 else (),
        family=family,
        tokens=tokens,
        limits=limits,
        generation=generation,
        tokenizer=tokenizer,
        encoder=encoder,
        decoder=decoder,
        files=file_entries(output_dir, [*GRAPHS, *files]),  # files: tokenizer, card, graph weights
        license=license,
        attribution=attribution,
        quantization="int8" if int8 else None,
        activation_scales="per-row" if int8 else None,  # what quantize_graphs writes
    )
    write_manifest(output_dir, manifest)
