"""liuyi's HTTP server: a Starlette app that streams the decoding engine's deltas.

    from server import Settings, create_app
    app = create_app(Settings())          # serve with uvicorn

Knows nothing of ONNX: it talks to ``decoding`` through bundles, translations and the scheduler.
"""

from __future__ import annotations

from ._app import create_app
from ._settings import Settings, settings_from

__all__ = ["Settings", "create_app", "settings_from"]
