"""Jupyter: `create_app()` shows inline. Without a kernel, check what Jupyter asks for: the app's
rich display (a text/html bundle with the Bokeh document and Panel's exec mimetype).

In a subprocess: rendering for a notebook registers every Panel extension model in the process
(Vizzu among them, whose JS lives on a CDN), and later served-app tests must not inherit that."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.support import ROOT
from tests.support.dashboard import save_tiny_checkpoints

SCRIPT = """
import json, torch
torch.set_num_threads(1)
from explorer.dashboard import create_app
app = create_app("tiny", "cpu", autoload=False)
app.explorer_state.load(wait=True)
bundle, metadata = app._repr_mimebundle_()
print(json.dumps({"keys": sorted(bundle), "html": len(bundle["text/html"]),
                  "title": "mdlm-explorer" in bundle["text/html"],
                  "model": app.explorer_state.model is not None, "error": app.explorer_state.error}), flush=True)
import os
os._exit(0)  # the dashboard's daemon worker threads: no interpreter teardown under them
"""


def test_the_app_has_a_notebook_display(tmp_path):
    save_tiny_checkpoints(tmp_path)
    env = {"MDLM_EXPLORER_CHECKPOINTS": str(tmp_path), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert "application/vnd.holoviews_exec.v0+json" in seen["keys"] and "text/html" in seen["keys"]
    assert seen["html"] > 10_000 and seen["title"]  # the template, with its title
    assert seen["model"] and seen["error"] == ""
