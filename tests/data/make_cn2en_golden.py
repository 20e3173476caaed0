"""Write ``cn2en_golden.json``: what the *reference* cn2en code does with a fixed set of sentences.

The records are produced by the wheel's own ``cn2en/model.py`` (imported from ``--source``, never
re-implemented here), so parity tests compare liuyi with the original, not with itself:

    text            the input sentence
    source_ids      encoder input ids, EOS (1) included  (``tensorsFromSentence(normalize(text))``)
    target_ids      greedy output ids, EOS excluded      (``translate()``)
    reference_text  ``Model.translate(text)``: the target words joined by ' '

Regenerate (needs torch; matplotlib is stubbed if missing because model.py imports it but never
plots)::

    python tests/data/make_cn2en_golden.py --source /work/dl/cn2en/cn2en
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "cn2en_golden.json"

SENTENCES = [
    # everyday, simplified and traditional (the training data mixes both)
    "我很好。",
    "汤姆在哪里？",
    "湯姆在哪裡？",
    "你喜欢吃苹果吗？",
    "湯姆不在床上。",
    "我不知道。",
    "他是我的朋友。",
    "她很漂亮。",
    "我们走吧！",
    "谢谢你。",
    "我爱你。",
    "我饿了。",
    "今天很冷。",
    "你叫什么名字？",
    "我是学生。",
    "我在学中文。",
    "他喜欢踢足球。",
    "你能帮我吗？",
    "她在厨房里做饭。",
    "我想喝水。",
    "天在下雨。",
    "请坐。",
    "小心！",
    "别担心。",
    "这是谁的书？",
    "北京是中国的首都。",
    "我明天会去东京。",
    "汤姆和玛丽结婚了。",
    # questions
    "你为什么哭？",
    "你会说英语吗？",
    "现在几点了？",
    "你住在哪里？",
    "这个多少钱？",
    # negations
    "我不喜欢猫。",
    "他不会说法语。",
    "我没有钱。",
    "这不是我的错。",
    "汤姆从来不喝酒。",
    "我一点也不累。",
    # numbers
    "我有两个哥哥。",
    "我七点起床。",
    "他三十岁了。",
    "我们有3个孩子。",
    "汤姆17岁。",
    "我有100块钱。",
    "我是1990年出生的。",
    # names
    "玛丽是老师。",
    "汤姆是我的哥哥。",
    "我叫汤姆。",
    "玛丽有一只猫和一只狗。",
    # punctuation variants: half width, none, repeated, quotes, spaces around
    "我很好.",
    "汤姆在哪里?",
    "你好吗",
    "我很好!!!",
    "“你好”，他说。",
    "「你好」",
    "你好，汤姆！",
    "  我很好 。  ",
    "我\t很好。",
    "你好吗？？",
    # mixed ASCII words (lower-cased by normalize; some are in the vocabulary, some not)
    "我有一台iPad。",
    "汤姆在用Facebook。",
    "Tom在哪里？",
    "TOM很高兴。",
    "我的WiFi坏了。",
    "Ｔｏｍ在哪里？",
    # characters the vocabulary does not know (dropped, counted as unknown)
    "我喜欢🍎。",
    "hello，汤姆！",
    "鑫鑫在哪里？",
    "🍎🍎",
    # longer
    "汤姆说他明天不会来学校，因为他生病了。",
    "我昨天在图书馆看了一本很有意思的书，但是我忘了它的名字。",
    "如果明天下雨，我们就不去公园了。",
]


def load_reference(source: Path) -> Any:
    """Import the wheel's ``model.py`` as a module, stubbing matplotlib if it is not installed."""
    try:
        import matplotlib.pyplot  # noqa: F401  (model.py imports it at module level)
    except ImportError:
        stub = types.ModuleType("matplotlib")
        stub.pyplot = types.ModuleType("matplotlib.pyplot")  # type: ignore[attr-defined]
        sys.modules.setdefault("matplotlib", stub)
        sys.modules.setdefault("matplotlib.pyplot", stub.pyplot)  # type: ignore[attr-defined]
    spec = importlib.util.spec_from_file_location("cn2en_reference_model", source / "model.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {source / 'model.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record(ref: Any, model: Any, text: str) -> dict[str, Any]:
    tensors = ref.tensorsFromSentence(model.input_lang, ref.normalize(text))
    target_ids = ref.translate(tensors, model.encoder, model.decoder)
    return {
        "text": text,
        "source_ids": [int(t.item()) for t in tensors],
        "target_ids": [int(i) for i in target_ids],
        "reference_text": model.translate(text),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="directory holding cn2en's model.py")
    parser.add_argument("--output", type=Path, default=GOLDEN)
    args = parser.parse_args(argv)

    ref = load_reference(args.source)
    model = ref.Model()
    model.encoder.eval()
    model.decoder.eval()
    records = [record(ref, model, text) for text in SENTENCES]
    # one record per line: reviewable diffs when the set changes
    lines = ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in records)
    args.output.write_text("[\n" + lines + "\n]\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.output}")


if __name__ == "__main__":
    main()
