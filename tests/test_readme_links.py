"""Every dashboard link in the README (the Tour, Teaching with mdlm-explorer) is one the app accepts:
known parameters with valid values, templates and texts in the shipped checkpoint's alphabet and
context, Compare columns and Sweep lists that parse, and sampler knobs SamplerConfig takes."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from explorer.checkpoint import read_metadata, resolve_checkpoint
from explorer.dashboard.session import Session
from explorer.dashboard.tabs.compare.state import CompareState, parse_overrides, split_columns
from explorer.dashboard.tabs.explore.state import ExploreState
from explorer.dashboard.tabs.inspect.state import InspectState
from explorer.dashboard.tabs.model.state import ModelState
from explorer.dashboard.tabs.sweep.state import SweepTabState, parse_list
from explorer.dashboard.urlstate import URL_KNOBS, parse_value
from explorer.sampling.config import SamplerConfig
from explorer.sampling.template import expand_blanks

README = Path(__file__).resolve().parent.parent / "README.md"
LINKS = sorted(set(re.findall(r"(http://localhost:5006/\?[^)\s>`]*)", README.read_text(encoding="utf-8"))))
TABS = {"Explore": ExploreState, "Compare": CompareState, "Inspect": InspectState, "Sweep": SweepTabState,
        "Model": ModelState}


def targets() -> dict:
    out = {k: (Session, k) for k in URL_KNOBS}
    for title, cls in TABS.items():
        for name in cls.URL_PARAMS:
            out[name if title == "Explore" else f"{title.lower()}.{name}"] = (cls, name)
    return out


def test_the_readme_has_links_for_every_seed():
    text = README.read_text(encoding="utf-8")
    assert "## Teaching with mdlm-explorer" in text and len(LINKS) >= 40
    for seed in ("### 000", "### 001", "### 002", "### 003", "### 004"):
        assert seed in text


@pytest.mark.parametrize("url", LINKS)
def test_a_readme_link_is_valid(url):
    pairs = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    args = dict(pairs)
    assert len(args) == len(pairs), "a parameter given twice"
    meta = read_metadata(resolve_checkpoint(args.get("checkpoint", "shakespeare")))
    vocab, context = meta["tokenizer"]["chars"], meta["model_config"]["block_size"]
    known, values = targets(), {}
    for key, text in args.items():
        if key == "checkpoint":
            continue
        if key == "tab":
            assert text in TABS
            continue
        assert key in known, f"{key} is not a setting a link can carry"
        cls, name = known[key]
        values[key] = parse_value(cls.param[name], text)
    length = values.get("length", context)
    assert length <= context
    if "template" in values:
        template = expand_blanks(values["template"].strip())
        assert set(template.replace("█", "")) <= set(vocab) and len(template) <= length
    if "inspect.text" in values:
        assert set(values["inspect.text"]) <= set(vocab)
    for spec in split_columns(values.get("compare.columns", "")) if "compare.columns" in values else []:
        SamplerConfig(**{k: v for k, v in parse_overrides(spec).items() if k != "model"})
    for key, kind in (("sweep.steps_grid", int), ("sweep.temperatures", float)):
        if key in values:
            assert parse_list(values[key], kind, key)
    SamplerConfig(**{k: values[k] for k in ("steps", "temperature", "strategy", "schedule") if k in values})
