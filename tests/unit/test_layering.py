"""The package's layering, read from the source (ast): data flows one way and the dashboard keeps its
shape. Function-local imports count: they hide a dependency, they do not remove it."""
from __future__ import annotations

import ast
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGE = ROOT / "explorer"
DASHBOARD = "explorer.dashboard"
UI_LIBRARIES = ("panel", "bokeh", "holoviews")
THREAD_STARTERS = {"Thread", "Timer", "ThreadPoolExecutor", "ProcessPoolExecutor"}
MUTATORS = {"append", "extend", "add", "update", "pop", "popitem", "clear", "setdefault", "remove", "discard",
            "insert", "move_to_end"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=None)
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


@lru_cache(maxsize=None)
def tree(name: str) -> ast.Module:
    return ast.parse(modules()[name].read_text(), filename=str(modules()[name]))


def _base(name: str, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names (relative levels resolved)."""
    if node.level == 0:
        return node.module or ""
    package = name if modules()[name].name == "__init__.py" else name.rsplit(".", 1)[0]
    for _ in range(node.level - 1):
        package = package.rsplit(".", 1)[0]
    return f"{package}.{node.module}" if node.module else package


@lru_cache(maxsize=None)
def imports(name: str) -> frozenset[str]:
    """Every module `name` imports, anywhere in it: a submodule when `from pkg import sub` names one."""
    out = set()
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _base(name, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in modules() else base)
    return frozenset(out)


@lru_cache(maxsize=None)
def import_time_imports(name: str) -> frozenset[str]:
    """What importing `name` imports: its imports outside functions and classes' methods."""
    out, todo = set(), list(tree(name).body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _base(name, node)
            out.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules() else base for a in node.names)
        todo.extend(ast.iter_child_nodes(node))
    return frozenset(out)


def loaded_by_import(name: str) -> set[str]:
    """Every module of the package that importing `name` imports, itself included."""
    seen, todo = {name}, [name]
    while todo:
        for nxt in {m for m in import_time_imports(todo.pop()) if m in modules()} - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def internal_edges(name: str) -> set[str]:
    return {m for m in imports(name) if m in modules() and m != name}


def reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in internal_edges(todo.pop()) - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


@pytest.mark.slow
def test_the_import_graph_has_no_cycles():
    cycles = sorted(f"{a} <-> {b}" for a in modules() for b in internal_edges(a)
                    if a < b and a in reachable(b))
    assert not cycles, "import cycles (function-local imports count):\n" + "\n".join(cycles)


def test_the_checker_sees_function_local_imports_and_cycles(tmp_path, monkeypatch):
    """The checks above can fail: a function-local import that closes a cycle is found."""
    (tmp_path / "explorer").mkdir()
    (tmp_path / "explorer" / "__init__.py").write_text("")
    (tmp_path / "explorer" / "a.py").write_text("from . import b\n")
    (tmp_path / "explorer" / "b.py").write_text("def f():\n    from .a import x\n")
    this = sys.modules[__name__]
    monkeypatch.setattr(this, "ROOT", tmp_path)
    monkeypatch.setattr(this, "PACKAGE", tmp_path / "explorer")
    for cached in (modules, tree, imports, import_time_imports):
        cached.cache_clear()
    try:
        assert "explorer.a" in reachable("explorer.b") and "explorer.b" in reachable("explorer.a")
    finally:
        monkeypatch.undo()
        for cached in (modules, tree, imports, import_time_imports):
            cached.cache_clear()


def state_modules() -> list[str]:
    """Every tab's state (state.py, or a state/ package and its sub-states), each tab's spec (its
    package's __init__.py), the tabs' registry, the session and TabState."""
    tabs = f"{DASHBOARD}.tabs."
    names = [m for m in modules() if m.startswith(tabs) and (m.endswith(".state") or ".state." in m)]
    specs = [m for m in modules() if m.startswith(tabs) and m.count(".") == 3]
    return [*names, *specs, f"{DASHBOARD}.tabs", f"{DASHBOARD}.session", f"{DASHBOARD}.tabs.base"]


@pytest.mark.slow
def test_state_modules_do_not_import_panel():
    """Not in the module (anywhere in it), and not through what importing it imports (a helper module
    may import Panel inside a function that only the page calls, e.g. runtime.dispatch)."""
    assert len(state_modules()) >= 7  # Explore, Compare, Inspect, Sweep, Model, the session, TabState
    offenders = []
    for name in state_modules():
        ui = sorted(i for i in imports(name) if i.split(".")[0] in UI_LIBRARIES)
        ui += [f"{i} (through {m})" for m in loaded_by_import(name) for i in sorted(import_time_imports(m))
               if i.split(".")[0] in UI_LIBRARIES]
        if ui:
            offenders.append(f"{name}: {', '.join(ui)}")
    assert not offenders, "\n".join(offenders)


def test_every_tab_is_a_package_of_state_view_and_spec():
    """Its state (state.py, or a state/ package of sub-states), its view.py, and an __init__.py that
    declares the tab's TabSpec as SPEC: tabs/__init__.py builds every tab from it, so no tab builds itself."""
    tabs = PACKAGE / "dashboard" / "tabs"
    for name in ("explore", "compare", "inspect", "sweep", "model"):
        package = tabs / name
        files = {p.name for p in package.glob("*.py")}
        assert {"__init__.py", "view.py"} <= files, name
        assert ("state.py" in files) != (package / "state" / "__init__.py").exists(), name
        body = tree(f"{DASHBOARD}.tabs.{name}").body
        assert "SPEC" in _module_level_names(ast.Module(body=body, type_ignores=[])), name
        builders = {n.name for n in body if isinstance(n, ast.FunctionDef)} & {"build", "new_state", "new_view"}
        assert not builders, f"tabs/{name}/__init__.py defines {sorted(builders)}: tabs/__init__.py builds every tab"


def sub_states() -> dict[str, str]:
    """Sub-state module -> its tab's state package (tabs/<tab>/state/<part>.py)."""
    out = {}
    for name in modules():
        parts = name.split(".")
        if parts[:3] == ["explorer", "dashboard", "tabs"] and len(parts) == 6 and parts[4] == "state":
            out[name] = ".".join(parts[:5])
    return out


def test_sub_states_do_not_import_each_other():
    """A tab's sub-states (Explore's run, confidence, quality and samples; Inspect's four Tasks) each
    keep to their own module; only the state package's __init__.py composes them and ties them together."""
    parts = sub_states()
    assert {p.rsplit(".", 1)[1] for p in parts} >= {"run", "quality", "validation", "predictions"}
    offenders = [f"{name} imports {m}" for name, package in parts.items() for m in imports(name)
                 if m == package or m.startswith(f"{package}.")]
    assert not offenders, "\n".join(offenders)


def test_no_tab_imports_another_tab():
    offenders = []
    for name in modules():
        parts = name.split(".")
        if parts[:3] != ["explorer", "dashboard", "tabs"] or len(parts) < 5:
            continue
        for m in imports(name):
            other = m.split(".")
            if other[:3] == parts[:3] and len(other) >= 4 and other[3] not in (parts[3], "base"):
                offenders.append(f"{name} imports {m}")
    assert not offenders, "\n".join(offenders)


def test_nothing_in_the_dashboard_imports_the_cli():
    offenders = [f"{n} imports {m}" for n in modules() if n.startswith(DASHBOARD)
                 for m in imports(n) if m == "explorer.cli" or m.startswith("explorer.cli.")]
    assert not offenders, "\n".join(offenders)


# What runtime/ may import of the package besides itself: it runs the sampler for the device queue
# (sampling, devices, names) and records who owns which file (checkpoint's paths, nothing that reads one).
RUNTIME_IMPORTS = {"explorer.names", "explorer.devices", "explorer.sampling", "explorer.checkpoint",
                   f"{DASHBOARD}.ui.internals"}  # dispatch mends a Panel write queue (ui/internals.py says why)
CHECKPOINT_PATHS = {"SUFFIX", "checkpoints_dir"}


def _checkpoint_names(name: str) -> set[str]:
    """The names `name` imports from explorer.checkpoint."""
    return {alias.name for node in ast.walk(tree(name)) if isinstance(node, ast.ImportFrom)
            and _base(name, node) == "explorer.checkpoint" for alias in node.names}


def test_runtime_holds_only_threads_queues_dispatch_and_caches():
    """runtime/ keeps things (threads, queues, the dispatcher, caches) and decides nothing about data:
    no corpus, metrics, experiment, Hugging Face or checkpoint-reading code. What to load or measure is
    decided above it (dashboard/checkpoints.py, dashboard/mean_confidence.py), which keep their results
    in runtime's caches."""
    offenders = []
    for name in modules():
        if not name.startswith(f"{DASHBOARD}.runtime"):
            continue
        offenders += [f"{name} imports {m}" for m in sorted(imports(name)) if m.startswith("explorer")
                      and not m.startswith(f"{DASHBOARD}.runtime") and m not in RUNTIME_IMPORTS]
        offenders += [f"{name} imports explorer.checkpoint.{n}" for n in sorted(_checkpoint_names(name) - CHECKPOINT_PATHS)]
    assert not offenders, "\n".join(offenders)


def test_the_dashboards_data_and_states_do_not_import_its_views():
    """The heatmap's cell states are the data's (frames.py); ui/palette.py maps them to colours. Nothing
    below the views (frames, checkpoints, mean confidence, the session, the link, the tabs' states and
    specs, runtime) imports a view or the palette from ui/; ui/internals.py is no view (the mends of
    Panel's and param's internals: the link validates with it, dispatch mends a write queue)."""
    below = [f"{DASHBOARD}.{m}" for m in ("frames", "checkpoints", "mean_confidence", "session", "urlstate")]
    below += state_modules() + [m for m in modules() if m.startswith(f"{DASHBOARD}.runtime")]
    offenders = [f"{name} imports {m}" for name in below for m in sorted(imports(name))
                 if m.startswith(f"{DASHBOARD}.ui") and m != f"{DASHBOARD}.ui.internals"]
    assert not offenders, "\n".join(offenders)


def _called_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _module_level_names(module: ast.Module) -> set[str]:
    names = set()
    for node in module.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _mutations(module: ast.Module, names: set[str]) -> set[str]:
    """Module-level names the module changes: item assignment, a mutating method, or `global`."""
    found = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Global):
            found.update(node.names)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            found.update(t.value.id for t in targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            if isinstance(node.func.value, ast.Name):
                found.add(node.func.value.id)
    return found & names


def test_only_runtime_starts_threads_or_holds_process_wide_state():
    offenders = []
    for name in modules():
        if not name.startswith(DASHBOARD) or name.startswith(f"{DASHBOARD}.runtime"):
            continue
        module = tree(name)
        starts = sorted({_called_name(n) for n in ast.walk(module) if isinstance(n, ast.Call)} & THREAD_STARTERS)
        if starts:
            offenders.append(f"{name} starts {', '.join(starts)}")
        changed = _mutations(module, _module_level_names(module))
        if changed:
            offenders.append(f"{name} changes module-level {', '.join(sorted(changed))}")
    assert not offenders, "\n".join(offenders)


def test_the_runtime_checks_see_what_they_look_for():
    module = ast.parse("import threading\nCACHE = {}\ndef f(k):\n    CACHE[k] = 1\n    threading.Thread(target=f).start()\n")
    assert _mutations(module, _module_level_names(module)) == {"CACHE"}
    assert {_called_name(n) for n in ast.walk(module) if isinstance(n, ast.Call)} & THREAD_STARTERS == {"Thread"}
