"""`python run.py train` in a subprocess, stopped by a signal: `kill` (SIGTERM) and Ctrl-C (SIGINT) save
the run before the process exits."""
from __future__ import annotations

import pytest

from explorer import load_checkpoint
from tests.support import ROOT
from tests.support.models import TINY_TEXT


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_cli_saves_when_stopped_by_a_signal(tmp_path, sig):
    """`kill` (SIGTERM) and Ctrl-C save before exiting, even for a job a shell started in the
    background, which inherits SIGINT ignored."""
    import signal
    import subprocess
    import sys
    import time

    data, out = tmp_path / "tiny.txt", tmp_path / "run.safetensors"
    data.write_text(TINY_TEXT * 4)
    cmd = [sys.executable, str(ROOT / "run.py"), "train", "--out", str(out),
           "--data", str(data), "--max-steps", "1000000", "--n-layer", "1", "--n-embd", "32", "--block-size", "16",
           "--batch-size", "4", "--eval-every", "1000000", "--precision", "fp32", "--device", "cpu", "--threads", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        while "training diffusion model" not in proc.stderr.readline():  # setup done, steps running
            assert proc.poll() is None, "training exited before it started"
        time.sleep(0.3)  # a few of the tiny model's steps (milliseconds each)
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    step = load_checkpoint(out).meta["training_state"]["step"]
    assert step >= 1 and f"interrupted at step {step}: saved {out}" in err  # the step it stopped at was saved
