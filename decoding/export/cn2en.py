"""Convert the trained zh->en GRU model of the PyPI package ``cn2en`` 0.0.118 into a liuyi bundle.

    python -m decoding.export.cn2en /path/to/cn2en OUT      # the extracted package directory
    python -m decoding.export.cn2en cn2en-0.0.118-py3-none-any.whl OUT

cn2en (Chien Tran, MIT, https://github.com/chientrm/cn2en) is the classic PyTorch tutorial
seq2seq model without attention: a character-level encoder (embedding -> GRU 256) whose final
hidden state starts a word-level decoder (embedding -> ReLU -> GRU 256 -> Linear -> LogSoftmax),
decoded greedily from SOS=0 until EOS=1. The weights are exported unchanged:

* ``encoder.onnx`` — ``input_ids`` int64 (1, S) -> ``hidden`` float32 (1, 1, 256), one ONNX GRU op
  over the whole sentence from a zero state (the reference feeds the same GRU one id at a time).
* ``decoder.onnx`` — one step for a batch: ``input_ids`` int64 (B, 1), ``hidden`` (1, B, 256) ->
  ``logits`` (B, V) log-softmax scores, ``top_ids`` (B, 2) best first, ``next_hidden`` (1, B, 256).

Both are exported with the TorchScript exporter (``dynamo=False``): it folds PyTorch's r,z,n gate
order into the ONNX z,r,h order at export time, where the dynamo exporter leaves six Slice and two
Concat nodes that reorder the weights on every run. Reading and checking the wheel is
``_cn2en_wheel.py``'s job.

Needs the ``[export]`` extra (torch, onnx) at conversion time only.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .._manifest import (
    DecoderSpec,
    EncoderSpec,
    Generation,
    Limits,
    Manifest,
    SpecialTokens,
    StateTensor,
    TokenizerSpec,
    file_entries,
    write_manifest,
)
from ._cn2en_wheel import DIST_INFO, VERSION, read_wheel, vocabulary
from ._common import prepare_output_dir, run_for_cli, session_for_check

OPSET = 17
HIDDEN = 256
SOS, EOS = 0, 1  # the reference's SOS_token / EOS_token
# Training targets were lower-cased; these vocabulary words are names in every sentence they can
# appear in, so the renderer may write them capitalized. Ambiguous ones (may, march, mark, bill,
# jack, new, god) are left out on purpose.
_CASED = [
    "Tom",
    "Mary",
    "John",
    "Alice",
    "Mike",
    "Mozart",
    "Halley",
    "Beethoven",
    "Shakespeare",
    "Einstein",
    "Japan",
    "Japanese",
    "China",
    "Chinese",
    "America",
    "American",
    "English",
    "French",
    "France",
    "Germany",
    "German",
    "Italy",
    "Italian",
    "Spanish",
    "Russia",
    "Russian",
    "Korea",
    "Korean",
    "India",
    "Indian",
    "Canada",
    "Canadian",
    "Australia",
    "England",
    "British",
    "Britain",
    "Europe",
    "European",
    "Africa",
    "Asia",
    "Taiwan",
    "Singapore",
    "Vietnam",
    "Brazil",
    "Mexico",
    "Egypt",
    "Tokyo",
    "Kyoto",
    "Osaka",
    "Beijing",
    "Boston",
    "London",
    "Paris",
    "Rome",
    "Chicago",
    "Hawaii",
    "California",
    "Hong",
    "Kong",
    "Fuji",
    "Everest",
    "Latin",
    "Greek",
    "Arabic",
    "Esperanto",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "January",
    "February",
    "April",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "Christmas",
    "Bible",
    "Facebook",
    "Twitter",
    "eBay",
    "IBM",
    "TV",
    "OK",
    "DNA",
    "UFO",
    "UK",
]


def convert(source: Path, output_dir: Path, *, force: bool = False) -> Path:
    """Export cn2en 0.0.118 from ``source`` to a bundle in ``output_dir`` (the signature every
    family's converter has).

    Arguments:
        source: the package directory (holding ``model.pth`` and the ``*_lang.pkl`` files, with
            ``cn2en-0.0.118.dist-info`` next to it) or the ``.whl`` file itself.
        output_dir: where the bundle goes; must not exist unless ``force``.
        force: replace an existing ``output_dir``.

    Returns:
        ``output_dir``.

    Raises:
        FileExistsError: ``output_dir`` exists and ``force`` is false.
        ValueError: ``source`` is not cn2en 0.0.118 (missing file, different checksum, odd vocabulary).
    """
    import torch

    files = read_wheel(Path(source))
    checkpoint = torch.load(io.BytesIO(files.checkpoint), map_location="cpu", weights_only=True)
    source_words = vocabulary(files.input_lang, "input_lang.pkl")
    target_words = vocabulary(files.output_lang, "output_lang.pkl")
    encoder, decoder = _graph_modules(checkpoint, len(source_words), len(target_words))

    output_dir = prepare_output_dir(output_dir, force=force)
    with torch.no_grad():
        _export_encoder(encoder, output_dir / "encoder.onnx")
        _export_decoder(decoder, output_dir / "decoder.onnx")
        _check_against_torch(encoder, decoder, output_dir)
    _write_json(output_dir / "source_vocab.json", source_words)
    _write_json(output_dir / "target_vocab.json", target_words)
    (output_dir / "LICENSE").write_text(files.license, encoding="utf-8")
    (output_dir / "README.md").write_text(_README, encoding="utf-8")

    bases = {word.lstrip('"').partition("'")[0] for word in target_words}  # "mozart's" -> mozart
    cased = {word.lower(): word for word in _CASED if word.lower() in bases}
    manifest = Manifest(
        name="cn2en-gru-zh-en",
        source_lang="zh",
        target_lang="en",
        family="gru-seq2seq",
        tokens=SpecialTokens(decoder_start=SOS, eos=EOS, pad=None, unk=None),
        # The model was trained on short Tatoeba-style sentence pairs (a dozen characters, a handful
        # of words); one GRU state cannot carry much more, and without attention long outputs turn
        # into repetition. 128 source characters is far beyond anything it saw (the server splits
        # longer text into sentences first) and 128 target words stops a repeating output long
        # before the reference's 1000-step cap.
        limits=Limits(max_source_tokens=128, max_target_tokens=128),
        generation=Generation(forced_eos_at_limit=False, max_new_tokens_ratio=2.0, max_new_tokens_extra=10),
        tokenizer=TokenizerSpec(
            kind="word-vocab",
            files={"source_vocab": "source_vocab.json", "target_vocab": "target_vocab.json"},
            options={"normalize": "cn2en", "render": "english", "cased": cased},
        ),
        encoder=EncoderSpec(
            file="encoder.onnx", input_ids="input_ids", attention_mask=None, outputs=("hidden",)
        ),
        decoder=DecoderSpec(
            file="decoder.onnx",
            input_ids="input_ids",
            top_ids="top_ids",
            logits="logits",
            state=(
                StateTensor(
                    input="hidden",
                    output="next_hidden",
                    batch_axis=1,
                    time_axis=None,
                    initial="encoder:hidden",
                ),
            ),
        ),
        files=file_entries(
            output_dir,
            [
                "encoder.onnx",
                "decoder.onnx",
                "source_vocab.json",
                "target_vocab.json",
                "LICENSE",
                "README.md",
            ],
        ),
        license="MIT",
        license_file="LICENSE",
        attribution=(
            f"cn2en {VERSION} by Chien Tran (https://github.com/chientrm/cn2en, PyPI: cn2en), MIT; "
            "weights unchanged, converted to ONNX by liuyi."
        ),
    )
    write_manifest(output_dir, manifest)
    return output_dir


def _graph_modules(checkpoint: dict[str, Any], source_size: int, target_size: int) -> tuple[Any, Any]:
    """The encoder and the one-step decoder as exportable modules holding the reference weights."""
    import torch
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(source_size, HIDDEN)
            self.gru = nn.GRU(HIDDEN, HIDDEN)

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            embedded = self.embedding(input_ids).transpose(0, 1)  # (1, S) -> (S, 1, H)
            _, hidden = self.gru(embedded)  # zero initial state, like encoder.initHidden()
            return hidden  # (1, 1, H)

    class DecoderStep(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(target_size, HIDDEN)
            self.gru = nn.GRU(HIDDEN, HIDDEN)
            self.out = nn.Linear(HIDDEN, target_size)

        def forward(self, input_ids: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, ...]:
            embedded = torch.relu(self.embedding(input_ids)).transpose(0, 1)  # (B, 1) -> (1, B, H)
            output, next_hidden = self.gru(embedded, hidden)  # (1, B, H) each
            logits = torch.log_softmax(self.out(output[0]), dim=1)  # (B, V)
            top_ids = torch.topk(logits, 2, dim=1).indices  # (B, 2), ties -> lower id
            return logits, top_ids, next_hidden

    encoder, decoder = Encoder().eval(), DecoderStep().eval()
    encoder.load_state_dict(checkpoint["encoder"])
    decoder.load_state_dict(checkpoint["decoder"])
    return encoder, decoder


def _export_encoder(encoder: Any, path: Path) -> None:
    import torch

    ids = torch.tensor([[5, 6, 7, EOS]], dtype=torch.long)
    torch.onnx.export(
        encoder,
        (ids,),
        str(path),
        input_names=["input_ids"],
        output_names=["hidden"],
        dynamic_axes={"input_ids": {1: "source"}},
        opset_version=OPSET,
        dynamo=False,
    )


def _export_decoder(decoder: Any, path: Path) -> None:
    import torch

    ids = torch.tensor([[SOS], [7]], dtype=torch.long)
    hidden = torch.zeros(1, 2, HIDDEN)
    torch.onnx.export(
        decoder,
        (ids, hidden),
        str(path),
        input_names=["input_ids", "hidden"],
        output_names=["logits", "top_ids", "next_hidden"],
        dynamic_axes={
            "input_ids": {0: "batch"},
            "hidden": {1: "batch"},
            "logits": {0: "batch"},
            "top_ids": {0: "batch"},
            "next_hidden": {1: "batch"},
        },
        opset_version=OPSET,
        dynamo=False,
    )


def _check_against_torch(encoder: Any, decoder: Any, out: Path) -> None:
    """The graphs must compute what the modules compute, for other lengths and batch sizes than
    the ones they were traced with."""
    import torch

    rng = np.random.default_rng(0)
    ids = rng.integers(2, encoder.embedding.num_embeddings, size=(1, 9)).astype(np.int64)
    ids[0, -1] = EOS
    want_hidden = encoder(torch.from_numpy(ids)).numpy()
    (got_hidden,) = session_for_check(out / "encoder.onnx").run(["hidden"], {"input_ids": ids})
    step_ids = rng.integers(0, decoder.embedding.num_embeddings, size=(3, 1)).astype(np.int64)
    state = np.concatenate([want_hidden, rng.standard_normal((1, 2, HIDDEN)).astype(np.float32)], axis=1)
    want = [t.numpy() for t in decoder(torch.from_numpy(step_ids), torch.from_numpy(state))]
    got = session_for_check(out / "decoder.onnx").run(
        ["logits", "top_ids", "next_hidden"], {"input_ids": step_ids, "hidden": state}
    )
    for name, expected, actual in zip(
        ["hidden", "logits", "top_ids", "next_hidden"], [want_hidden, *want], [got_hidden, *got], strict=True
    ):
        same = (
            np.array_equal(expected, actual)
            if expected.dtype == np.int64
            else np.allclose(expected, actual, atol=1e-5, rtol=1e-5)
        )
        if expected.shape != actual.shape or not same:
            raise RuntimeError(f"exported graph output {name!r} differs from PyTorch")


def _write_json(path: Path, words: list[str]) -> None:
    path.write_text(json.dumps(words, ensure_ascii=False) + "\n", encoding="utf-8")


_README = f"""\
# cn2en-gru-zh-en

Chinese -> English GRU sequence-to-sequence model (no attention) from the PyPI package
[cn2en](https://pypi.org/project/cn2en/) {VERSION} by Chien Tran (https://github.com/chientrm/cn2en),
released under the MIT license (see LICENSE, copied unchanged from the wheel; its copyright line
names "The Python Packaging Authority", as in the wheel).

The weights are unchanged; liuyi converted them to ONNX with `python -m decoding.export.cn2en`.
`source_vocab.json` / `target_vocab.json` are the package's `input_lang.pkl` / `output_lang.pkl`
as JSON lists (position = id). The model is small (loss 2.64 at the end of training) and often
wrong or repetitive; it is here because it is small, permissively licensed and installable from PyPI.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m decoding.export.cn2en",
        description=f"Convert the cn2en {VERSION} zh->en model (PyPI) to a liuyi model bundle.",
    )
    parser.add_argument(
        "source",
        type=Path,
        help=f"the extracted cn2en package directory ({DIST_INFO} next to it) or the .whl",
    )
    parser.add_argument("output", type=Path, help="bundle directory to create")
    parser.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    args = parser.parse_args(argv)
    return run_for_cli(lambda: convert(args.source, args.output, force=args.force))


if __name__ == "__main__":
    sys.exit(main())
