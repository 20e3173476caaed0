"""Convert a Hugging Face Marian checkpoint (opus-mt-zh-en, opus-mt-en-zh, ...) into a liuyi bundle.

``convert(source, output_dir)`` loads the checkpoint with transformers (a local directory works
offline; a hub name works where there is internet), exports the encoder and the one-step decoder
graphs from :mod:`decoding.export.marian_graphs`, checks them against the PyTorch modules on a
sample batch, optionally quantizes them to int8, copies the tokenizer files and writes the manifest.
Needs the ``[export]`` extra (torch, transformers, onnx); the bundle it writes needs none of them.
"""

from __future__ import annotations

import re
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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
from ._common import prepare_output_dir, quantize_int8, session_for_check

OPSET = 18
TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")
# Languages liuyi serves, and how opus-mt names them in model ids and target-language tokens.
_LANG_ALIASES = {"zh": "zh", "cmn": "zh", "zho": "zh", "en": "en", "eng": "en"}
_ZH_TARGET_CODES = (">>cmn_Hans<<", ">>zho_Hans<<", ">>cmn<<", ">>zho<<")


@dataclass(frozen=True, kw_only=True)
class MarianExportOptions:
    name: str | None = None  # bundle name; default derived from the source
    source_lang: str | None = None  # default: parsed from an "opus-mt-<src>-<tgt>" name
    target_lang: str | None = None
    int8: bool = False  # onnxruntime dynamic quantization of both graphs
    license: str | None = None  # default: the model card's "license:" line, else "unknown"
    attribution: str | None = None
    check: bool = True  # compare ONNX outputs with PyTorch on a sample batch


def convert(
    source: str | Path, output_dir: Path, *, options: MarianExportOptions | None = None, force: bool = False
) -> Path:
    """Export ``source`` (local directory or hub name) to a bundle in ``output_dir``.

    Arguments:
        source: a directory holding a Marian ``config.json``, weights and tokenizer files, or a hub id.
        output_dir: where the bundle goes; must not exist unless ``force``.
        options: naming, languages, int8.
        force: replace an existing ``output_dir``.

    Returns:
        ``output_dir``.

    Raises:
        FileExistsError: ``output_dir`` exists and ``force`` is false.
        ValueError: the checkpoint is not usable (not Marian, unknown languages, separate vocabularies).
    """
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    options = options or MarianExportOptions()
    if Path(output_dir).exists() and not force:  # fail before the slow part
        raise FileExistsError(f"{output_dir} exists; pass --force to replace it")
    model = MarianMTModel.from_pretrained(str(source)).eval().float()
    tokenizer = MarianTokenizer.from_pretrained(str(source))
    output_dir = prepare_output_dir(output_dir, force=force)
    if tokenizer.separate_vocabs:
        raise ValueError("Marian models with separate source/target vocabularies are not supported yet")
    if (model.config.d_model // model.config.decoder_attention_heads) % 8:
        raise ValueError("the fused attention kernels need a head width that is a multiple of 8")
    source_lang, target_lang = _languages(str(source), options)
    config, generation = model.config, model.generation_config

    suppress = sorted({ids[0] for ids in (generation.bad_words_ids or []) if len(ids) == 1})
    encoder_names, decoder_in, decoder_out = _graph_names(config.decoder_layers)
    with torch.no_grad():
        _export_encoder(model, output_dir / "encoder.onnx", encoder_names)
        _export_decoder(model, suppress, output_dir / "decoder.onnx", decoder_in, decoder_out)
        if options.check:
            _check_against_torch(model, suppress, output_dir, encoder_names, decoder_in, decoder_out)
    if options.int8:
        for graph in ("encoder.onnx", "decoder.onnx"):
            quantize_int8(output_dir / graph)

    tokenizer.save_vocabulary(str(output_dir))
    extra_files = _copy_model_card(source, output_dir)
    eos = int(config.eos_token_id)
    max_positions = int(config.max_position_embeddings)
    layers = config.decoder_layers
    manifest = Manifest(
        name=options.name or _default_name(str(source), options.int8),
        source_lang=source_lang,
        target_lang=target_lang,
        family="marian",
        tokens=SpecialTokens(
            decoder_start=int(config.decoder_start_token_id),
            eos=eos,
            pad=int(config.pad_token_id),
            unk=int(tokenizer.unk_token_id),
        ),
        limits=Limits(
            max_source_tokens=max_positions,
            max_target_tokens=min(int(generation.max_length or max_positions), max_positions),
        ),
        generation=Generation(
            forced_eos_at_limit=generation.forced_eos_token_id == eos,
            max_new_tokens_ratio=2.0,
            max_new_tokens_extra=10,
        ),
        tokenizer=TokenizerSpec(
            kind="marian-sentencepiece",
            files={"source_spm": "source.spm", "target_spm": "target.spm", "vocab": "vocab.json"},
            options=_tokenizer_options(tokenizer, target_lang),
        ),
        encoder=EncoderSpec(
            file="encoder.onnx",
            input_ids="input_ids",
            attention_mask="attention_mask",
            outputs=tuple(encoder_names),
        ),
        decoder=DecoderSpec(
            file="decoder.onnx",
            input_ids="input_ids",
            top_ids="top_ids",
            logits="logits",
            position_ids="position_ids",
            source_attention_mask="source_attention_mask",
            source_tensors=tuple(
                SourceTensor(name=name, batch_axis=0, source_axis=2) for name in encoder_names
            ),
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
        ),
        files=file_entries(output_dir, ["encoder.onnx", "decoder.onnx", *TOKENIZER_FILES, *extra_files]),
        license=options.license or _card_license(output_dir) or "unknown",
        license_file=None,
        attribution=options.attribution
        or f"Weights from the Marian checkpoint {source}; converted by liuyi.",
        quantization="int8" if options.int8 else None,
    )
    write_manifest(output_dir, manifest)
    return output_dir


def _graph_names(layers: int) -> tuple[list[str], list[str], list[str]]:
    cross = [f"cross_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    cache = [f"cache_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    updated = [f"updated_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    decoder_in = ["input_ids", "position_ids", "source_attention_mask", *cache, *cross]
    return cross, decoder_in, ["logits", "top_ids", *updated]


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


def _languages(source: str, options: MarianExportOptions) -> tuple[str, str]:
    match = re.search(r"opus-mt-([a-z]+)-([a-z]+)", Path(source).name if Path(source).exists() else source)
    parsed = (_LANG_ALIASES.get(match.group(1)), _LANG_ALIASES.get(match.group(2))) if match else (None, None)
    src, tgt = options.source_lang or parsed[0], options.target_lang or parsed[1]
    if src is None or tgt is None:
        raise ValueError(
            "cannot tell the languages from the model name; pass --source-lang and --target-lang"
        )
    return src, tgt


def _tokenizer_options(tokenizer: Any, target_lang: str) -> dict[str, Any]:
    options: dict[str, Any] = {"decode_spm": "target" if tokenizer.separate_vocabs else "source"}
    codes = list(tokenizer.supported_language_codes)
    if codes:  # multilingual target side: pick the code for Simplified Chinese / English
        wanted = _ZH_TARGET_CODES if target_lang == "zh" else (">>eng<<", ">>en<<")
        chosen = next((code for code in wanted if code in codes), None)
        if chosen is None:
            raise ValueError(
                f"the model needs a target language token; none of {wanted} is in {codes[:10]}..."
            )
        options["target_language_code"] = chosen
    return options


def _default_name(source: str, int8: bool) -> str:
    base = Path(source).name if Path(source).exists() else source.split("/")[-1]
    return base + ("-int8" if int8 else "")


def _copy_model_card(source: str | Path, output_dir: Path) -> list[str]:
    card = Path(source) / "README.md"
    if card.is_file():
        shutil.copyfile(card, output_dir / "MODEL_CARD.md")
        return ["MODEL_CARD.md"]
    return []


def _card_license(output_dir: Path) -> str | None:
    card = output_dir / "MODEL_CARD.md"
    if card.is_file():
        match = re.search(r"^license:\s*(\S+)", card.read_text(encoding="utf-8"), re.MULTILINE)
        if match:
            return match.group(1)
    return None
