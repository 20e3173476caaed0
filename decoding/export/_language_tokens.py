"""Which tokenizer an M2M100-architecture checkpoint ships, and the ids of its language tokens.

Two tokenizers come with the same architecture (``model_type: m2m_100``):

* NLLB-200 (``facebook/nllb-200-*``): ``tokenizer.json`` (or ``tokenizer_config.json``'s
  ``added_tokens_decoder``) lists the language codes (``zho_Hans``, ``eng_Latn``) with their ids.
* M2M100 (``facebook/m2m100_418M``, ``_1.2B``): transformers' ``M2M100Tokenizer`` with a
  ``vocab.json``; no file lists the language ids, they follow a rule: ``__zh__`` is
  ``len(vocab.json)`` + the index of ``zh`` in the language list ``tokenizer_config.json`` names
  (``language_codes``: ``m2m100``, the default, or ``wmt21``). The lists below are transformers'
  (``FAIRSEQ_LANGUAGE_CODES``); the model's vocabulary adds 8 "made-up words" after them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .._languages import LANGUAGE_TABLE
from ._checkpoint import Checkpoint

SPM_FILE = "sentencepiece.bpe.model"
VOCAB_FILE = "vocab.json"
# NLLB's code for each language liuyi serves
NLLB_CODES = {language.code: language.nllb_code for language in LANGUAGE_TABLE}
# M2M100's code for each language liuyi serves (its token: ``__zh__``)
M2M100_CODES = {language.code: language.m2m100_code for language in LANGUAGE_TABLE}
# fmt: off
M2M100_LANGUAGE_LISTS: dict[str, tuple[str, ...]] = {
    "m2m100": (
        "af", "am", "ar", "ast", "az", "ba", "be", "bg", "bn", "br", "bs", "ca", "ceb", "cs", "cy",
        "da", "de", "el", "en", "es", "et", "fa", "ff", "fi", "fr", "fy", "ga", "gd", "gl", "gu", "ha",
        "he", "hi", "hr", "ht", "hu", "hy", "id", "ig", "ilo", "is", "it", "ja", "jv", "ka", "kk", "km",
        "kn", "ko", "lb", "lg", "ln", "lo", "lt", "lv", "mg", "mk", "ml", "mn", "mr", "ms", "my", "ne",
        "nl", "no", "ns", "oc", "or", "pa", "pl", "ps", "pt", "ro", "ru", "sd", "si", "sk", "sl", "so",
        "sq", "sr", "ss", "su", "sv", "sw", "ta", "th", "tl", "tn", "tr", "uk", "ur", "uz", "vi", "wo",
        "xh", "yi", "yo", "zh", "zu",
    ),
    "wmt21": ("en", "ha", "is", "ja", "cs", "ru", "zh", "de"),
}
# fmt: on
# the bos, pad, eos and unk pieces of an M2M100 vocab.json (transformers' defaults)
M2M100_SPECIAL_PIECES = ("<s>", "<pad>", "</s>", "<unk>")


@dataclass(frozen=True, kw_only=True)
class LanguageTokens:
    """What the manifest's tokenizer section and forced first tokens are made of."""

    kind: str  # the bundle's tokenizer kind
    files: dict[str, str]  # role -> file name, the same in checkpoint and bundle
    ids: dict[str, int]  # liuyi language -> id of its language token
    special_ids: list[int]  # ids decoding skips: special tokens and every language token
    unk: int


def language_tokens(checkpoint: Checkpoint) -> LanguageTokens:
    """The checkpoint's tokenizer: M2M100's when it ships ``vocab.json``, else NLLB-200's.

    Raises:
        FileNotFoundError: no ``sentencepiece.bpe.model``.
        ValueError: no token for zh or en in either tokenizer, or one beyond the model's vocabulary.
    """
    if not (checkpoint.path / SPM_FILE).is_file():
        raise FileNotFoundError(f"{checkpoint.path} has no {SPM_FILE} (the SentencePiece model)")
    tokenizer_class = str(checkpoint.tokenizer_config.get("tokenizer_class") or "")
    if (checkpoint.path / VOCAB_FILE).is_file() and not tokenizer_class.startswith("Nllb"):
        tokens = _m2m100(checkpoint)
    else:
        tokens = _nllb(checkpoint)
    vocab_size = int(checkpoint.config.get("vocab_size") or 0)
    beyond = {lang: index for lang, index in tokens.ids.items() if index >= vocab_size}
    if beyond:
        raise ValueError(
            f"{checkpoint.path}: the language token ids {beyond} lie beyond the model's vocabulary of "
            f"{vocab_size}: the model has no language tokens"
        )
    return tokens


def m2m100_token(code: str) -> str:
    """transformers' ``M2M100Tokenizer.get_lang_token``: ``zh`` -> ``__zh__``."""
    return f"__{code}__"


def _nllb(checkpoint: Checkpoint) -> LanguageTokens:
    added = _added_tokens(checkpoint)
    missing = [code for code in NLLB_CODES.values() if code not in added]
    if missing:
        raise ValueError(
            f"{checkpoint.path}: no language token for {', '.join(missing)} (NLLB-200's codes, listed by "
            f"tokenizer.json) and no {VOCAB_FILE} of an M2M100 tokenizer (tokens "
            f"{', '.join(map(m2m100_token, M2M100_CODES.values()))}); only NLLB-200 and M2M100 "
            "tokenizers are supported"
        )
    return LanguageTokens(
        kind="nllb-sentencepiece",
        files={"spm": SPM_FILE},
        ids={lang: added[code] for lang, code in NLLB_CODES.items()},
        special_ids=sorted(added.values()),
        unk=added.get("<unk>", 3),
    )


def _m2m100(checkpoint: Checkpoint) -> LanguageTokens:
    try:
        vocab = json.loads((checkpoint.path / VOCAB_FILE).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{checkpoint.path / VOCAB_FILE} is not valid JSON ({exc})") from None
    if not isinstance(vocab, dict):
        raise ValueError(f"{checkpoint.path / VOCAB_FILE} does not map pieces to ids")
    missing = [piece for piece in M2M100_SPECIAL_PIECES if piece not in vocab]
    if missing:
        raise ValueError(f"{checkpoint.path / VOCAB_FILE} has no {', '.join(missing)}")
    list_name = str(checkpoint.tokenizer_config.get("language_codes") or "m2m100")
    languages = M2M100_LANGUAGE_LISTS.get(list_name)
    if languages is None:
        raise ValueError(
            f"{checkpoint.path}: the M2M100 language list {list_name!r} is unknown "
            f"(known: {', '.join(M2M100_LANGUAGE_LISTS)})"
        )
    absent = [m2m100_token(code) for code in M2M100_CODES.values() if code not in languages]
    if absent:
        raise ValueError(
            f"{checkpoint.path}: the M2M100 language list {list_name!r} has no {', '.join(absent)}"
        )
    first = len(vocab)  # language tokens follow vocab.json, in the list's order
    return LanguageTokens(
        kind="m2m100-sentencepiece",
        files={"spm": SPM_FILE, "vocab": VOCAB_FILE},
        ids={lang: first + languages.index(code) for lang, code in M2M100_CODES.items()},
        special_ids=sorted(
            [int(vocab[piece]) for piece in M2M100_SPECIAL_PIECES]
            + [first + i for i in range(len(languages))]
        ),
        unk=int(vocab["<unk>"]),
    )


def _added_tokens(checkpoint: Checkpoint) -> dict[str, int]:
    """Special and language-code tokens -> ids, from tokenizer.json (else tokenizer_config.json)."""
    path = checkpoint.path / "tokenizer.json"
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        return {item["content"]: int(item["id"]) for item in data.get("added_tokens", [])}
    decoder = checkpoint.tokenizer_config.get("added_tokens_decoder", {})
    return {item["content"]: int(index) for index, item in decoder.items()}
