"""A sampler knob is declared once, in sampling/knobs.py: a knob added there (`nudge`, on a copy of the
schema, in a child process: tests/support/new_knob.py) is a SamplerConfig field with the schema's checks,
a `sample` flag and a `sweep` list with their help, a session parameter with the UI's bound, a sidebar
slider, a link key and a Compare column key, a knob the Sweep tab watches and a column of its summary, a
group of the plots and a slider the load test drives; merged runs leave it alone until told they may vary it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import ROOT

HELP = "Nudge every score by this much"


@pytest.fixture(scope="module")
def seen(tmp_path_factory) -> dict:
    """What the child saw, with the new knob declared before anything read the schema."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MDLM_EXPLORER_CHECKPOINTS": str(tmp_path_factory.mktemp("none")),
           "COLUMNS": "1000"}  # argparse's help on one line per flag
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "new_knob.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def one_line(text: str) -> str:
    return " ".join(text.split())  # argparse wraps help lines


def test_the_config_has_the_knob_and_checks_it(seen):
    assert seen["default"] == 0.0 and seen["set"] == 2.5
    assert seen["too_big"] == "nudge must be in [0, 5], got 7.0"
    # the merged step does not implement it: a run merges only while it is off, and runs never vary in it
    assert seen["merges_off"] and not seen["merges_on"] and not seen["varying"]


def test_sample_and_sweep_have_its_flag_and_help(seen):
    assert seen["sample_value"] == 0.5
    assert f"--nudge NUDGE {HELP} (0 = off) (default: the checkpoint's recommended value, else 0.0)" \
        in one_line(seen["sample_help"])
    assert seen["sweep_default"] == [0.0, 0.5] and seen["sweep_value"] == [0.25, 1.0]
    assert f"--nudge LIST {HELP} (0 = off). Comma-separated values to sweep (default 0,0.5)" \
        in one_line(seen["sweep_help"])


def test_the_dashboard_has_its_parameter_slider_link_and_column(seen):
    assert seen["in_knobs"] and seen["param"] == ["StepNumber", [0.0, 1.0], "Nudge", f"{HELP} (0 = off)"]
    assert seen["config"] == 0.25  # the session's value reaches its SamplerConfig
    assert seen["link"] == [0.5, "", "0.5"]  # read from a link, and written back into it
    # the UI's one bound (0-1, narrower than the config's 0-5) holds for links and columns alike
    assert seen["link_too_big"] == [0.5, "Not applied from the link: nudge=3 (3.0 is outside the range 0.0 to 1.0)"]
    assert seen["column"] == 0.75 and seen["column_too_big"].startswith("nudge=3: 3.0 is outside the range 0.0 to 1.0")
    assert seen["widget"] == ["FloatSlider", 0.0, 1.0, 0.5, "Nudge"] and seen["in_sidebar"]
    assert seen["widget_disabled_for_ar"]  # declared for diffusion models only


def test_the_sweep_tab_plots_and_load_test_read_it_from_the_schema(seen):
    assert seen["sweep_watches"]  # a change of it is a new estimate for every sweep of the tab
    assert seen["sweep_column"] and seen["summary_columns"] == ["sampler", "nudge", "steps", "n", "pattern_quality"]
    assert seen["plot_groups"]  # a summary read back without its attrs is still grouped by it
    assert seen["load_test_slider"]  # the load test drives its slider as a browser does (value_throttled)
