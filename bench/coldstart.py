"""Cold start and memory per replica: time from ``liuyi serve`` to a ready /readyz, and the RSS.

For each bundle, ``--rounds`` times, in turn: start ``python -m server serve --model BUNDLE`` as a
subprocess, poll ``/readyz`` every 10 ms, then read the server's ``VmRSS`` (resident now), ``VmHWM``
(peak since exec, so nothing of this script counts) and how much of the RSS is file-backed
(``RssFile``: pages of mapped files, shared with the page cache) or anonymous (``RssAnon``:
the process's own copies), then stop it. One translation is sent before RSS is read, so the
numbers are those of a replica that has served.

``--phases`` also splits the start in a fresh process: imports, manifest (with the checksums the
server verifies), tokenizer, ONNX sessions, warm-up — so a reader sees where the time goes.

``--external-data`` adds, for each bundle, a copy whose graphs keep their weights in a separate
file (ONNX external data; the manifest lists and checksums it) and measures both side by side.
ONNX Runtime memory-maps external initializers instead of copying them out of the parsed model,
so the weights it does not repack are never duplicated in the process's own memory.

The page cache is warm (each bundle is started once before timing): this is a replica restarting
on a node that has the model on disk, not a first download.

    python bench/coldstart.py                                          # bundled model
    python bench/coldstart.py --model bench/out/opus-mt-zh-en-random-int8-bundle --phases
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._loadgen import progress
from bench._machine import machine_report

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, action="append", help="bundle (repeatable; default: bundled)")
    parser.add_argument("--rounds", type=int, default=3, help="starts per bundle (medians)")
    parser.add_argument("--threads", type=int, default=1, help="the server's ONNX Runtime threads")
    parser.add_argument("--port", type=int, default=8795)
    parser.add_argument("--phases", action="store_true", help="also time each phase of a start in-process")
    parser.add_argument(
        "--external-data", action="store_true", help="also measure a copy with the weights as external data"
    )
    parser.add_argument("--out", type=Path, default=OUT / "coldstart.md")
    parser.add_argument("--phase-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase_worker:
        print(json.dumps(phase_worker(Path(args.phase_worker), args.threads)))
        return 0
    from decoding import bundled_models

    models = list(args.model or bundled_models()[:1])
    if args.external_data:
        models = [variant for model in models for variant in (model, external_data_copy(model))]
    machine = machine_report()
    progress(machine)
    for model in models:  # warm the page cache: every timed start reads the files from memory
        start_once(model, args)
    starts: dict[Path, list[dict[str, float]]] = {model: [] for model in models}
    for round_number in range(1, args.rounds + 1):
        for model in models:  # interleaved: the machine's noise hits every bundle alike
            result = start_once(model, args)
            starts[model].append(result)
            progress(f"round {round_number}/{args.rounds}, {model.name}: ready in {result['ready_s']:.2f} s")
    phases = {model: run_phases(model, args.threads) for model in models} if args.phases else {}
    report = render(args, machine, starts, phases)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    print(report)
    return 0


def start_once(model: Path, args: argparse.Namespace) -> dict[str, float]:
    """One ``liuyi serve`` from exec to ready; its memory after one translation."""
    env = {
        **os.environ,
        "LIUYI_PORT": str(args.port),
        "LIUYI_HOST": "127.0.0.1",
        "LIUYI_LOG_LEVEL": "warning",
        "LIUYI_THREADS": str(args.threads),
    }
    url = f"http://127.0.0.1:{args.port}"
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "server", "serve", "--model", str(model)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(timeout=1) as client:
            while True:
                try:
                    if client.get(f"{url}/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if process.poll() is not None or time.perf_counter() - started > 300:
                    raise RuntimeError(f"{model}: the server did not become ready")
                time.sleep(0.01)
            ready = time.perf_counter() - started
            source = json.loads((model / "manifest.json").read_text())["source_lang"]
            text = "今天天气很好，我们去公园散步吧。" if source == "zh" else "The weather is nice today."
            client.post(f"{url}/v1/translate", json={"text": text}, timeout=60).raise_for_status()
        memory = status(process.pid)
    finally:
        process.terminate()
        process.wait(30)
    return {"ready_s": ready, **memory}


def external_data_copy(bundle: Path) -> Path:
    """``bundle`` with each graph's initializers moved to ``<graph>.data`` (made once, in bench/out)."""
    import hashlib
    import shutil

    import onnx

    copy = OUT / f"{bundle.name}-external-data"
    if (copy / "manifest.json").is_file():
        return copy
    progress(f"writing {copy.name}")
    partial = copy.with_name(copy.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    manifest = json.loads((bundle / "manifest.json").read_text())
    for name in list(manifest["files"]):
        if not name.endswith(".onnx"):
            shutil.copy(bundle / name, partial / name)
            continue
        graph = onnx.load(str(bundle / name))
        onnx.save_model(graph, str(partial / name), save_as_external_data=True, location=name + ".data")
        del graph
        for written in (name, name + ".data"):
            digest = hashlib.sha256((partial / written).read_bytes()).hexdigest()
            manifest["files"][written] = {"sha256": digest, "bytes": (partial / written).stat().st_size}
    (partial / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
    partial.rename(copy)
    return copy


def status(pid: int | str = "self") -> dict[str, float]:
    """FIELDS of /proc/PID/status, in MB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in FIELDS:
            values[key] = int(value.split()[0]) / 1024
    return values


def run_phases(model: Path, threads: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--phase-worker", str(model), "--threads", str(threads)]
    output = subprocess.run(command, check=True, stdout=subprocess.PIPE, cwd=ROOT).stdout
    result: dict[str, float] = json.loads(output.splitlines()[-1])
    return result


def phase_worker(model: Path, threads: int) -> dict[str, Any]:
    """What a server's start does, step by step, timed in a fresh process (seconds, and MB)."""
    clock = time.perf_counter()
    phases: dict[str, Any] = {}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[name] = now - clock
        phases[f"{name}_rss_mb"] = status()["VmRSS"]
        clock = now

    import server._app  # noqa: F401  (everything `liuyi serve` imports)
    from decoding import Bundle, LoadOptions, RuntimeOptions, Seq2SeqGraphs, load_manifest
    from decoding.tokenizers import load_tokenizer

    lap("imports")
    manifest = load_manifest(model, verify_checksums=True)
    lap("manifest and checksums")
    tokenizer = load_tokenizer(model, manifest.tokenizer, manifest.tokens).for_direction(
        manifest.source_lang, manifest.target_lang
    )
    lap("tokenizer")
    runtime = RuntimeOptions(intra_op_num_threads=threads, shared_thread_pool=True)
    graphs = Seq2SeqGraphs(model, manifest, runtime)
    lap("ONNX sessions")
    Bundle(model, manifest, tokenizer, graphs, LoadOptions(runtime=runtime)).warm_up()
    lap("warm-up")
    return phases


def render(
    args: argparse.Namespace,
    machine: str,
    starts: dict[Path, list[dict[str, float]]],
    phases: dict[Path, dict[str, float]],
) -> str:
    command = ("python bench/coldstart.py " + " ".join(sys.argv[1:])).strip()
    lines = [
        machine,
        "",
        f"`{command}` — {args.threads} ONNX Runtime thread(s), medians of {args.rounds} starts per bundle "
        "(interleaved), page cache warm; RSS read after /readyz and one translation.",
        "",
        "| bundle | files MB | `liuyi serve` → /readyz s | RSS MB | peak RSS (VmHWM) MB | "
        "of RSS: anonymous / file-backed MB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for model, runs in starts.items():
        median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        size = sum(f.stat().st_size for f in model.iterdir() if f.is_file()) / 2**20
        lines.append(
            f"| `{model.name}` | {size:.0f} | {median['ready_s']:.2f} | {median['VmRSS']:.0f} | "
            f"{median['VmHWM']:.0f} | {median['RssAnon']:.0f} / {median['RssFile']:.0f} |"
        )
    if phases:
        names = [name for name in next(iter(phases.values())) if not name.endswith("_rss_mb")]
        lines += [
            "",
            "Where a start goes (one fresh process per bundle; seconds, RSS after the phase in MB):",
            "",
            "| bundle | " + " | ".join(names) + " |",
            "|---|" + "---:|" * len(names),
        ]
        for model, timed in phases.items():
            cells = [f"{timed[name]:.2f} s ({timed[name + '_rss_mb']:.0f} MB)" for name in names]
            lines.append(f"| `{model.name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
