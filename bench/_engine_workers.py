"""bench/engine.py's workers: each measures one engine configuration in its own process and
returns a dict (TTFT and ms/token at batch 1, tokens/s for 16 sentences at once). The engines run
the same model, sentences and fixed output length, so only speed differs.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench._models import MODELS, OUT, load_for_bench, reference
from decoding.export.synthetic import CORPUS

# 24 tokens with the benchmark tokenizer (eos included): the TTFT target's sentence.
TTFT_SENTENCE = "周末我们去公园散步，然后一起去喝茶吧！"
BATCH_SENTENCES = CORPUS[1:17]  # 16 short everyday Chinese sentences


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
        Result,
        Translation,
    )

    bundle = load_for_bench(MODELS[config["model"]][1](int8=config["int8"]), config["threads"])
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

    bundle = load_for_bench(MODELS[config["model"]][1](int8=config["int8"]), config["threads"])
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
