"""Where the shared test data lives (PDFs, paraphrase pairs, ...).

CI lays the ``shared/`` checkout beside the repository (``/work/shared`` next to
``/work/main``), so the default is ``<repo>/../shared/data``. Set
``MEMORY_ENGINE_SHARED_DATA`` to the ``data`` directory to use another location.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

SHARED_DATA = Path(
    os.environ.get("MEMORY_ENGINE_SHARED_DATA") or REPO_ROOT.parent / "shared" / "data"
).resolve()

PDFS = SHARED_DATA / "pdfs"
