"""Load test: many students on one served dashboard, each turning knobs.

    python benchmarks/load_test.py [--sessions 8 30] [--seconds 60] [--think 1.0] [--checkpoint shakespeare]
                                   [--length 256] [--steps 32] [--port 0] [--quick] [--json results.json]
                                   [--scrub SECONDS [--scrub-rate 30]]

For each N in --sessions it starts the real server as a lecturer does (`python run.py serve`, with
--server-args, default the README's "--num-threads 4 --threads 2"), on a free port, serving a
snapshot of the checkpoints (training re-saves them every few minutes: every session and the solo
reference must see the same weights). Then N real Bokeh websocket clients of the served app
(bokeh.client.pull_session: the document a browser renders, without the rendering) each:

  1. send DocumentReady (what BokehJS sends once the page is drawn: it starts the model load),
     wait for the first run, then set the classroom config (--length, --steps);
  2. for --seconds, change one knob as a student would (seed, temperature, steps, strategy), wait
     for the run it starts to finish, think for --think x U(0.5, 1.5) seconds, and again;
  3. set identity knobs (seed 1000 + session, --steps, temperature 1, confidence) and keep the final
     text; after the server stops, each is compared with a solo run of the knobs the page shows
     through the Python API (explorer.sampling.sample_any on the same snapshot).

Latency: from setting the widget's value in the client document to the header showing the finished
run: its status ("N steps, K model calls (P per call), T ms") with the number of a run after the one
shown before the change (the header line's data-run), on this process's clock. The number, not the
status text, tells the new run's end: two runs in a row may end with the same status, and a run's
"sampling …" may never reach the page (its patches merge with the end's), so the header text alone
could not change at all and a finished run looked lost. The run must also answer the change: a steps
change's run shows that step count in its status, and the page still shows the value set; a run of the
knobs before the change (a lost update) is not its answer. It includes the slider debounce, the websocket,
queueing behind other sessions' runs and the run itself (T, reported separately as "the runs themselves").
Errors: a notice shown in the page, a "failed"/"stopped" status, no result within --timeout, a
client exception or lost connection, a page without its widgets, and every traceback in the
server's log. "Never answered" counts the changes after which runs did finish, none of them at the
value set (each is an error too).
Server RSS (VmRSS of the server and its children, from /proc): when the first session has loaded
the model, when all N sessions are ready (start), and when they have all finished (end); growth is
end vs start, so it measures the M seconds of use, not the N documents being built. With
`--server-args "--num-procs P ..."` the server is P forked processes: RSS and CPU are summed over them.

Prints one table row and one PASS/FAIL line per N against the issue's goals: 0 errors, p95 <= 2 s,
RSS growth < 10 %, every session's text identical to its solo run (exit status 1 if any fails).
Clients run in this process (one thread each); their CPU share is in the table.

The script talks to the server only as clients do; it depends on the page showing the status in
the header (with the shown run's number as its line's `data-run`), the sample text in `.sample-text`,
notices in `.error-notice` and knobs in `.knob-*`.
"""
from __future__ import annotations

import argparse
import asyncio
import html
import json
import os
import random
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from explorer.sampling import knobs as schema  # noqa: E402  (the sidebar's knobs, declared once)

DONE = re.compile(r"^(\d+) steps, (\d+) model calls \([\d.]+ per call\), (\d+) ms$")  # the header's status after a run
STATUS = re.compile(r"<i>(.*?)</i>", re.S)
RUN = re.compile(r'class="hdr" data-run="(\d+)"')  # the number of the finished run the page shows (ui/header.py)
TAGS = re.compile(r"<[^>]+>")
CANVAS = re.compile(r'<p class="canvas[^"]*">(.*?)</p>', re.S)
# The sidebar's throttled widgets: the canvas's length and every sampler knob the schema shows as a slider
SLIDERS = ("length", *(k.name for k in schema.sidebar_knobs() if k.widget == "slider"))
TEMPERATURES = (0.5, 0.7, 0.8, 0.9, 1.0, 1.2)
STUDENT_KNOBS = ("seed", "temperature", "steps", "strategy")
IDENTITY_SEED = 1000
GOALS = {"p95_s": 2.0, "rss_growth_pct": 10.0}
DEFAULT_SERVER_ARGS = "--num-threads 4 --threads 2"
# (1+2+4+8+16+24+32+64) steps x 2 strategies x 64 samples: 19,328 calls, just under 20,000 (serve's default)
HOSTILE_QUERY = "tab=Sweep&sweep.steps_grid=1,2,4,8,16,24,32,64&sweep.samples=64&sweep.include_ar=false"
EPOCH = 100  # messages a client reads before its await chain is unwound (see Student._pump)


# ---------------------------------------------------------------------------- the server process

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants (from /proc/<pid>/task/*/children)."""
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return pids


def rss_mb(pid: int) -> float:
    """Resident memory of a process tree in MB (VmRSS; psutil is not needed)."""
    total = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass  # it just exited
    return total / 1024


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process (all its threads); 0 when it has just exited."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (stat's 14, 15)
    except (OSError, IndexError, ValueError):
        return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process tree."""
    return sum(process_cpu_seconds(p) for p in process_tree(pid))


def snapshot_checkpoints(source: Path, dest: Path) -> Path:
    """Copy every checkpoint (saves are atomic renames, so a copy is never torn)."""
    for path in source.glob("*.safetensors"):
        shutil.copy2(path, dest / path.name)
    return dest


class Server:
    """`python run.py serve` on a free port, as users start it; stopped with SIGTERM."""

    def __init__(self, checkpoint: str, checkpoints: Path, port: int, extra_args: str, log_path: Path):
        self.port = port or free_port()
        self.url = f"http://localhost:{self.port}/"
        self.log_path = log_path
        self.cmd = [sys.executable, str(ROOT / "run.py"), "serve", "--no-show", "--port", str(self.port),
                    "--checkpoint", checkpoint, "--liveness", *shlex.split(extra_args)]
        self.env = {**os.environ, "MDLM_EXPLORER_CHECKPOINTS": str(checkpoints)}
        self.proc = None

    def start(self, timeout: float = 120.0) -> None:
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:  # /liveness answers once Tornado listens, without making a session
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}):\n{self.log()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "liveness", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not answer within {timeout:.0f} s")
            time.sleep(0.2)

    def rss(self) -> float:
        return rss_mb(self.proc.pid)

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tracebacks(self) -> list[str]:
        """Each traceback in the server's log, as its last line (the exception)."""
        out, lines = [], self.log().splitlines()
        for i, line in enumerate(lines):
            if line.startswith("Traceback"):
                rest = [s for s in lines[i + 1:] if s and not s.startswith((" ", "\t"))]
                out.append(rest[0] if rest else "Traceback")
        return out

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self._log.close()


# ---------------------------------------------------------------------------- one page, as a client sees it

def register_client_models() -> None:
    """The client must know every model class the server's document uses. Panel's custom Bokeh models
    are registered when their modules are imported: each is imported when a document first names it
    (type "panel.models.markup.HTML" -> module panel.models.markup), never all of them. Importing all
    registered extension models the app does not use, Vizzu among them, whose JavaScript lives on a
    CDN; a server in the same process (the tests) then linked it into every page it served."""
    import importlib

    from bokeh.core.serialization import Deserializer
    from bokeh.model import Model

    if getattr(Deserializer._resolve_type, "imports_panel_models", False):
        return
    resolve = Deserializer._resolve_type  # private: Bokeh has no hook for unknown types

    def resolve_importing(self, name: str):
        if name not in Model.model_class_reverse_map and name.startswith("panel.models."):
            try:
                importlib.import_module(name.rsplit(".", 1)[0])
            except ImportError:
                pass  # Bokeh's own error names the type
        return resolve(self, name)

    resolve_importing.imports_panel_models = True
    Deserializer._resolve_type = resolve_importing
    try:
        importlib.import_module("explorer.dashboard.app")  # models the app itself may define
    except Exception:  # the page will say what is missing
        pass


def _unescape_markup(text: str) -> str:
    """Panel's HTML pane sends its markup escaped; the page shows it unescaped."""
    return html.unescape(text or "")


class Page:
    """The served dashboard's document in a Bokeh client: the widgets a student touches and the
    parts of the page that show the result, found by their CSS classes."""

    def __init__(self, document):
        self.doc = document
        by_class = {}
        for model in document.models:
            for name in getattr(model, "css_classes", None) or []:
                by_class.setdefault(name, model)
        self.knobs = {c[len("knob-"):].replace("-", "_"): m for c, m in by_class.items() if c.startswith("knob-")}
        self.header, self.text = by_class.get("dashboard-header"), by_class.get("sample-text")
        self.notice_model = by_class.get("error-notice")
        missing = [n for n, m in (("header", self.header), ("sample text", self.text), ("seed knob", self.knobs.get("seed")))
                   if m is None]
        if missing:
            raise RuntimeError(f"the page has no {', '.join(missing)}: it did not build (see the server log)")

    def status(self) -> str:
        found = STATUS.search(_unescape_markup(self.header.text))
        return html.unescape(found.group(1)).strip() if found else ""

    def run(self) -> int | None:
        """The number of the finished run whose result the page shows (None before the first)."""
        found = RUN.search(_unescape_markup(self.header.text))
        return int(found.group(1)) if found else None

    def notice(self) -> str:
        m = self.notice_model
        if m is None or not m.visible:
            return ""
        return html.unescape(TAGS.sub("", _unescape_markup(m.text))).strip()

    def final_text(self) -> str:
        """The sample text as the page shows it (characters only, tints dropped)."""
        found = CANVAS.search(_unescape_markup(self.text.text))
        return html.unescape(TAGS.sub("", found.group(1))) if found else ""

    def value(self, name: str):
        return self.knobs[name].value

    def options(self, name: str) -> list:
        return [o[0] if isinstance(o, (list, tuple)) else o for o in self.knobs[name].options]

    def set(self, name: str, value) -> None:
        """What a browser sends: a slider's value and, on release, its value_throttled (what the
        app listens to; read-only in Python, so set as an incoming JSON value is); an input's or a
        select's value."""
        model = self.knobs[name]
        model.value = value
        if name in SLIDERS:
            model.set_from_json("value_throttled", value)

    def sampler_knobs(self) -> dict:
        """The knobs the page shows, as SamplerConfig keywords (the schema's from_ui: threshold 0 = off, as
        the app reads it)."""
        return {k.name: k.from_ui(self.value(k.name)) for k in schema.sidebar_knobs() if k.name in self.knobs}


# ---------------------------------------------------------------------------- one student

@dataclass
class SessionResult:
    index: int
    completed: int = 0
    # per change made in the timed window: [knob, seconds to the result, the run's own ms as the status says]
    latencies: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    # changes whose own run never showed: runs finished after the change, none of them at its value (a lost
    # update), within --timeout; each is an error too, named apart from runs that did not finish at all
    unanswered: list = field(default_factory=list)
    identity_knobs: dict | None = None
    identity_length: int = 0
    identity_text: str | None = None
    identity_match: bool | None = None
    lesson_s: float = 0.0  # from the start of the window to this session's last timed result


class Student(threading.Thread):
    """One websocket session driven like a student: its own thread and Tornado IOLoop, so the
    client applies the server's patches while the student waits or thinks."""

    def __init__(self, index: int, url: str, opts, clock: "Clock"):
        super().__init__(name=f"student-{index}", daemon=True)
        self.url, self.opts, self.clock = url, opts, clock
        self.result = SessionResult(index)
        self.rng = random.Random(index)
        self.statuses: list[tuple[float, str, int | None]] = []  # every (time, status, run) the header showed
        self.notices: list[str] = []
        self.session = self.page = None
        self.run_ms = 0  # the sampler's time for the last finished run, from the status
        self.ready, self.finished = threading.Event(), threading.Event()
        self.arguments: dict | None = None  # the page's query (a shared link), as a browser's URL carries it

    def error(self, message: str) -> None:
        self.result.errors.append(message)

    def run(self) -> None:
        from bokeh.client import pull_session
        from tornado.ioloop import IOLoop

        loop = IOLoop()
        try:
            self.session = pull_session(url=self.url, io_loop=loop, arguments=self.arguments)
            loop.add_callback(self._main)
            self._pump()
        except Exception as e:
            self.error(f"client: {type(e).__name__}: {e}")
        finally:
            self.ready.set()
            self.finished.set()
            loop.close(all_fds=True)

    def _pump(self) -> None:
        """Run the IOLoop (patches in, changes out, `_main`) until the connection closes.

        bokeh.client reads each message in a coroutine that awaits the next one, so the await chain
        grows by three frames per message until its loop stops: a session that lives for a minute
        of streamed runs hits RecursionError, and resuming the chain costs more with every message.
        So the loop runs in epochs of EPOCH messages (the chain unwinds at the end of each; unread
        messages wait in the socket), through the loop-until-predicate the client itself uses for
        every request (it has no public blocking loop)."""
        conn = self.session._connection
        while conn.connected:
            seen = [0]

            def epoch_over() -> bool:
                seen[0] += 1
                return seen[0] > EPOCH or not conn.connected
            conn._loop_until(epoch_over)

    async def _main(self) -> None:
        try:
            await self._script()
        except Exception as e:  # recorded, never lost in the IOLoop's log
            self.error(f"client: {type(e).__name__}: {e}")
        finally:
            self.ready.set()
            self.finished.set()
            while not self.clock.close.is_set():
                await asyncio.sleep(0.05)
            self.session.close()

    def _watch(self) -> None:
        """Record every status and notice the server sends, in order (polling could miss the short
        'sampling …' of a fast run)."""
        self.page.header.on_change("text", lambda attr, old, new: self.statuses.append(
            (time.perf_counter(), self.page.status(), self.page.run())))
        if self.page.notice_model is not None:
            def notice(attr, old, new):
                if self.page.notice():
                    self.notices.append(self.page.notice())
            self.page.notice_model.on_change("visible", notice)
            self.page.notice_model.on_change("text", notice)

    async def _script(self) -> None:
        if not await self._open():
            return
        self.ready.set()
        while not self.clock.go.is_set():
            await asyncio.sleep(0.05)
        await self._lesson()
        self.result.lesson_s = time.perf_counter() - self.clock.t0
        await self._identity()

    async def _open(self) -> bool:
        """The page as a browser opens it: drawn (its model loads), then the classroom config set, each
        waiting for its run; False after an error."""
        from bokeh.events import DocumentReady

        self.page = Page(self.session.document)
        self._watch()
        mark = len(self.statuses)
        self.session.document.callbacks.send_event(DocumentReady())  # the page is drawn: load the model
        if await self._wait_done(mark, time.perf_counter(), self.opts.load_timeout) is None:
            return False
        self.clock.loaded.set()
        return await self._set_all({"length": self.opts.length, "steps": self.opts.steps})

    async def _lesson(self) -> None:
        while time.perf_counter() < self.clock.deadline:
            name = self.rng.choice(STUDENT_KNOBS)
            latency = await self._change(name, self._new_value(name))
            if latency is not None:
                self.result.completed += 1
                self.result.latencies.append([name, latency, self.run_ms])
            await asyncio.sleep(self.opts.think * self.rng.uniform(0.5, 1.5))

    def _new_value(self, name: str):
        """A value other than the current one (an unchanged value sends nothing)."""
        current, rng = self.page.value(name), self.rng
        if name == "seed":
            return rng.randrange(2**31 - 1)
        if name == "temperature":
            return rng.choice([t for t in TEMPERATURES if abs(t - current) > 1e-9])
        if name == "steps":
            s = self.opts.steps
            return rng.choice([v for v in {max(1, s // 2), s, min(256, 2 * s)} if v != current] or [s + 1])
        return rng.choice([o for o in self.page.options(name) if o != current])

    async def _identity(self) -> None:
        """Fixed knobs and a seed of its own, one change at a time (each waits for its run)."""
        target = {"strategy": "confidence", "temperature": 1.0, "steps": self.opts.steps,
                  "seed": IDENTITY_SEED + self.result.index}
        if not await self._set_all(target):
            return
        self.result.identity_knobs = self.page.sampler_knobs()
        self.result.identity_length = int(self.page.value("length"))
        self.result.identity_text = self.page.final_text()

    async def _set_all(self, knobs: dict) -> bool:
        """Set knobs one at a time, each waiting for its run; False after an error."""
        for name, value in knobs.items():
            end = getattr(self.page.knobs[name], "end", None)
            if end is not None and value > end:
                self.error(f"{name}={value} is beyond the widget's range (at most {end})")
                return False
            if self.page.value(name) != value and await self._change(name, value) is None:
                return False
        return True

    async def _change(self, name: str, value) -> float | None:
        """Set one knob; the seconds until the run it started has finished, None on an error."""
        mark, start, before = len(self.statuses), time.perf_counter(), self.page.run()
        self.page.set(name, value)
        return await self._wait_done(mark, start, self.opts.timeout, f"{name}={value!r}", before, (name, value))

    def _answers(self, done: re.Match, change: tuple | None) -> bool:
        """Whether a finished run is the one `change` (knob, value) asked for: its status gives the
        step count it ran (the classroom's runs are scheduled, one block: the knob's value), and the
        page still shows the value set (a change undone by the server would show the old one)."""
        if change is None:
            return True
        name, value = change
        if name == "steps" and int(done.group(1)) != value:
            return False
        shown = self.page.value(name)
        return abs(float(shown) - float(value)) < 1e-9 if isinstance(value, (int, float)) else shown == value

    async def _wait_done(self, mark: int, start: float, timeout: float, what: str = "load",
                         before: int | None = None, change: tuple | None = None) -> float | None:
        """The seconds to the first finished status of a run after run `before` (the one shown when
        the change was made; None: any run) that answers `change` (the knob and value set; _answers),
        by the run number the header carries with it: the status text may be the same as the last
        run's, and a run finished after the change may still be of the knobs before it (a lost
        update). None, with the error recorded, on a failed or stopped run, a notice, a lost
        connection, or no such result within `timeout` ('never answered' when other runs finished)."""
        notices, others = len(self.notices), set()  # the runs after the change that did not answer it
        while True:
            for t, status, run in self.statuses[mark:]:
                if status in ("failed", "stopped"):
                    return self._fail(f"{what}: status {status!r}: {self.page.notice()}")
                done = DONE.match(status)
                if done and run is not None and (before is None or run > before):
                    if not self._answers(done, change):
                        others.add(run)  # a run after the change, of other knobs: keep waiting for its own
                        continue
                    self.run_ms = int(done.group(3))
                    return t - start
            mark = len(self.statuses)
            if len(self.notices) > notices:
                return self._fail(f"{what}: notice {self.notices[-1]!r}")
            if not self.session.connected:
                return self._fail(f"{what}: connection lost")
            if time.perf_counter() - start > timeout and others:
                self.result.unanswered.append(what)
                return self._fail(f"{what}: never answered: {len(others)} run(s) finished after it within {timeout:.0f} s, "
                                  f"none at its value (status {self.page.status()!r})")
            if time.perf_counter() - start > timeout:
                shown = self.page.run()
                shown = "no finished run shown" if shown is None else f"run {shown} shown"
                return self._fail(f"{what}: no result after {timeout:.0f} s (status {self.page.status()!r}, "
                                  f"{shown}, waiting for a run after {before})")
            await asyncio.sleep(0.01)

    def _fail(self, message: str) -> None:
        self.error(message)
        return None


class Hostile(Student):
    """One session asking for the most the server allows (--hostile): it opens a shared link (the
    query --hostile-query, by default a Sweep grid just under `serve`'s default --max-calls-per-request)
    and presses the sweep's Run whenever it is not running, with a new seed after each finished sweep
    so the cache never answers, until the round ends. It is not one of the N students: its latency
    and identity are not counted, and what its page said is reported beside the round."""

    def __init__(self, url: str, query: str, opts, clock: "Clock"):
        super().__init__(-1, url, opts, clock)
        self.name = "hostile"
        self.arguments = dict(parse_qsl(query))
        self.clicks, self.sweep_status, self.sweeping = 0, "", threading.Event()

    async def _script(self) -> None:
        from bokeh.events import ButtonClick, DocumentReady

        self.page = Page(self.session.document)
        self._watch()
        self.session.document.callbacks.send_event(DocumentReady())
        models = {c: m for m in self.session.document.models for c in getattr(m, "css_classes", None) or []}
        run, stop, status = (models.get(f"sweep-main-{k}") for k in ("run", "stop", "status"))
        if run is None:
            return self.error("the hostile link's page has no Sweep tab in view")
        self.ready.set()
        while not self.clock.close.is_set():
            self.sweep_status = html.unescape(TAGS.sub("", _unescape_markup(status.text)))
            if re.search(r"samples|starting", self.sweep_status):
                self.sweeping.set()
            if self.sweep_status.startswith("done"):  # a new seed: the next sweep is not in the cache
                self.page.set("seed", self.rng.randrange(2**31 - 1))
                await asyncio.sleep(1.0)
            elif stop.disabled and ("Run" in self.sweep_status or "press Run" in self.sweep_status):
                self.session.document.callbacks.send_event(ButtonClick(run))
                self.clicks += 1
                await asyncio.sleep(1.0)
            await asyncio.sleep(0.2)

    def report(self) -> dict:
        return {"query": self.arguments, "run_clicks": self.clicks, "sweep_status": self.sweep_status,
                "notices": self.notices[-3:], "errors": self.result.errors}


class Scrubber(Student):
    """One session dragging the temperature slider (--scrub SECONDS): once its model has loaded and the
    classroom config is set, it moves the slider's value every 1 / --scrub-rate s for SECONDS, back and
    forth between 0.5 and 1.5, as a browser sends a drag when the server scrubs (`serve --scrub`: each
    value sent while dragging, no release), and counts the finished runs the header showed meanwhile
    (their numbers, data-run: each a whole run of a value the slider passed through)."""

    VALUES = [round(0.5 + 0.02 * i, 2) for i in range(51)] + [round(1.5 - 0.02 * i, 2) for i in range(1, 50)]

    def __init__(self, url: str, opts, clock: "Clock"):
        super().__init__(0, url, opts, clock)
        self.name, self.report = "scrubber", None

    async def _script(self) -> None:
        if not await self._open():
            return
        before, slider = self.page.run(), self.page.knobs["temperature"]
        t0, moves = time.perf_counter(), 0
        while time.perf_counter() - t0 < self.opts.scrub:
            slider.value = self.VALUES[moves % len(self.VALUES)]
            moves += 1
            await asyncio.sleep(1.0 / self.opts.scrub_rate)
        seconds = time.perf_counter() - t0
        runs = {}  # each finished run shown during the drag: its own ms, as its status says
        for t, status, run in self.statuses:
            done = DONE.match(status)
            if done and t - t0 <= seconds and run is not None and run > (before or 0):
                runs[run] = int(done.group(3))
        self.report = dict(seconds=seconds, moves=moves, runs=len(runs), runs_per_s=len(runs) / seconds,
                           run_ms_p50=statistics.median(runs.values()) if runs else float("nan"))


def scrub_round(opts, workdir: Path) -> dict:
    """A fresh server and one Scrubber; returns its report (and its errors)."""
    server = Server(opts.checkpoint, workdir / "checkpoints", opts.port, opts.server_args, workdir / "server-scrub.log")
    server.start()
    try:
        register_client_models()
        clock = Clock()
        scrubber = Scrubber(server.url, opts, clock)
        scrubber.start()
        scrubber.finished.wait(opts.load_timeout + opts.scrub + 2 * opts.timeout)
        clock.close.set()
        scrubber.join(30)
    finally:
        server.stop()
    return dict(scrubber.report or {}, errors=scrubber.result.errors + server.tracebacks())


class Clock:
    """What the sessions share: the first model load, the start of the timed window, the close."""

    def __init__(self):
        self.loaded, self.go, self.close = threading.Event(), threading.Event(), threading.Event()
        self.t0 = self.deadline = float("inf")

    def start(self, seconds: float) -> None:
        self.t0 = time.perf_counter()
        self.deadline = self.t0 + seconds
        self.go.set()


# ---------------------------------------------------------------------------- one round of N sessions

def run_sessions(url: str, n: int, seconds: float, opts, probe=None) -> dict:
    """N students on the served app at `url`. `probe()` (e.g. the server's RSS) is read after the
    first model load, when all are ready, and when all have finished."""
    register_client_models()
    probe = probe or (lambda: None)
    clock = Clock()
    students = [Student(i, url, opts, clock) for i in range(n)]
    hostile = Hostile(url, opts.hostile_query, opts, clock) if opts.hostile else None
    cpu0 = time.process_time()
    for s in students:
        s.start()
    out = {}
    clock.loaded.wait(opts.load_timeout)
    out["probe_loaded"] = probe()
    for s in students:
        s.ready.wait(opts.load_timeout)
    out["probe_start"] = probe()
    if hostile is not None:  # the students' window starts once its sweep is under way
        hostile.start()
        hostile.sweeping.wait(opts.load_timeout)
        out["probe_hostile"] = probe()
    t0 = time.perf_counter()
    clock.start(seconds)
    for s in students:
        s.finished.wait(seconds + 6 * opts.timeout)  # the last change, then up to 4 identity knobs
    out["wall_s"] = max(time.perf_counter() - t0, 1e-3)
    out["probe_end"] = probe()
    clock.close.set()
    for s in students + [hostile] * (hostile is not None):
        s.join(30)
    out["client_cpu_s"] = time.process_time() - cpu0
    out["sessions"] = [s.result for s in students]
    out["hostile"] = hostile.report() if hostile is not None else None
    return out


def serve_options(server_args: str = DEFAULT_SERVER_ARGS) -> argparse.Namespace:
    """`run.py serve`'s own reading of --server-args (threads, precision, ...)."""
    from explorer.cli import serve

    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    args = parser.parse_args(shlex.split(server_args))
    if args.precision is None:
        args.precision = os.environ.get("MDLM_EXPLORER_PRECISION", "").strip().lower() or "fp32"
    return args


def solo_texts(checkpoint: str, checkpoints: Path, results: list[SessionResult],
               server_args: str = DEFAULT_SERVER_ARGS) -> None:
    """Each session's identity knobs through the Python API, alone, on the server's device with its
    threads and precision (the same kernels, the same floats); sets identity_match."""
    import torch

    from explorer.checkpoint import load_checkpoint
    from explorer.dashboard.runtime.queue import DeviceQueue
    from explorer.devices import resolve_device
    from explorer.sampling import SamplerConfig, sample_any

    served = serve_options(server_args)
    torch.set_num_threads(served.threads or 1)
    device = resolve_device(served.device)
    precision = DeviceQueue(device.type, precision=served.precision)  # what the server's queue runs at
    model = None
    for r in results:
        if r.identity_knobs is None:
            continue
        if model is None:  # the very file the server served
            model = load_checkpoint(checkpoints / f"{checkpoint}.safetensors", device)
        with precision.autocast():
            traj = sample_any(model, SamplerConfig(**r.identity_knobs), length=r.identity_length)
        r.identity_match = traj.texts(model.tokenizer)[0] == r.identity_text


def run_round(n: int, seconds: float, opts, workdir: Path) -> dict:
    """A fresh server, N sessions, the solo reference; one row of the report."""
    server = Server(opts.checkpoint, workdir / "checkpoints", opts.port, opts.server_args, workdir / f"server-{n}.log")
    server.start()
    cpu0, load = server.cpu(), os.getloadavg()[0]
    try:
        out = run_sessions(server.url, n, seconds, opts, probe=server.rss)
        out["server_cpu_s"] = server.cpu() - cpu0
        out["server_alive"] = server.proc.poll() is None
        out["load_average"] = [round(load, 2), round(os.getloadavg()[0], 2)]  # other jobs on the machine show here
    finally:
        server.stop()
    out["server_tracebacks"] = server.tracebacks()
    solo_texts(opts.checkpoint, workdir / "checkpoints", out["sessions"], opts.server_args)
    return summarise(n, seconds, opts, out)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def summarise(n: int, seconds: float, opts, out: dict) -> dict:
    sessions = out["sessions"]
    latencies = [x for s in sessions for _, x, _ in s.latencies]
    run_s = [ms / 1000 for s in sessions for _, _, ms in s.latencies]
    by_knob = {k: [x for s in sessions for name, x, _ in s.latencies if name == k] for k in STUDENT_KNOBS}
    errors = [f"session {s.index}: {e}" for s in sessions for e in s.errors]
    errors += [f"server log: {t}" for t in out["server_tracebacks"]]
    if not out["server_alive"]:
        errors.append("server: exited during the run")
    mismatched = [s.index for s in sessions if s.identity_match is False]
    unchecked = [s.index for s in sessions if s.identity_match is None]
    start, end = out["probe_start"], out["probe_end"]
    row = {"sessions": n, "seconds": seconds, "think_s": opts.think, "requests": len(latencies),
           "errors": len(errors), "unanswered": sum(len(s.unanswered) for s in sessions), "p50_s": percentile(latencies, 50), "p95_s": percentile(latencies, 95),
           "max_s": max(latencies, default=float("nan")),
           "req_per_s": len(latencies) / max([s.lesson_s for s in sessions] + [1e-3]),
           "rss_loaded_mb": out["probe_loaded"], "rss_start_mb": start, "rss_end_mb": end,
           "rss_growth_pct": 100 * (end - start) / start if start else float("nan"),
           "identity_mismatches": mismatched, "identity_unchecked": unchecked,
           # a round whose sessions never got going has no window to spread the CPU over (not 858,000%)
           "server_cpu_pct": 100 * out["server_cpu_s"] / out["wall_s"] if latencies else float("nan"),
           "server_cpu_per_request_s": out["server_cpu_s"] / len(latencies) if latencies else float("nan"),
           "client_cpu_pct": 100 * out["client_cpu_s"] / out["wall_s"] if latencies else float("nan"),
           "error_list": errors,
           "p50_by_knob": {k: [len(v), percentile(v, 50)] for k, v in by_knob.items()},
           "run_p50_s": percentile(run_s, 50), "run_p95_s": percentile(run_s, 95),
           "load_average": out.get("load_average"), "hostile": out.get("hostile"),
           "rss_hostile_mb": out.get("probe_hostile"),
           "per_session": [asdict(s) | {"identity_text": None} for s in sessions]}
    row["pass"] = (row["errors"] == 0 and row["p95_s"] <= GOALS["p95_s"] and not mismatched and not unchecked
                   and row["rss_growth_pct"] < GOALS["rss_growth_pct"])
    return row


# ---------------------------------------------------------------------------- report

COLUMNS = (("N", "sessions", "{:d}"), ("M s", "seconds", "{:g}"), ("requests", "requests", "{:d}"),
           ("errors", "errors", "{:d}"), ("never answered", "unanswered", "{:d}"), ("p50 s", "p50_s", "{:.2f}"), ("p95 s", "p95_s", "{:.2f}"),
           ("max s", "max_s", "{:.2f}"), ("req/s", "req_per_s", "{:.2f}"),
           ("RSS load MB", "rss_loaded_mb", "{:.0f}"), ("RSS start MB", "rss_start_mb", "{:.0f}"),
           ("RSS end MB", "rss_end_mb", "{:.0f}"), ("RSS growth", "rss_growth_pct", "{:+.1f}%"),
           ("identity", None, None), ("server CPU", "server_cpu_pct", "{:.0f}%"),
           ("client CPU", "client_cpu_pct", "{:.0f}%"))


def cell(row: dict, key, fmt) -> str:
    if key is None:  # identity: sessions whose text matched the solo run
        bad = len(row["identity_mismatches"]) + len(row["identity_unchecked"])
        return f"{row['sessions'] - bad}/{row['sessions']}"
    value = row[key]
    return "n/a" if value is None or (isinstance(value, float) and value != value) else fmt.format(value)


def print_table(rows: list[dict]) -> None:
    cells = [[h for h, _, _ in COLUMNS]] + [[cell(r, k, f) for _, k, f in COLUMNS] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    for i, line in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(line, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def print_details(row: dict) -> None:
    knobs = ", ".join(f"{k} {cell({'v': p}, 'v', '{:.2f}')} s ({n})" for k, (n, p) in row["p50_by_knob"].items())
    print(f"  p50 by knob (count): {knobs}", flush=True)
    print(f"  the runs themselves (sampler time in the status): p50 {cell(row, 'run_p50_s', '{:.2f}')} s, "
          f"p95 {cell(row, 'run_p95_s', '{:.2f}')} s; the server's CPU over the round (the pages' builds too) per answered change "
          f"{cell(row, 'server_cpu_per_request_s', '{:.3f}')} s; load average at start/end {row['load_average']}", flush=True)
    if row.get("hostile"):
        h = row["hostile"]
        print(f"  hostile session: {h['run_clicks']} Run clicks, RSS {cell(row, 'rss_hostile_mb', '{:.0f}')} MB "
              f"once its sweep was under way; its sweep said {h['sweep_status']!r}; notices {h['notices']}; "
              f"errors {h['errors']}", flush=True)
    for e in row["error_list"][:10]:
        print("  error:", e)
    if len(row["error_list"]) > 10:
        print(f"  ... and {len(row['error_list']) - 10} more errors")


def summary_line(row: dict) -> str:
    verdict = "PASS" if row["pass"] else "FAIL"
    mism = row["identity_mismatches"]
    ident = "identical to solo" if not mism and not row["identity_unchecked"] else \
        f"mismatch {mism} unchecked {row['identity_unchecked']}"
    return (f"N={row['sessions']} M={row['seconds']:g}s: {verdict} - {row['requests']} requests, {row['errors']} errors, "
            f"p50 {cell(row, 'p50_s', '{:.2f}')} s, p95 {cell(row, 'p95_s', '{:.2f}')} s (goal <= {GOALS['p95_s']:g}), "
            f"RSS {row['rss_start_mb']:.0f} -> {row['rss_end_mb']:.0f} MB ({row['rss_growth_pct']:+.1f}%, goal < "
            f"{GOALS['rss_growth_pct']:g}%), {ident}")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, nargs="*", default=[8, 30], help="N: concurrent sessions (a list: one round each)")
    p.add_argument("--seconds", type=float, default=60.0, help="M: seconds each session turns knobs")
    p.add_argument("--think", type=float, default=1.0, help="mean seconds between a result and the next change")
    p.add_argument("--checkpoint", default="shakespeare", help="checkpoint name in checkpoints/")
    p.add_argument("--length", type=int, default=256, help="canvas length the class uses")
    p.add_argument("--steps", type=int, default=32, help="steps the class uses (students try half and double)")
    p.add_argument("--port", type=int, default=0, help="server port (0 = a free one)")
    p.add_argument("--server-args", default=DEFAULT_SERVER_ARGS, help="more `run.py serve` flags")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds before a change without a result is an error")
    p.add_argument("--load-timeout", type=float, default=300.0, help="seconds for every session to load and be ready")
    p.add_argument("--quick", action="store_true", help="smoke check: N=2, M=10")
    p.add_argument("--json", type=Path, default=None, help="also write the rows here")
    p.add_argument("--hostile", action="store_true",
                   help="one more session, not among the N, asks for the most the limits allow throughout the "
                        "round (--hostile-query), to see what it costs the others")
    p.add_argument("--hostile-query", default=HOSTILE_QUERY,
                   help="the hostile session's link (default: a Sweep grid of 19,328 model calls counted per "
                        "sample at 256 characters, under `serve`'s default --max-calls-per-request)")
    p.add_argument("--scrub", type=float, default=0.0, metavar="SECONDS",
                   help="also one session alone dragging the temperature slider for SECONDS (the server must "
                        "scrub: `serve --scrub on`, the default on a GPU): finished runs shown a second")
    p.add_argument("--scrub-rate", type=float, default=30.0, help="slider moves a second while scrubbing")
    args = p.parse_args(argv)
    if args.quick:
        args.sessions, args.seconds = [2], 10.0
    return args


def main(argv=None) -> int:
    opts = parse_args(argv)
    source = Path(os.environ.get("MDLM_EXPLORER_CHECKPOINTS") or ROOT / "checkpoints")
    if not (source / f"{opts.checkpoint}.safetensors").is_file():
        print(f"no checkpoint {opts.checkpoint!r} in {source}", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="load-test-") as tmp:
        workdir = Path(tmp)
        snapshot_checkpoints(source, (workdir / "checkpoints").mkdir() or workdir / "checkpoints")
        for n in opts.sessions:
            print(f"# N={n}: {opts.checkpoint}, length {opts.length}, {opts.steps} steps, {opts.seconds:g} s, "
                  f"think {opts.think:g} s, serve {opts.server_args}", flush=True)
            rows.append(run_round(n, opts.seconds, opts, workdir))
            print_details(rows[-1])
        if opts.scrub:
            scrub = scrub_round(opts, workdir)
            print(f"# scrubbing: temperature dragged for {scrub.get('seconds', 0):.1f} s ({scrub.get('moves', 0)} "
                  f"moves): {scrub.get('runs', 0)} finished runs shown, {scrub.get('runs_per_s', 0):.1f} a second "
                  f"(the runs p50 {scrub.get('run_ms_p50', float('nan')):.0f} ms); errors {scrub['errors'][:3]}",
                  flush=True)
    print()
    print_table(rows)
    for row in rows:
        print(summary_line(row))
    if serve_options(opts.server_args).precision != "fp32":
        print("note: reduced precision is not batch-invariant: a session's text may differ from its solo run "
              "at the same precision (explorer/dashboard/runtime/queue.py)")
    if opts.json:
        opts.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0 if all(r["pass"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
