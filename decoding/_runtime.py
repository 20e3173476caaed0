"""How liuyi creates ONNX Runtime sessions (one place, so every graph runs with the same options).

Thread pools, deliberately: by default every ONNX Runtime session owns a pool of worker threads, so a
model's encoder and decoder each keep threads spinning after their calls — and on a small machine
they take turns slowing each other down (24-token source, 2 threads: first token after 8.5–12.5 ms
with two pools, 6.5–7.5 ms with one). With ``shared_thread_pool`` every session of the process uses
one global pool instead. ONNX Runtime allows that pool to be created once per process, and once it
exists every later session must use it; this module remembers that, so callers never have to.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import onnxruntime

from ._errors import BundleError

logger = logging.getLogger("liuyi.runtime")


@dataclass(frozen=True, kw_only=True)
class RuntimeOptions:
    # Threads one graph call may use. Decoding is bound by reading the weights once per step, so
    # each core added reads its share in parallel: on 2 cores, 2 threads cut ms/token by ~25% at
    # batch 1 and more for batches. 0 lets ONNX Runtime decide (all physical cores).
    intra_op_num_threads: int = 1
    # Parallel branches inside one graph; our graphs are a single chain, so more only costs threads.
    inter_op_num_threads: int = 1
    # One pool of intra_op_num_threads threads for every session of the process (see module doc).
    shared_thread_pool: bool = False
    # Fuse and constant-fold everything ONNX Runtime knows (LayerNorm, GELU/SiLU, MatMul+Add, ...).
    optimization_level: str = "all"  # "disable" | "basic" | "extended" | "all"
    # Reuse freed buffers between calls instead of returning them to the OS.
    enable_memory_arena: bool = True
    # Memory-pattern planning pays off only for fixed shapes; ours change every step.
    enable_memory_pattern: bool = False
    # With several threads, let idle workers spin briefly instead of sleeping between the ~70
    # small kernels of a decoder step (waking a sleeping thread costs more than the kernel).
    # Per-session pools only: the shared pool always uses ONNX Runtime's default (spinning).
    allow_spinning: bool = True


_LEVELS = {
    "disable": onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


class _ProcessThreadPool:
    """Mirrors ONNX Runtime's process-wide state: whether the global pool exists, and its size."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.threads: int | None = None

    def require(self, threads: int) -> None:
        with self._lock:
            if self.threads is None:
                from onnxruntime.capi import _pybind_state

                _pybind_state.set_global_thread_pool_sizes(threads, 1)
                self.threads = threads
            elif self.threads != threads:
                logger.warning(
                    "the process-wide ONNX Runtime pool already has %d threads; %d requested",
                    self.threads,
                    threads,
                )

    @property
    def active(self) -> bool:
        return self.threads is not None


_POOL = _ProcessThreadPool()


def first_line(exc: BaseException) -> str:
    """ONNX Runtime's errors are untyped and multi-line; their first line is what a person needs."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def create_session(path: Path, options: RuntimeOptions, *, bundle: Path) -> onnxruntime.InferenceSession:
    """Open one graph. Sessions are safe to share between threads: ``run`` may be called concurrently.

    Raises:
        BundleError: the file is not a loadable ONNX graph.
    """
    session_options = onnxruntime.SessionOptions()
    if options.shared_thread_pool:
        _POOL.require(options.intra_op_num_threads)
    if _POOL.active:  # once the global pool exists, ONNX Runtime accepts no other kind of session
        session_options.use_per_session_threads = False
    else:
        session_options.intra_op_num_threads = options.intra_op_num_threads
        session_options.inter_op_num_threads = options.inter_op_num_threads
        session_options.add_session_config_entry(
            "session.intra_op.allow_spinning", "1" if options.allow_spinning else "0"
        )
    session_options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    session_options.graph_optimization_level = _LEVELS[options.optimization_level]
    session_options.enable_cpu_mem_arena = options.enable_memory_arena
    session_options.enable_mem_pattern = options.enable_memory_pattern
    session_options.log_severity_level = 3
    try:
        return onnxruntime.InferenceSession(
            os.fspath(path), session_options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own untyped errors for broken graphs
        raise BundleError(bundle, f"cannot load ONNX graph: {first_line(exc)}", file=path.name) from None
