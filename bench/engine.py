"""Engine benchmark: liuyi vs a bare ONNX Runtime loop, transformers and CTranslate2, side by side.

All engines run the same random-weight model with opus-mt-zh-en's architecture (vocab 65001,
d_model 512, 6+6 layers, 8 heads, ffn 2048; built offline by decoding.export.synthetic), the same
source sentences and a fixed output length (min = max new tokens), so only speed differs. Each
measurement runs in its own process (clean threads, honest peak RSS); the orchestrator prints a
Markdown table and the ratios the performance issue asks for.

    python bench/engine.py                      # everything (~10 minutes on 2 cores)
    python bench/engine.py --quick              # fewer repeats and configurations
    python bench/engine.py --model nllb-600M    # NLLB-200-distilled-600M's shape (random weights, ~2.4 GB)
    python bench/engine.py --model m2m100-418M  # M2M100-418M's shape (random weights, ~1.9 GB)
    python bench/engine.py --worker liuyi ...   # one measurement, JSON on stdout (used internally)

Needs the [bench] extra (ctranslate2) besides [export].
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._engine_workers import WORKERS
from bench._machine import machine_report, peak_rss_mb, run_sampled
from bench._models import MODELS, OUT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=64, help="output tokens per sequence (fixed)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--model", choices=sorted(MODELS), default="opus-mt", help="the shape measured")
    parser.add_argument("--out", type=Path, help="report file (default: bench/out/engine[-MODEL].md)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = WORKERS[args.worker](json.loads(args.config), args.tokens)
        result["peak_rss_mb"] = peak_rss_mb()  # VmHWM: this process only (see bench/_machine.py)
        print(json.dumps(result))
        return 0
    return orchestrate(args)


# ---------------------------------------------------------------------------------------------
# orchestration


def run_worker(name: str, config: dict[str, Any], tokens: int) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--worker",
        name,
        "--config",
        json.dumps(config),
        "--tokens",
        str(tokens),
    ]
    worker = run_sampled(command)
    if worker.returncode != 0:
        raise RuntimeError(f"{name} {config} failed:\n{worker.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(worker.stdout.strip().splitlines()[-1])
    result["sampled_rss_mb"] = worker.sampled_rss_mb  # from outside: cross-checks the worker's VmHWM
    return result


def orchestrate(args: argparse.Namespace) -> int:
    repeats = 3 if args.quick else 5
    rounds = 1 if args.quick else 3
    threads = [1, 2]
    model = args.model
    out: Path = args.out or OUT / ("engine.md" if model == "opus-mt" else f"engine-{model}.md")
    MODELS[model][1](int8=False)
    MODELS[model][1](int8=True)  # build once, before timing anything
    concurrency = [1, 4, 8, 16, 32]
    jobs: list[tuple[str, str, dict[str, Any]]] = [
        *(
            (
                f"liuyi int8, {t} thread(s)",
                "liuyi",
                {"int8": True, "threads": t, "concurrency": concurrency, "agreement_with": "fp32"},
            )
            for t in threads
        ),
        (
            "liuyi fp32, 2 threads",
            "liuyi",
            {"int8": False, "threads": 2, "concurrency": [16], "agreement_with": "int8"},
        ),
        *(
            (f"bare onnxruntime loop int8, {t} thread(s)", "ort", {"int8": True, "threads": t})
            for t in threads
        ),
        *(
            (f"CTranslate2 {ct}, {t} thread(s)", "ct2", {"compute_type": ct, "threads": t})
            for ct in ("int8", "float32")
            for t in threads
        ),
        *((f"transformers PyTorch fp32, {t} thread(s)", "hf", {"threads": t}) for t in threads),
    ]
    # The machine is shared and noisy in bursts: every configuration is measured in each of several
    # rounds, interleaved with the others, and the median over rounds is reported.
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in jobs}
    for round_number in range(rounds):
        for label, worker, config in jobs:
            print(f"round {round_number + 1}/{rounds}: {label} ...", file=sys.stderr, flush=True)
            runs[label].append(
                run_worker(worker, {"repeats": repeats, "model": model, **config}, args.tokens)
            )
    rows = [(label, _median_of(results)) for label, results in runs.items()]
    by_label = dict(rows)
    liuyi = {t: by_label[f"liuyi int8, {t} thread(s)"] for t in threads}
    liuyi_fp32 = by_label["liuyi fp32, 2 threads"]
    ort = {t: by_label[f"bare onnxruntime loop int8, {t} thread(s)"] for t in threads}
    ct2 = {
        (ct, t): by_label[f"CTranslate2 {ct}, {t} thread(s)"] for ct in ("int8", "float32") for t in threads
    }
    hf = {t: by_label[f"transformers PyTorch fp32, {t} thread(s)"] for t in threads}

    best_t = min(threads, key=lambda t: liuyi[t]["batch1"]["ms_per_token"])
    ours = liuyi[best_t]
    ct2_int8 = max((ct2[("int8", t)] for t in threads), key=lambda r: r["batch1"]["tokens_per_s"])
    ct2_batch = max(ct2[("int8", t)]["batch16_tokens_per_s"] for t in threads)
    hf_best = max((hf[t] for t in threads), key=lambda r: r["batch1"]["tokens_per_s"])
    agreement = _agreement(ours["ids"], liuyi_fp32["ids"])

    lines = [
        machine_report(),
        "",
        "| engine | TTFT ms | ms/token | tokens/s (batch 1) | batch-16 tokens/s | peak RSS MB "
        "(VmHWM / sampled) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, result in rows:
        b1 = result["batch1"]
        batch16 = result.get("batch16_tokens_per_s") or result.get("concurrency", {}).get("16", {}).get(
            "tokens_per_s"
        )
        lines.append(
            f"| {label} | {b1['ttft_ms']:.1f} | {b1['ms_per_token']:.2f} | {b1['tokens_per_s']:.0f} | "
            f"{f'{batch16:.0f}' if batch16 else '—'} | "
            f"{result['peak_rss_mb']:.0f} / {result['sampled_rss_mb']:.0f} |"
        )
    lines += [
        "",
        f"liuyi int8 concurrent streams ({best_t} thread(s)): | streams | tokens/s | ms/token per stream |",
        "|---:|---:|---:|",
    ]
    for streams, values in ours["concurrency"].items():
        lines.append(
            f"| {streams} | {values['tokens_per_s']:.0f} | {values['ms_per_token_per_stream']:.2f} |"
        )
    single = ours["concurrency"]["1"]["tokens_per_s"]
    ratios = [
        (
            "liuyi / bare ORT loop, ms/token (target <= 1.15)",
            ours["batch1"]["ms_per_token"] / ort[best_t]["batch1"]["ms_per_token"],
        ),
        (
            "liuyi / CTranslate2 int8, batch-1 tokens/s (target >= 2.0)",
            ours["batch1"]["tokens_per_s"] / ct2_int8["batch1"]["tokens_per_s"],
        ),
        (
            "liuyi / transformers, batch-1 tokens/s (target >= 5)",
            ours["batch1"]["tokens_per_s"] / hf_best["batch1"]["tokens_per_s"],
        ),
        *(
            (
                f"liuyi TTFT ms, {ours['source_tokens']:.0f}-token source, {t} thread(s) (target <= 10)",
                liuyi[t]["batch1"]["ttft_ms"],
            )
            for t in threads
        ),
        (
            "liuyi 16 streams / 1 stream, tokens/s (target >= 4)",
            ours["concurrency"]["16"]["tokens_per_s"] / single,
        ),
        (
            "liuyi 16 streams / CTranslate2 int8 batch of 16 (target >= 2.0)",
            ours["concurrency"]["16"]["tokens_per_s"] / ct2_batch,
        ),
        ("int8 vs fp32 token agreement (16 sentences, %)", agreement),
    ]
    lines += ["", "| ratio | value |", "|---|---:|"] + [f"| {name} | {value:.2f} |" for name, value in ratios]
    report = "\n".join(lines)
    print(report)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({label: result for label, result in rows}, indent=1))
    command = f"python bench/engine.py --tokens {args.tokens}{' --quick' if args.quick else ''}"
    out.write_text(
        f"`{command}{f' --model {model}' if model != 'opus-mt' else ''}` "
        f"(median of {rounds} interleaved rounds x {repeats} runs per configuration)\n\n" + report + "\n",
        encoding="utf-8",
    )
    return 0


def _median_of(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-metric median over rounds (peak RSS: the maximum; token ids: the first round's)."""
    merged: dict[str, Any] = {}
    for key, first in results[0].items():
        values = [result[key] for result in results]
        if isinstance(first, dict):
            merged[key] = _median_of(values)
        elif key in ("peak_rss_mb", "sampled_rss_mb"):
            merged[key] = max(values)
        elif isinstance(first, int | float):
            merged[key] = statistics.median(values)
        else:
            merged[key] = first
    return merged


def _agreement(a: list[list[int]], b: list[list[int]]) -> float:
    """Percentage of positions where two greedy outputs agree, up to the shorter one's length."""
    same = total = 0
    for x, y in zip(a, b, strict=True):
        n = min(len(x), len(y))
        same += sum(1 for i in range(n) if x[i] == y[i])
        total += max(len(x), len(y))
    return 100.0 * same / total


if __name__ == "__main__":
    sys.exit(main())
