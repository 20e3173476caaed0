"""How liuyi creates ONNX Runtime sessions (one place, so every graph runs with the same options)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import onnxruntime

from ._errors import BundleError


@dataclass(frozen=True, kw_only=True)
class RuntimeOptions:
    # Threads one graph call may use. 1 keeps concurrent streams from fighting over 2 cores;
    # raise it for lowest single-stream latency on a bigger machine. 0 lets ONNX Runtime decide.
    intra_op_num_threads: int = 1
    # Parallel branches inside one graph; our graphs are a single chain, so more only costs threads.
    inter_op_num_threads: int = 1
    # Fuse and constant-fold everything ONNX Runtime knows (LayerNorm, GELU/SiLU, MatMul+Add, ...).
    optimization_level: str = "all"  # "disable" | "basic" | "extended" | "all"
    # Reuse freed buffers between calls instead of returning them to the OS.
    enable_memory_arena: bool = True
    # Memory-pattern planning pays off only for fixed shapes; ours change every step.
    enable_memory_pattern: bool = False


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
    # Spinning threads burn the other core while a stream waits for its next step; don't.
    session_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session_options.log_severity_level = 3
    try:
        return onnxruntime.InferenceSession(
            os.fspath(path), session_options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own untyped errors for broken graphs
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BundleError(bundle, f"cannot load ONNX graph: {first_line}", file=path.name) from None
