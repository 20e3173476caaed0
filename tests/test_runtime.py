"""ONNX Runtime sessions: one shared thread pool per process when asked, and nothing breaks after."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_shared_pool_is_created_once_and_later_sessions_join_it() -> None:
    # ONNX Runtime's global pool is process-wide state: check it in a fresh process.
    script = textwrap.dedent(
        """
        from decoding import LoadOptions, RuntimeOptions, load_bundle
        shared = load_bundle(options=LoadOptions(runtime=RuntimeOptions(intra_op_num_threads=2,
                                                                        shared_thread_pool=True)))
        # ONNX Runtime refuses per-session pools once the global one exists; liuyi joins it instead
        later = load_bundle(options=LoadOptions(runtime=RuntimeOptions(intra_op_num_threads=1)))
        print(shared.translate("我很好。").translation, "|", later.translate("我很好。").translation)
        """
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "I'm very well. | I'm very well."
