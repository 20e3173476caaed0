"""Peak memory and time of ``--int8`` conversion: the streaming quantizer against onnxruntime's.

Each round converts the same checkpoint twice with ``--int8``, each time in a fresh subprocess
(``convert_checkpoint(..., int8=True)``), once with liuyi's streaming quantizer
(``decoding/export/_quantize.py``) and once with onnxruntime's whole-model ``quantize_dynamic``
(``decoding/export/_quantize_reference.py``, what liuyi used before); the order alternates between
rounds. Reported per run: wall time, the converting process's peak RSS (``VmHWM``, which belongs to
the process's own address space: see bench/_machine.py), the peak RSS of the quantization step
alone (``VmHWM`` reset through ``/proc/self/clear_refs`` before it starts; the RSS at that moment,
what the float32 part left, is printed too: the quantizer's own memory is the difference) and
``VmRSS`` polled from outside as a cross-check. The float32 part of the conversion is the same code in both.

    python bench/convert_memory.py --checkpoint bench/out/opus-mt-zh-en-random --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._machine import machine_report, peak_rss_mb, run_sampled

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
QUANTIZERS = ("streaming", "onnxruntime")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--checkpoint", type=Path, default=OUT / "opus-mt-zh-en-random", help="checkpoint dir"
    )
    parser.add_argument("--rounds", type=int, default=1, help="conversions per quantizer, interleaved")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()), help="where bundles go")
    parser.add_argument("--out", type=Path, default=OUT / "convert_memory.md", help="the report")
    parser.add_argument("--worker", choices=QUANTIZERS, help=argparse.SUPPRESS)
    parser.add_argument("--dest", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(convert_once(args.checkpoint, args.dest, args.worker)))
        return 0

    machine = machine_report()
    args.work.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in QUANTIZERS}
    for round_ in range(args.rounds):
        order = QUANTIZERS if round_ % 2 == 0 else QUANTIZERS[::-1]
        for quantizer in order:
            runs[quantizer].append(run_worker(args.checkpoint, args.work, quantizer))
            print(f"round {round_ + 1} {quantizer}: {runs[quantizer][-1]}", file=sys.stderr)
    report = render(machine, args, runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    print(report)
    return 0


def run_worker(checkpoint: Path, work: Path, quantizer: str) -> dict[str, float]:
    """One conversion in a fresh interpreter; its output bundle is removed afterwards."""
    dest = Path(tempfile.mkdtemp(prefix=f"convert-{quantizer}-", dir=work)) / "bundle"
    command = [
        sys.executable,
        __file__,
        "--worker",
        quantizer,
        "--checkpoint",
        str(checkpoint),
        "--dest",
        str(dest),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        worker = run_sampled(command, env=env, cwd=ROOT)
        if worker.returncode != 0:
            raise SystemExit(
                f"{quantizer} conversion failed (exit {worker.returncode}):\n{worker.stderr[-3000:]}"
            )
        result: dict[str, float] = json.loads(worker.stdout.strip().splitlines()[-1])
        return {**result, "sampled_rss_mb": worker.sampled_rss_mb}
    finally:
        shutil.rmtree(dest.parent, ignore_errors=True)


def convert_once(checkpoint: Path, dest: Path, quantizer: str) -> dict[str, float]:
    """In the worker: convert with ``quantizer``; time and peak RSS, overall and of the int8 step."""
    import decoding.export._seq2seq as seq2seq
    from decoding.export import convert_checkpoint
    from decoding.export._quantize import quantize_graph
    from decoding.export._quantize_reference import quantize_graph_with_onnxruntime

    measured: dict[str, float] = {}
    quantize_one = quantize_graph if quantizer == "streaming" else quantize_graph_with_onnxruntime

    def measured_quantize(path: Path) -> str:
        if "float_peak_rss_mb" not in measured:  # the first graph: the float32 part is over
            measured["float_peak_rss_mb"] = peak_rss_mb()
            measured["quantize_start"] = time.perf_counter()
            measured["quantize_start_rss_mb"] = current_rss_mb()  # left by the float32 part
            measured["peak_reset"] = float(reset_peak_rss())
        return quantize_one(path)

    seq2seq.quantize_graph = measured_quantize  # type: ignore[attr-defined,assignment]  # what quantize_graphs calls
    start = time.perf_counter()
    convert_checkpoint(checkpoint, dest, int8=True)
    end = time.perf_counter()
    return {
        "wall_s": end - start,
        "quantize_s": end - measured["quantize_start"],  # the manifest written after it: milliseconds
        "peak_rss_mb": max(peak_rss_mb(), measured["float_peak_rss_mb"]),
        "quantize_peak_rss_mb": peak_rss_mb() if measured["peak_reset"] else float("nan"),
        "float_peak_rss_mb": measured["float_peak_rss_mb"],
        "quantize_start_rss_mb": measured["quantize_start_rss_mb"],
    }


def current_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak_rss() -> bool:
    """Start VmHWM again from the current RSS (Linux: ``5`` to ``/proc/self/clear_refs``)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def render(machine: str, args: argparse.Namespace, runs: dict[str, list[dict[str, float]]]) -> str:
    def mean(quantizer: str, key: str) -> float:
        values = [run[key] for run in runs[quantizer]]
        return sum(values) / len(values)

    rows = [
        ("peak RSS of the conversion (VmHWM), MB", "peak_rss_mb"),
        ("peak RSS during int8 quantization, MB", "quantize_peak_rss_mb"),
        ("RSS when int8 quantization starts, MB", "quantize_start_rss_mb"),
        ("peak RSS of the float32 part, MB", "float_peak_rss_mb"),
        ("VmRSS polled from outside, peak MB", "sampled_rss_mb"),
        ("wall time of the conversion, s", "wall_s"),
        ("wall time of the int8 quantization, s", "quantize_s"),
    ]
    lines = [
        f"# int8 conversion memory: {args.checkpoint.name}",
        "",
        machine,
        "",
        f"`python bench/convert_memory.py --checkpoint {args.checkpoint} --rounds {args.rounds}` "
        f"(means of {args.rounds} run(s) each, interleaved)",
        "",
        "| | streaming (liuyi) | onnxruntime quantize_dynamic | streaming ÷ onnxruntime |",
        "|---|---|---|---|",
    ]
    for label, key in rows:
        new, old = mean("streaming", key), mean("onnxruntime", key)
        lines.append(f"| {label} | {new:.1f} | {old:.1f} | {new / old:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
