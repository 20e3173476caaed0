"""How liuyi creates ONNX Runtime sessions (one place, so every graph runs with the same options)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import onnxruntime

from ._errors import BundleError


@dataclass(frozen=True, kw_only=True)
class RuntimeOptions:
    # Threads one graph call may use. Decoding is bound by reading the weights once per step, so
    # each core added reads its share in parallel: on 2 cores, 2 threads cut ms/token by ~20% at
    # batch 1 and more for batches. 0 lets ONNX Runtime decide (all physical cores).
    intra_op_num_threads: int = 1
    # Parallel branches inside one graph; our graphs are a single chain, so more only costs threads.
    inter_op_num_threads: int = 1
    # Fuse and constant-fold everything ONNX Runtime knows (LayerNorm, GELU/SiLU, MatMul+Add, ...).
    optimization_level: str = "all"  # "disable" | "basic" | "extended" | "all"
    # Reuse freed buffers between calls instead of returning them to the OS.
    enable_memory_arena: bool = True
    # Memory-pattern planning pays off only for fixed shapes; ours change every step.
    enable_memory_pattern: bool = False
    # With several threads, let idle workers spin briefly instead of sleeping between the ~100
    # small kernels of a decoder step (waking a sleeping thread costs more than the kernel).
    allow_spinning: bool = True


_LEVELS = {
    "disable": onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def create_session(path: Path, options: RuntimeOptions, *, bundle: Path) -> onnxruntime.InferenceSession:
    """Open one graph. Sessions are safe to share between threads: ``run`` may be called concurrently.

    Raises:
        BundleError: the file is not a loadable ONNX graph.
    """
    session_options = onnxruntime.SessionOptions()
    session_options.intra_op_num_threads = options.intra_op_num_threads
    session_options.inter_op_num_threads = options.inter_op_num_threads
    session_options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    session_options.graph_optimization_level = _LEVELS[options.optimization_level]
    session_options.enable_cpu_mem_arena = options.enable_memory_arena
    session_options.enable_mem_pattern = options.enable_memory_pattern
    session_options.add_session_config_entry(
        "session.intra_op.allow_spinning", "1" if options.allow_spinning else "0"
    )
    session_options.log_severity_level = 3
    try:
        return onnxruntime.InferenceSession(
            os.fspath(path), session_options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own untyped errors for broken graphs
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BundleError(bundle, f"cannot load ONNX graph: {first_line}", file=path.name) from None
