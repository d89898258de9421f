"""Every dashboard link in the documentation (the README and docs/: the lessons of docs/teaching.md and its tour)
is one the app accepts: known parameters with valid values, templates and texts in the shipped checkpoint's
alphabet and context, Compare columns and Sweep lists that parse, and sampler knobs SamplerConfig takes."""
from __future__ import annotations

import importlib.util
import re
import sys
from urllib.parse import parse_qsl, urlsplit

import pytest

from explorer.checkpoint import read_metadata, resolve_checkpoint
from explorer.dashboard.lessons import lesson
from explorer.dashboard.session import Session
from explorer.dashboard.tabs.compare.state import CompareState, parse_overrides, split_columns
from explorer.dashboard.tabs.explore.state import ExploreState
from explorer.dashboard.tabs.inspect.state import InspectState
from explorer.dashboard.tabs.model.state import ModelState
from explorer.dashboard.tabs.sweep.state import SweepTabState, parse_list
from explorer.dashboard.urlstate import URL_KNOBS, parse_value
from explorer.sampling.config import SamplerConfig
from explorer.sampling.template import expand_blanks
from tests.support import ROOT

TEACHING = ROOT / "docs" / "teaching.md"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINKS = sorted({link for page in PAGES
                for link in re.findall(r"(http://localhost:5006/\?[^)\s>`|]*)", page.read_text(encoding="utf-8"))})
TABS = {"Explore": ExploreState, "Compare": CompareState, "Inspect": InspectState, "Sweep": SweepTabState,
        "Model": ModelState}
# The five teaching documents, by the titles their lessons carry in docs/teaching.md.
LESSONS = ("The Forward Process", "Training with the ELBO", "Generation: Iterative Unmasking",
           "Sampling Strategies & Speed Tradeoffs", "Let's Build a Diffusion LM")
_spec = importlib.util.spec_from_file_location("tools_tour", ROOT / "tools" / "tour.py")
tour = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # tools/ holds scripts, not a package
_spec.loader.exec_module(tour)


def targets() -> dict:
    out = {k: (Session, k) for k in URL_KNOBS}
    for title, cls in TABS.items():
        for name in cls.URL_PARAMS:
            out[name if title == "Explore" else f"{title.lower()}.{name}"] = (cls, name)
    return out


def test_the_teaching_page_has_a_lesson_with_links_for_every_document():
    text = TEACHING.read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)
    for title in LESSONS:
        body = next((s for s in sections if s.startswith(title + "\n")), None)
        assert body is not None, f"docs/teaching.md has no '## {title}' lesson"
        assert body.count("http://localhost:5006/?") >= 5, title
    assert len(LINKS) >= 40


def test_the_tour_shows_every_stop_with_its_link_and_screenshot():
    text = TEACHING.read_text(encoding="utf-8")
    for stop in tour.TOUR:
        assert f"### {stop.tab}" in text and tour.link(stop) in text, stop.tab
        image = f"assets/tour/{stop.file}"
        assert f"({image})" in text and (ROOT / image).is_file(), image


@pytest.mark.parametrize("url", LINKS)
def test_a_documented_link_is_valid(url):
    pairs = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    args = dict(pairs)
    assert len(args) == len(pairs), "a parameter given twice"
    meta = read_metadata(resolve_checkpoint(args.get("checkpoint", "shakespeare")))
    vocab, context = meta["tokenizer"]["chars"], meta["model_config"]["block_size"]
    known, values = targets(), {}
    if "lesson" in args:  # lesson mode: a lesson of lessons.py and one of its figures
        figures = lesson(args["lesson"]).figures
        assert 1 <= int(args.get("figure", "1")) <= len(figures)
    for key, text in args.items():
        if key in ("checkpoint", "lesson", "figure"):
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
