"""``python -m server`` is the ``liuyi`` command."""

from __future__ import annotations

import sys

from ._cli import main

sys.exit(main())
