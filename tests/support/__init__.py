"""What the tests share: tiny models, corpora and checkpoints built in the test (models.py, training.py,
dashboard.py, hf.py), served apps and HTTP clients (serving.py), the browser tests' helpers (browser.py)
and the markup checks (markup.py). Test modules import from here and from conftest.py, never from each
other."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
