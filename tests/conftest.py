"""Shared fixtures: small models built offline, once per test session."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from decoding import Bundle, LoadOptions, RuntimeOptions, load_bundle
from server import Settings
from tests._live import LiveServer, asgi_client

# The tiny random Marian used by parity tests: seed and eos bias chosen so that some outputs stop
# on their own within a few tokens and others run into max_new_tokens (both paths get checked).
TINY_SEED = 2
TINY_EOS_BIAS = 2.0
NLLB_EOS_BIAS = 2.5
M2M100_EOS_BIAS = 4.0


@pytest.fixture(scope="session")
def tiny_marian_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hugging Face checkpoint directory: random weights, SentencePiece trained offline."""
    from decoding.export.synthetic import build

    return build(tmp_path_factory.mktemp("hf") / "opus-mt-zh-en-tiny", seed=TINY_SEED, eos_bias=TINY_EOS_BIAS)


@pytest.fixture(scope="session")
def tiny_marian_bundle_dir(tiny_marian_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same checkpoint converted by the torch-free converter."""
    from decoding.export import convert_checkpoint

    return convert_checkpoint(tiny_marian_dir, tmp_path_factory.mktemp("bundles") / "tiny-zh-en")


@pytest.fixture(scope="session")
def tiny_marian_bundle(tiny_marian_bundle_dir: Path) -> Bundle:
    return load_bundle(
        tiny_marian_bundle_dir, options=LoadOptions(runtime=RuntimeOptions(intra_op_num_threads=1))
    )


def hf_reference(
    checkpoint: Path, model_class: str, tokenizer_class: str = "AutoTokenizer"
) -> tuple[Any, Any]:
    """(model, tokenizer) from transformers, by class name: the reference implementation."""
    import transformers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Recommended: pip install sacremoses" and friends
        tokenizer = getattr(transformers, tokenizer_class).from_pretrained(str(checkpoint))
        model = getattr(transformers, model_class).from_pretrained(str(checkpoint)).eval()
    return model, tokenizer


def marian_reference(checkpoint: Path) -> tuple[Any, Any]:
    """(MarianMTModel, MarianTokenizer)."""
    return hf_reference(checkpoint, "MarianMTModel", "MarianTokenizer")


@pytest.fixture(scope="session")
def hf_tiny(tiny_marian_dir: Path) -> tuple[Any, Any]:
    return marian_reference(tiny_marian_dir)


@pytest.fixture(scope="session")
def default_bundle() -> Bundle:
    """The bundled cn2en zh->en model, exactly as `liuyi serve` loads it."""
    return load_bundle()


@pytest.fixture(scope="module")
def live(default_bundle: Bundle) -> Iterator[LiveServer]:
    """A real uvicorn on 127.0.0.1 with default settings, shared by a test module's tests."""
    with LiveServer(Settings(), bundles=[default_bundle]) as server:
        yield server


@pytest.fixture
async def http(default_bundle: Bundle) -> AsyncIterator[httpx.AsyncClient]:
    """The app in process with default settings, behind httpx's ASGI transport."""
    async with asgi_client(Settings(), [default_bundle]) as client:
        yield client


@pytest.fixture(scope="session")
def tiny_tc_big_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tc-big style checkpoint: separate source/target vocabularies, target-language tokens."""
    from decoding.export.synthetic import build

    return build(
        tmp_path_factory.mktemp("hf") / "opus-mt-tc-big-zh-en-tiny",
        seed=TINY_SEED,
        eos_bias=8.0,  # its random logits are larger: this mixes stops and length limits again
        separate_vocabs=True,
    )


@pytest.fixture(scope="session")
def hf_tc_big(tiny_tc_big_dir: Path) -> tuple[Any, Any]:
    return marian_reference(tiny_tc_big_dir)


@pytest.fixture(scope="session")
def tiny_nllb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An NLLB-200-architecture checkpoint: random weights, SentencePiece BPE trained offline."""
    from decoding.export.synthetic_nllb import build

    return build(tmp_path_factory.mktemp("hf") / "nllb-200-tiny", seed=TINY_SEED, eos_bias=NLLB_EOS_BIAS)


@pytest.fixture(scope="session")
def hf_nllb(tiny_nllb_dir: Path) -> tuple[Any, Any]:
    """(M2M100ForConditionalGeneration, NllbTokenizer)."""
    return hf_reference(tiny_nllb_dir, "M2M100ForConditionalGeneration")


@pytest.fixture(scope="session")
def tiny_m2m100_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain M2M100 checkpoint (facebook/m2m100_418M's files): random weights, vocab.json."""
    from decoding.export.synthetic_nllb import build

    return build(
        tmp_path_factory.mktemp("hf") / "m2m100-tiny",
        seed=TINY_SEED,
        eos_bias=M2M100_EOS_BIAS,
        tokenizer="m2m100",
    )


@pytest.fixture(scope="session")
def hf_m2m100(tiny_m2m100_dir: Path) -> tuple[Any, Any]:
    """(M2M100ForConditionalGeneration, M2M100Tokenizer)."""
    return hf_reference(tiny_m2m100_dir, "M2M100ForConditionalGeneration")
