"""Run as a script (tests/integration/test_new_knob.py): declare one more sampler knob, `nudge`, in a copy
of the knob schema before anything reads the schema, then look for it everywhere the project offers
knobs (the Sweep tab, the plots and benchmarks/load_test.py too). Prints one JSON object of what it saw
(the test asserts on it).

The schema is read when each part is built (SamplerConfig's fields, the Session's parameters, the
flags), so the copy is put in place as explorer.sampling.knobs is first loaded: that module is loaded
here from its file, given the new knob, and registered, so every later import finds this one.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = "explorer.sampling.knobs"


def load_schema_with_nudge():
    """explorer.sampling.knobs, loaded alone from its file, its KNOBS a copy with `nudge` added."""
    spec = importlib.util.spec_from_file_location(NAME, ROOT / "explorer" / "sampling" / "knobs.py")
    knobs = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = knobs
    spec.loader.exec_module(knobs)
    nudge = knobs.Knob("nudge", float, 0.0, "Nudge every score by this much", lo=0, hi=5, off=0.0,
                       label="Nudge", ui_range=(0.0, 1.0), step=0.1, sweep=True, sweep_default="0,0.5")
    knobs.KNOBS = knobs.registry(*knobs.KNOBS.values(), nudge)
    return knobs


def refused(call) -> str:
    """The ValueError's message `call()` raises ('' if none)."""
    try:
        call()
    except ValueError as e:
        return str(e)
    return ""


def config_side() -> dict:
    from explorer.sampling import SamplerConfig
    from explorer.sampling.merged import VARYING, merge_key

    run = lambda nudge: {"config": SamplerConfig(nudge=nudge), "record": False}
    return {"default": SamplerConfig().nudge, "set": SamplerConfig.from_dict({"nudge": 2.5}).nudge,
            "too_big": refused(lambda: SamplerConfig(nudge=7.0)),
            "merges_off": merge_key(run(0.0)) is not None, "merges_on": merge_key(run(0.5)) is not None,
            "varying": "nudge" in VARYING}


def cli_side() -> dict:
    from explorer.cli import sample, sweep

    p = argparse.ArgumentParser()
    sample.add_arguments(p)
    q = argparse.ArgumentParser()
    sweep.add_arguments(q)
    return {"sample_value": p.parse_args(["--nudge", "0.5"]).nudge, "sample_help": p.format_help(),
            "sweep_default": sweep.vary_from_args(q.parse_args([])).get("nudge"),
            "sweep_value": sweep.vary_from_args(q.parse_args(["--nudge", "0.25,1"])).get("nudge"),
            "sweep_help": q.format_help()}


def dashboard_side() -> dict:
    from explorer.dashboard.session import KNOBS
    from explorer.dashboard.tabs.compare.state import column_config, parse_overrides
    from explorer.dashboard.tabs.explore import open_session
    from explorer.dashboard.tabs.explore.controls import ControlsView
    from explorer.dashboard.urlstate import UrlState
    from explorer.sampling import SamplerConfig

    session = open_session(device="cpu", auto_run=False, sweep_auto=False, nudge=0.25)
    p = session.param.nudge
    out = {"in_knobs": "nudge" in KNOBS, "param": [type(p).__name__, list(p.bounds), p.label, p.doc],
           "config": session.sampler_config().nudge}
    url = UrlState(session)
    url.apply({"nudge": "0.5"})
    out["link"] = [session.nudge, url.notice, url.query().get("nudge")]
    url.apply({"nudge": "3"})  # the config allows 3; the slider's bound does not
    out["link_too_big"] = [session.nudge, url.notice]
    out["column"] = column_config(SamplerConfig(), parse_overrides("nudge=0.75, steps=4")).nudge
    out["column_too_big"] = refused(lambda: parse_overrides("nudge=3"))
    controls = ControlsView(state=session.tabs["Explore"])
    widget = controls.widgets["nudge"]
    out["widget"] = [type(widget).__name__, widget.start, widget.end, widget.value, widget.name]
    out["in_sidebar"] = bool(controls.__panel__().select(lambda obj: obj is widget))
    session.model_info = {"kind": "ar"}  # the AR baseline reads no nudge: its widget says so
    out["widget_disabled_for_ar"] = widget.disabled
    session.close()
    return out


def sweep_side() -> dict:
    """The Sweep tab (its watched knobs and its summary's columns), the plots' and the load test's lists."""
    import pandas as pd

    from explorer.dashboard.tabs.sweep.state import SIDEBAR_KNOBS
    from explorer.dashboard.tabs.sweep.view import KNOB_COLUMNS, summary_frame
    from explorer.plots import KNOB_ORDER

    spec = importlib.util.spec_from_file_location("load_test", ROOT / "benchmarks" / "load_test.py")
    load_test = importlib.util.module_from_spec(spec)
    sys.modules["load_test"] = load_test  # its dataclasses look their module up there
    spec.loader.exec_module(load_test)
    summary = pd.DataFrame({"sampler": ["diffusion"] * 2, "steps": [4, 4], "nudge": [0.0, 0.5], "n": [2, 2],
                            "pattern_quality_mean": [0.5, 0.6], "pattern_quality_std": [0.1, 0.1]})
    return {"sweep_watches": "nudge" in SIDEBAR_KNOBS, "sweep_column": "nudge" in KNOB_COLUMNS,
            "summary_columns": list(summary_frame(summary, "pattern_quality").columns),
            "plot_groups": "nudge" in KNOB_ORDER, "load_test_slider": "nudge" in load_test.SLIDERS}


def main() -> None:
    load_schema_with_nudge()
    print(json.dumps({**config_side(), **cli_side(), **dashboard_side(), **sweep_side()}))


if __name__ == "__main__":
    main()
