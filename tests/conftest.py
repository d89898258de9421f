"""Shared fixtures: tiny corpora and tiny models built in the test, never the network or ../shared;
one headless Chromium for the whole test session's browser tests. Markers by folder: every test under
tests/browser/ is a `browser` test, every test under tests/integration/ a `slow` one."""
from __future__ import annotations

import asyncio
import atexit
import os
import sys
from pathlib import Path

import pytest
import torch
from _pytest.mark.expression import Expression

from explorer.data.corpus import TextCorpus
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, INSTALL
from tests.support.models import TINY_TEXT

TESTS = Path(__file__).resolve().parent
FOLDER_MARKS = {"browser": "browser", "integration": "slow"}  # tests/<folder>/ -> the mark of all its tests


# The longest test files (30-90 s each of one worker in a `-n 3` run), started first under -n.
LONGEST_FIRST = ("browser/test_projector.py", "browser/test_tabs_from_url.py", "browser/test_dashboard.py",
                 "browser/test_rehearse.py", "browser/test_lessons.py", "browser/test_offline.py")
FOLDER_ORDER = ("browser", "integration")  # then the rest: unit tests are many short files


def pytest_collection_modifyitems(config, items):
    """Mark each test by its folder (browser tests are skipped where Chromium is missing); under -n, the
    longest files first (_longest_first)."""
    for item in items:
        mark = FOLDER_MARKS.get(_folder(Path(str(item.path))))
        if mark:
            item.add_marker(mark)
        if mark == "browser" and CHROMIUM is None:
            item.add_marker(pytest.mark.skip(reason=f"Chromium is missing: {INSTALL}"))
    if hasattr(config, "workerinput"):  # an xdist worker: the order it collects is the order files are handed out
        items.sort(key=_longest_first)


def _longest_first(item) -> tuple[int, int]:
    """Sort key: the LONGEST_FIRST files in that order, then the browser tests, the integration tests and the
    rest (a stable sort keeps each file's tests together and in their order). xdist hands out whole files
    (--dist loadfile, with --no-loadscope-reorder: in the collected order) to whichever worker is free;
    its own order, most tests first, started the one-test browser files (20-80 s each) last, when no short
    files were left to even out the two workers' ends. Long files first leave the many short unit files for
    the end."""
    try:
        parts = Path(str(item.path)).relative_to(TESTS).parts
    except ValueError:  # a test file outside tests/
        parts = ("",)
    name = "/".join(parts)
    first = LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
    folder = FOLDER_ORDER.index(parts[0]) if parts[0] in FOLDER_ORDER else len(FOLDER_ORDER)
    return first, folder


def pytest_ignore_collect(collection_path, config):
    """Under `-m` leaving out a folder's mark (`-m "not slow and not browser"`, the quick loop), its test
    modules are not even imported: every test there would be deselected anyway."""
    mark = FOLDER_MARKS.get(collection_path.name) if collection_path.parent == TESTS else None
    if mark is None or not config.option.markexpr:
        return None
    expression = Expression.compile(config.option.markexpr)
    # deselected whatever other marks a test there carries: with none of them, and with all of them
    if not any(expression.evaluate(lambda name, *_, **__: name == mark or others) for others in (False, True)):
        return True
    return None


def _folder(path: Path) -> str | None:
    """The folder of tests/ that `path` lies in (None: tests/ itself, or outside it)."""
    try:
        parts = path.relative_to(TESTS).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 else None


@pytest.fixture
def tiny_corpus() -> TextCorpus:
    return TextCorpus(TINY_TEXT, name="tiny")


def _fast_cpu() -> None:
    """Denormals flushed, and one torch thread: tiny models gain nothing from threads, and on a
    busy 2-core machine extra threads spin and crawl (model calls measured 10-60x slower)."""
    torch.set_flush_denormal(True)
    torch.set_num_threads(1)


def pytest_configure(config):
    # Here, not in a function fixture: module- and session-scoped fixtures (the models test_experiments
    # and test_metrics build once per module) are set up before any function fixture runs.
    _fast_cpu()
    _one_last_collection(config)
    if hasattr(config, "workerinput"):
        atexit.register(_leave_without_teardown)  # registered first: runs after the tests' own handlers


def _leave_without_teardown() -> None:
    """An xdist worker's last exit handler: its results went to the controller long before, and what
    remains is the interpreter's teardown, which frees every object of a worker's hundreds of dashboard
    sessions one by one. That took more than 10 s, so the controller waited out its 10 s limit and killed
    the worker at the end of every run. Leaving at once skips only that freeing: the tests' exit
    handlers (registered later) have run, and stdout and stderr are flushed here."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _one_last_collection(config) -> None:
    """One garbage collection when a test process ends, where pytest makes five (for PyPy) to report
    the unraisable exceptions of objects freed only then. On CPython the first pass frees every
    unreachable cycle; the other four found nothing and each walked the whole heap again, which after
    a worker's hundreds of dashboard sessions took 8-10 s at the end of each worker's run. The key is
    pytest's own (_pytest.unraisableexception); without it pytest keeps its default."""
    from _pytest import unraisableexception

    key = getattr(unraisableexception, "gc_collect_iterations_key", None)
    if key is not None:
        config.stash[key] = 1


@pytest.fixture(autouse=True)
def _fast_cpu_each_test():
    """Again around every test: a test that changes either (a Trainer with --threads does) must not
    leave it changed for the next module's fixtures."""
    _fast_cpu()
    yield
    _fast_cpu()


@pytest.fixture(autouse=True)
def _no_measured_rates_between_tests():
    """The server's measured sweep rates (runtime.cache.SWEEP_RATES) are forgotten after every test: they
    set whether a sweep starts by itself, and a rate one test measured under the load of the tests
    around it must not decide that for the next (only read where the dashboard was imported)."""
    yield
    cache = sys.modules.get("explorer.dashboard.runtime.cache")
    if cache is not None:
        cache.SWEEP_RATES.clear()


@pytest.fixture
def checkpoints(tmp_path, monkeypatch):
    """A checkpoints/ directory of tiny models (tests/support/dashboard.py) that the dashboard reads
    through MDLM_EXPLORER_CHECKPOINTS. A test file that needs other files there defines its own."""
    from tests.support.dashboard import save_tiny_checkpoints

    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    return save_tiny_checkpoints(tmp_path)


@pytest.fixture(scope="session")
def _chromium():
    """One headless Chromium (and one playwright driver) for the whole test session: starting them costs
    about 3 s, once per browser test module otherwise. Yields (browser, the playwright event loop)."""
    if CHROMIUM is None:
        pytest.skip(f"Chromium is missing: {INSTALL}")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser, p._loop
        _show_loop(p._loop)  # closing is a playwright call too
        browser.close()
        _show_loop(p._loop)


def _show_loop(loop) -> None:
    # Between its calls, playwright's sync API leaves its event loop marked as running in this thread,
    # where asyncio.run() (the download tests) and Panel's loop checks would find it; the mark is hidden
    # while other tests run and shown again before playwright's next call, which needs it.
    asyncio._set_running_loop(loop)


@pytest.fixture
def browser(_chromium):
    """The test session's Chromium; each test opens its own pages (a page is its own browser context),
    and they are closed when it ends, so no page of an earlier test keeps running."""
    chromium, loop = _chromium
    _show_loop(loop)
    yield chromium
    for context in chromium.contexts:
        context.close()
    _show_loop(None)
