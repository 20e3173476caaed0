"""Engine benchmark: liuyi vs a bare ONNX Runtime loop, transformers and CTranslate2, side by side.

All engines run the same random-weight model with opus-mt-zh-en's architecture (vocab 65001,
d_model 512, 6+6 layers, 8 heads, ffn 2048; built offline by decoding.export.synthetic), the same
source sentences and a fixed output length (min = max new tokens), so only speed differs. Each
measurement runs in its own process (clean threads, honest peak RSS); the orchestrator prints a
Markdown table and the ratios the performance issue asks for.

    python bench/engine.py                      # everything (~10 minutes on 2 cores)
    python bench/engine.py --quick              # fewer repeats and configurations
    python bench/engine.py --model nllb-600M    # NLLB-200-distilled-600M's shape (random weights, ~2.4 GB)
    python bench/engine.py --worker liuyi ...   # one measurement, JSON on stdout (used internally)

Needs the [bench] extra (ctranslate2) besides [export].
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._machine import RssSampler, machine_report, peak_rss_mb
from bench._models import MODELS, OUT, reference
from decoding.export.synthetic import CORPUS

# 24 tokens with the benchmark tokenizer (eos included): the TTFT target's sentence.
TTFT_SENTENCE = "周末我们去公园散步，然后一起去喝茶吧！"
BATCH_SENTENCES = CORPUS[1:17]  # 16 short everyday Chinese sentences


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
# workers: each measures one engine configuration and returns a dict


def _timed_stream(step_times: list[float]) -> dict[str, float]:
    """step_times: absolute perf_counter timestamps, [start, token1, token2, ...]."""
    start, first, last = step_times[0], step_times[1], step_times[-1]
    tokens = len(step_times) - 1
    per_token = (last - first) / (tokens - 1) * 1000
    return {"ttft_ms": (first - start) * 1000, "ms_per_token": per_token, "tokens_per_s": 1000 / per_token}


def _best(runs: list[dict[str, float]]) -> dict[str, float]:
    """Median of each metric over repeated runs (the first run is a warm-up and is dropped)."""
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def liuyi_worker(config: dict[str, Any], tokens: int) -> dict[str, Any]:
    """The whole engine: Translation (tokenizer, detokenizer, timings) through the BatchScheduler."""
    import threading

    from decoding import (
        BatchScheduler,
        DecodeOptions,
        LoadOptions,
        Result,
        RuntimeOptions,
        Translation,
        load_bundle,
    )

    bundle = load_bundle(
        MODELS[config["model"]][1](int8=config["int8"]),
        options=LoadOptions(
            runtime=RuntimeOptions(intra_op_num_threads=config["threads"], shared_thread_pool=True),
            verify_checksums=False,
        ),
    )
    options = DecodeOptions(max_new_tokens=tokens, min_new_tokens=tokens)
    scheduler = BatchScheduler(bundle, max_batch_size=64, max_queue=0)
    result: dict[str, Any] = {"source_tokens": len(bundle.tokenizer.encode(TTFT_SENTENCE).ids)}
    try:
        runs = []
        for _ in range(config["repeats"] + 1):
            stamps: list[float] = []
            done = threading.Event()

            def on_event(event: object, stamps: list[float] = stamps, done: threading.Event = done) -> None:
                stamps.append(time.perf_counter())
                if isinstance(event, Result):
                    done.set()

            translation = Translation(bundle, TTFT_SENTENCE, options=options)
            start = time.perf_counter()
            scheduler.submit(translation, on_event)
            done.wait()
            assert translation.result is not None and translation.result.output_tokens == tokens
            t = translation.result.timings
            runs.append(
                {
                    "ttft_ms": t.first_token_ms,
                    "ms_per_token": (t.total_ms - t.first_token_ms) / (tokens - 1),
                    "tokens_per_s": (tokens - 1) / ((t.total_ms - t.first_token_ms) / 1000),
                    "wall_ms": (stamps[-1] - start) * 1000,
                }
            )
        result["batch1"] = _best(runs[1:])
        result["concurrency"] = {}
        for streams in config["concurrency"]:
            texts = [BATCH_SENTENCES[i % len(BATCH_SENTENCES)] for i in range(streams)]
            walls = []
            for _ in range(max(2, config["repeats"] // 2) + 1):
                translations = [Translation(bundle, text, options=options) for text in texts]
                remaining = threading.Semaphore(0)

                def finished(event: object, remaining: threading.Semaphore = remaining) -> None:
                    if isinstance(event, Result):
                        remaining.release()

                start = time.perf_counter()
                for translation in translations:
                    scheduler.submit(translation, finished)
                for _ in translations:
                    remaining.acquire()
                walls.append(time.perf_counter() - start)
            wall = statistics.median(walls[1:])
            result["concurrency"][str(streams)] = {
                "tokens_per_s": streams * tokens / wall,
                "ms_per_token_per_stream": wall * 1000 / tokens,
            }
        if config.get("agreement_with"):
            result["ids"] = _ids(bundle, tokens)
    finally:
        scheduler.close()
    return result


def _ids(bundle: Any, tokens: int) -> list[list[int]]:
    from decoding import DecodeOptions

    options = DecodeOptions(max_new_tokens=tokens)
    return [list(bundle.translate(text, options=options).segments[0].token_ids) for text in BATCH_SENTENCES]


def ort_bare_worker(config: dict[str, Any], tokens: int) -> dict[str, Any]:
    """The least a Python ONNX Runtime greedy loop can do on the same bundle: encoder once, then one
    decoder call per token with the caches bound in place, top-1 read from the graph. No tokenizer
    at decode time, no detokenizer, no scheduler, no batching bookkeeping."""
    import numpy as np
    import onnxruntime as ort

    from decoding import LoadOptions, RuntimeOptions, load_bundle

    bundle = load_bundle(
        MODELS[config["model"]][1](int8=config["int8"]),
        options=LoadOptions(
            runtime=RuntimeOptions(intra_op_num_threads=config["threads"], shared_thread_pool=True),
            verify_checksums=False,
        ),
    )
    m, graphs = bundle.manifest, bundle.graphs
    source = np.asarray([bundle.tokenizer.encode(TTFT_SENTENCE).ids], dtype=np.int64)
    cross_names = list(m.encoder.outputs)
    dims = graphs.input_dims(m.decoder.state[0].input)
    runs = []
    for _ in range(config["repeats"] + 1):
        stamps = [time.perf_counter()]
        cross = graphs.encoder.run(cross_names, {"input_ids": source, "attention_mask": np.ones_like(source)})
        token = np.full((1, 1), m.tokens.decoder_start, dtype=np.int64)
        position = np.zeros((1, 1), dtype=np.int64)
        top = np.zeros((1, 2), dtype=np.int64)
        io = graphs.new_binding()
        keep = [token, position, top]
        for name, value in [
            ("input_ids", token),
            ("position_ids", position),
            ("source_attention_mask", np.ones_like(source)),
            *zip(cross_names, cross, strict=True),
        ]:
            keep.append(value)
            io.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value))
        for state in m.decoder.state:  # caches big enough for the whole output
            cache = np.zeros((1, dims[1], tokens, dims[3]), dtype=np.float32)
            keep.append(cache)
            value = ort.OrtValue.ortvalue_from_numpy(cache)
            io.bind_ortvalue_input(state.input, value)
            io.bind_ortvalue_output(state.output, value)
        io.bind_ortvalue_output(m.decoder.top_ids, ort.OrtValue.ortvalue_from_numpy(top))
        for step in range(tokens):
            graphs.decoder.run_with_iobinding(io)
            token[0, 0] = top[0, 0] if top[0, 0] != m.tokens.eos else top[0, 1]
            position[0, 0] = step + 1
            stamps.append(time.perf_counter())
        runs.append(_timed_stream(stamps))
    return {"batch1": _best(runs[1:])}


def hf_worker(config: dict[str, Any], tokens: int) -> dict[str, Any]:
    import warnings

    import torch
    from transformers.generation.streamers import BaseStreamer

    warnings.simplefilter("ignore")
    torch.set_num_threads(config["threads"])
    model, tokenizer, extra, _ = reference(config["model"])

    class Stamps(BaseStreamer):  # type: ignore[misc]
        def __init__(self) -> None:
            self.times: list[float] = []

        def put(self, value: Any) -> None:
            self.times.append(time.perf_counter())

        def end(self) -> None:
            pass

    runs = []
    inputs = tokenizer(TTFT_SENTENCE, return_tensors="pt")
    for _ in range(config["repeats"] + 1):
        streamer = Stamps()
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(
                **inputs,
                num_beams=1,
                do_sample=False,
                max_new_tokens=tokens,
                min_new_tokens=tokens,
                streamer=streamer,
                **extra,
            )
        runs.append(_timed_stream([start, *streamer.times[1:]]))  # put() #0 is the decoder start token
    batch = tokenizer(BATCH_SENTENCES, return_tensors="pt", padding=True)
    start = time.perf_counter()
    with torch.no_grad():
        model.generate(
            **batch, num_beams=1, do_sample=False, max_new_tokens=tokens, min_new_tokens=tokens, **extra
        )
    wall = time.perf_counter() - start
    return {"batch1": _best(runs[1:]), "batch16_tokens_per_s": len(BATCH_SENTENCES) * tokens / wall}


def ct2_worker(config: dict[str, Any], tokens: int) -> dict[str, Any]:
    import ctranslate2

    model_dir = OUT / f"ct2-{config['model']}-random"
    if not (model_dir / "model.bin").is_file():
        ctranslate2.converters.TransformersConverter(str(MODELS[config["model"]][0]())).convert(
            str(model_dir), force=True
        )
    _, tokenizer, _, prefix = reference(config["model"])

    def pieces(text: str) -> list[str]:
        return tokenizer.convert_ids_to_tokens(tokenizer(text).input_ids)

    translator = ctranslate2.Translator(
        str(model_dir),
        device="cpu",
        compute_type=config["compute_type"],
        intra_threads=config["threads"],
        inter_threads=1,
    )
    source = pieces(TTFT_SENTENCE)
    runs = []
    for _ in range(config["repeats"] + 1):
        stamps = [time.perf_counter()]
        for _step in translator.generate_tokens(
            source, prefix, max_decoding_length=tokens, min_decoding_length=tokens, sampling_topk=1
        ):
            stamps.append(time.perf_counter())
        runs.append(_timed_stream(stamps))
    batch = [pieces(text) for text in BATCH_SENTENCES]
    walls = []
    for _ in range(3):
        start = time.perf_counter()
        translator.translate_batch(
            batch,
            [prefix] * len(batch) if prefix else None,
            beam_size=1,
            max_decoding_length=tokens,
            min_decoding_length=tokens,
        )
        walls.append(time.perf_counter() - start)
    return {"batch1": _best(runs[1:]), "batch16_tokens_per_s": len(batch) * tokens / statistics.median(walls)}


WORKERS = {"liuyi": liuyi_worker, "ort": ort_bare_worker, "hf": hf_worker, "ct2": ct2_worker}


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
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as worker:
        sampler = RssSampler(worker.pid)
        stdout, stderr = worker.communicate()
        sampled = sampler.stop()
    if worker.returncode != 0:
        raise RuntimeError(f"{name} {config} failed:\n{stderr[-3000:]}")
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    result["sampled_rss_mb"] = sampled  # polled from outside: cross-checks the worker's own VmHWM
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
