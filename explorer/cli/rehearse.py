"""`python run.py rehearse`: open every lesson figure's link in Chromium, as a class would, before the class.

    python run.py rehearse                                  # every figure, on a server it starts
    python run.py rehearse --lessons generation --figures 1-3 --timeout 120
    python run.py rehearse --sample 4 --out /tmp/rehearsal  # four figures, each tab at least once
    python run.py rehearse --base-url http://lab-server:5006/ --password "$PASSWORD"

Each figure's link (explorer/dashboard/lessons.py, at projector size 1366x768 with presentation=true) is
opened twice in a row (the second visit is served from the caches), then three times at once (three
students). A page has completed when the header's `data-settled` names the figure's tab (ui/header.py:
its result is shown, or a Run button waits); it hung when that did not happen within --timeout (the
report quotes the header's last status and how long it had not changed, to tell a hang from a slow load);
it failed on a console error, a page error, a visible warning or error notice, another tab than the
link's, a traceback in the server's log, or a layout that fails the projector check (dashboard/projector.py:
the figure not whole in the first screen, or a view that overflows; the `layout` column says which). Prints
a table and a summary line; writes a screenshot of every page, report.json and report.md to --out. Exit status 0 when every figure completed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import CLIError, float_in, int_in

VIEWPORT = {"width": 1366, "height": 768}  # a projector's
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
AT_ONCE = 3  # pages opened together on a figure, after two visits one after the other
POLL_S = 0.25
QUIET_S = 0.5  # after the result: the page's last redraws, before its screenshot
DRAW_S = 10  # after the result: how long the figure may take to be drawn before the layout check
SERVER_START_S = 180
ORDER = {"completed": 0, "error": 1, "hung": 2}  # a figure's result: its worst page's


def add_arguments(p: argparse.ArgumentParser):
    p.add_argument("--lessons", default=None, metavar="SLUG,...",
                   help="only these lessons (comma list of slugs; default all; --list shows them)")
    p.add_argument("--figures", default=None, metavar="LIST",
                   help="only these figures: numbers and ranges of the selection as --list numbers them "
                        "(1,4,7-9), or SLUG:N (that lesson's figure N)")
    p.add_argument("--sample", type=int_in(1), default=None, metavar="N",
                   help="N figures of the selection, every tab among them before any tab twice, spread evenly")
    p.add_argument("--variants", action="store_true",
                   help="also the figures' other links (e.g. the same view at other t values)")
    p.add_argument("--timeout", type=float_in(1, 3600), default=300.0, metavar="S",
                   help="seconds a page may take to show its result before it counts as hung; default 300")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="where the screenshots and the report go; default rehearsal/<date-time>/")
    p.add_argument("--port", type=int_in(0, 65535), default=0,
                   help="port of the server rehearse starts (0 = any free port); default 0")
    p.add_argument("--serve-args", default="", metavar="ARGS",
                   help="more arguments for that server's `python run.py serve`, e.g. '--threads 1'")
    p.add_argument("--base-url", default=None, metavar="URL",
                   help="rehearse this running server instead of starting one (e.g. http://lab-server:5006/)")
    p.add_argument("--user", default="rehearsal", help="login name for a --basic-auth server; default rehearsal")
    p.add_argument("--password", default=None,
                   help="log in first (a --basic-auth server; with --base-url). MDLM_EXPLORER_REHEARSE_PASSWORD "
                        "keeps it out of `ps`")
    p.add_argument("--list", action="store_true", help="list the selected figures, numbered, and stop")


# ---------------------------------------------------------------------------------- what is rehearsed

@dataclass(frozen=True)
class Item:
    """One link rehearsed: a figure's main link or one of its variants."""

    number: int  # in the selection, from 1
    name: str  # e.g. generation#4, or generation#4 [2] for a variant
    section: str
    tab: str
    query: str
    figure: object  # lessons.Figure


def select(args) -> list[Item]:
    """The figures --lessons, --figures and --sample choose (CLIError naming a bad value), as Items."""
    from ..dashboard import lessons

    chosen = list(lessons.all_figures())
    if args.lessons is not None:
        slugs = [s.strip() for s in args.lessons.split(",")]
        try:
            chosen = [fig for slug in slugs for fig in lessons.lesson(slug).figures]
        except ValueError as e:
            raise CLIError(f"--lessons: {e}") from None
    if args.figures is not None:
        chosen = pick(chosen, args.figures)
    if args.sample is not None:
        chosen = sample(chosen, args.sample)
    return items(chosen, args.variants)


def pick(figures: list, text: str) -> list:
    """The figures `text` names: 1-based numbers and ranges of `figures`, or SLUG:N (Figure.index N)."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if ":" in part:
            slug, _, n = part.partition(":")
            found = [f for f in figures if f.lesson == slug and str(f.index) == n.strip()]
        else:
            lo, _, hi = part.partition("-")
            try:
                first, last = int(lo), int(hi or lo)
            except ValueError:
                first = last = 0
            found = figures[first - 1:last] if 1 <= first <= last <= len(figures) else []
        if not found:
            raise CLIError(f"--figures: {part!r} names no figure of the {len(figures)} selected (numbers 1-"
                           f"{len(figures)} as --list shows them, or SLUG:N)")
        out += [f for f in found if f not in out]
    return out


def sample(figures: list, n: int) -> list:
    """`n` of `figures`: the first of each tab, then the others evenly spread; in their order."""
    firsts = list({f.tab: f for f in reversed(figures)}.values())[::-1][:n]
    rest = [f for f in figures if f not in firsts]
    k = n - len(firsts)
    spread = [rest[round(i * len(rest) / k)] for i in range(k)] if k > 0 and rest else []
    keep = set(map(id, firsts + spread))
    return [f for f in figures if id(f) in keep]


def items(figures: list, variants: bool) -> list[Item]:
    out = []
    for fig in figures:
        links = [("", fig.query), *((f" [{label}]", q) for label, q in fig.variants)] if variants else [("", fig.query)]
        for suffix, query in links:
            out.append(Item(len(out) + 1, f"{fig.lesson}#{fig.index}{suffix}", fig.section, fig.tab, query, fig))
    return out


# ---------------------------------------------------------------------------------- the server

@contextlib.contextmanager
def server(args, out: Path):
    """The dashboard's address: --base-url once it answers, or a `python run.py serve` started here
    (its log in out/server.log) until the rehearsal ends."""
    if args.base_url:
        answer(args.base_url)
        yield args.base_url, None
        return
    port = args.port or free_port()
    log = out / "server.log"
    command = [sys.executable, "-c", "import sys; from explorer.cli import main; sys.exit(main(sys.argv[1:]))",
               "serve", "--no-show", "--port", str(port), *shlex.split(args.serve_args)]
    with open(log, "wb") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_listening(proc, port, log)
        yield f"http://localhost:{port}/", log
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def wait_listening(proc, port: int, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            last = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise CLIError(f"the server stopped at start (exit {proc.returncode}): {last[0]}")
        with contextlib.suppress(OSError), socket.create_connection(("localhost", port), timeout=1):
            return
        time.sleep(0.3)
    raise CLIError(f"the server did not listen on port {port} within {SERVER_START_S} s (see {log})")


def answer(url: str) -> None:
    """Any HTTP answer from `url` will do (a login page's redirect, 401); none is a CLIError."""
    try:
        urllib.request.urlopen(url, timeout=30).close()
    except urllib.error.HTTPError:
        pass
    except (OSError, ValueError) as e:
        raise CLIError(f"--base-url {url}: no answer ({getattr(e, 'reason', e)})") from None


# ---------------------------------------------------------------------------------- the browser

# In a page: the header line's data-settled and text, the visible warning and error notices, and the tab
# shown (every shadow root walked: Panel draws its panes inside them)
PROBE_JS = """() => {
  const out = {settled: null, status: '', notices: [], tab: null};
  const walk = root => { for (const el of root.querySelectorAll('*')) {
    const c = el.classList;
    if (c && c.contains('hdr') && out.settled === null && el.hasAttribute('data-settled')) {
      out.settled = el.getAttribute('data-settled'); out.status = el.textContent; }
    else if (c && c.contains('hdr') && !out.status) out.status = el.textContent;
    if (c && (c.contains('alert-danger') || c.contains('alert-warning')) && el.getClientRects().length
        && el.textContent.trim()) out.notices.push(el.textContent.trim());
    if (c && c.contains('bk-tab') && c.contains('bk-active')) out.tab = el.textContent.trim();
    if (el.shadowRoot) walk(el.shadowRoot); } };
  walk(document); return out; }"""


@contextlib.contextmanager
def chromium():
    """A headless Chromium (the machine's, plots.chromium_path(), else playwright's own)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise CLIError("rehearse needs playwright: pip install playwright (and Debian's chromium-headless-shell "
                       "or chromium, or `playwright install chromium`)") from None
    with sync_playwright() as pw:
        from ..plots import chromium_path

        executable = chromium_path()
        try:
            browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        except Exception as e:  # playwright's Error: no browser at all
            raise CLIError(f"cannot start Chromium: {str(e).strip().splitlines()[0]}") from None
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Page:
    """One page opened on a link, and what it showed."""

    label: str  # 1st, 2nd, at once 1 ...
    shot: str = ""
    seconds: float | None = None  # from opening the link to the header naming the tab settled
    outcome: str = ""  # completed, hung or error
    status: str = ""  # the header's last text
    unchanged: float = 0.0  # seconds the header's text had not changed when the page ended
    problems: list = field(default_factory=list)
    layout: dict | None = None  # the projector check's result (dashboard/projector.judge), once completed
    fatal: bool = False  # a problem that ends the page at once (it could not open; the server failed)
    handle: object = field(default=None, repr=False)
    started: float = 0.0
    changed: float = 0.0


def open_page(browser, url: str, label: str, login: tuple | None, timeout: float) -> Page:
    """A new browser context (a student of its own) at `url`, its console and page errors collected. A
    server that sends no page within `timeout` seconds leaves the page blank (watch then finds it hung)."""
    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    page = Page(label, handle=tab)
    tab.on("console", lambda m: page.problems.append(f"console: {m.text}") if m.type == "error" else None)
    tab.on("pageerror", lambda e: page.problems.append(f"page error: {e}"))
    # (a stylesheet from a CDN: the page is meant to need nothing from outside the server)
    tab.on("requestfailed", lambda r: page.problems.append(f"request failed: {r.url} ({r.failure})"))
    if login is not None:
        log_in(tab, url, *login)
    page.started = page.changed = time.monotonic()
    try:
        tab.goto(url, wait_until="commit", timeout=timeout * 1000)
    except Exception as e:  # playwright's TimeoutError, or no server at all
        if "Timeout" not in type(e).__name__:
            page.problems.append(f"open: {str(e).strip().splitlines()[0]}")
            page.fatal = True
    return page


def log_in(tab, url: str, user: str, password: str) -> None:
    """The dashboard's login page (serve --basic-auth): its session cookie stays in the page's context."""
    tab.goto(url.split("?")[0] + "login")
    tab.fill("input[name=username]", user)
    tab.fill("input[name=password]", password)
    tab.locator("form").evaluate("form => form.submit()")
    tab.wait_for_load_state()
    if "/login" in tab.url:
        raise CLIError(f"--password: the login at {url.split('?')[0]}login was refused")


def watch(pages: list[Page], tab_name: str, timeout: float, shots: list[Path], log: Path | None = None,
          offset: int = 0, query: str = "") -> None:
    """Poll `pages` until each shows its result (the header names `tab_name` settled) or `timeout` runs out;
    each page's screenshot goes to its path in `shots`, and a page that completed has the layout check of
    its link's `query`. An error in the server's `log` since `offset` ends the pages left at once (a page
    the server failed to build would wait out the timeout)."""
    waiting = list(zip(pages, shots))
    while waiting:
        for problem in server_problems(log, offset)[:1]:
            for page, _ in waiting:
                page.problems.append(f"server: {problem}")
                page.fatal = True
        # Every page is looked at until all have ended, and only then finished: finishing one (its quiet
        # wait, the layout check, which waits for a figure to be drawn, the screenshot) takes seconds, and
        # pages opened at once that showed their result meanwhile would be timed as if they had waited.
        waiting = [(page, shot) for page, shot in waiting if not look(page, tab_name, timeout)]
        if waiting:
            waiting[0][0].handle.wait_for_timeout(POLL_S * 1000)
    for page, shot in zip(pages, shots):
        end_page(page, tab_name, shot, query)


def look(page: Page, tab_name: str, timeout: float) -> bool:
    """One look at `page`: True once it has ended (showed its result, failed, or hung); the time it took
    to show its result is taken the first time it is seen shown."""
    now = time.monotonic()
    try:
        seen = page.handle.evaluate(PROBE_JS)
    except Exception as e:  # still loading (its context replaced), or crashed
        seen = {"settled": None, "status": page.status, "notices": [], "tab": None}
        if page.handle.is_closed():
            page.problems.append(f"page: {str(e).strip().splitlines()[0]}")
            page.fatal = True
    status = " ".join((seen["status"] or "").split())
    if status != page.status:
        page.status, page.changed = status, now
    if seen["settled"] is not None and tab_name in seen["settled"].split():
        page.seconds = round(now - page.started, 1)
    elif now - page.started < timeout and not page.fatal:
        return False
    page.unchanged = round(now - page.changed, 1)
    return True


def end_page(page: Page, tab_name: str, shots: Path, query: str = "") -> None:
    """A page that has ended (look): once it showed its result, its last redraws, the tab it shows and its
    layout checked; its notices; its outcome; its screenshot taken, and the page closed."""
    done = page.seconds is not None
    seen = {"notices": []}
    if done:
        page.handle.wait_for_timeout(QUIET_S * 1000)
        with contextlib.suppress(Exception):  # a page that crashed meanwhile: its screenshot says so
            seen = page.handle.evaluate(PROBE_JS)
            if seen["tab"] != tab_name:
                page.problems.append(f"the page shows the {seen['tab']} tab, not {tab_name}")
        check_layout(page, query)
    elif not page.handle.is_closed():
        with contextlib.suppress(Exception):
            seen = page.handle.evaluate(PROBE_JS)
    page.problems += [f"notice: {text}" for text in seen["notices"]]
    page.outcome = "error" if page.problems else "completed" if done else "hung"
    finish(page, shots)


def check_layout(page: Page, query: str) -> None:
    """The projector check (dashboard/projector.py) of a page that showed its result: a figure not whole in
    the first screen, or a view that overflows, is a problem of the page (which then failed)."""
    from ..dashboard.projector import DRAWN_JS, check, figure_selector

    waiting = _waits_for_its_button(page.handle)  # its figure comes once Run is pressed: no wait for it
    if not waiting:
        with contextlib.suppress(Exception):  # not drawn in time: the check says so
            page.handle.wait_for_function(DRAWN_JS, arg=figure_selector(query), timeout=DRAW_S * 1000, polling=250)
    try:
        page.layout = check(page.handle, query, VIEWPORT["width"], VIEWPORT["height"])
    except Exception as e:  # the page closed or navigated meanwhile
        page.problems.append(f"layout: not measured ({str(e).strip().splitlines()[0]})")
        return
    if not page.layout["drawn"] and waiting:
        # a completed page (a Run button waits: the request is over the limit a link starts by itself, which
        # the server's --auto-start-seconds sets); the figure is drawn once Run is pressed
        page.layout = {**page.layout, "waiting": True, "problems": []}
    page.problems += [f"layout: {problem}" for problem in page.layout["problems"]]


def _waits_for_its_button(handle) -> bool:
    """Whether the page says its request waits for a click (runtime/limits.waiting_note)."""
    from ..dashboard.runtime.limits import WAITING

    with contextlib.suppress(Exception):
        return handle.get_by_text(WAITING).count() > 0
    return False


def layout_word(pages: list[dict]) -> str:
    """A row's layout column: ok when every page passed the projector check, else the first failing page's
    verdict (off-screen, overflow, both, not drawn); '-' when no page was checked."""
    from ..dashboard.projector import verdict

    words = [verdict(p.get("layout")) for p in pages if p.get("layout") is not None]
    return next((w for w in words if w != "ok"), "ok") if words else "-"


def finish(page: Page, shots: Path) -> None:
    """The page's screenshot at projector size, then the page (and its session) closed."""
    try:
        page.handle.screenshot(path=str(shots))
        page.shot = str(shots)
    except Exception as e:
        page.problems.append(f"screenshot: {str(e).strip().splitlines()[0]}")
    with contextlib.suppress(Exception):
        page.handle.context.close()
    page.handle = None


# ---------------------------------------------------------------------------------- one figure, the report

def rehearse(browser, base: str, item: Item, args, out: Path, log: Path | None, login) -> dict:
    """Item's link opened twice in a row, then AT_ONCE times together: its row of the report."""
    from ..dashboard.lessons import query_url

    url = query_url(item.figure, item.query, base, presentation=True)
    offset = log.stat().st_size if log is not None else 0
    stem = out / f"{item.number:02d}-{''.join(c if c.isalnum() else '-' for c in item.name).strip('-')}"
    pages = []
    for label in ("1st", "2nd"):
        pages.append(open_page(browser, url, label, login, args.timeout))
        watch(pages[-1:], item.tab, args.timeout, [Path(f"{stem}-{label}.png")], log, offset, item.query)
    together = [open_page(browser, url, f"at once {i + 1}", login, args.timeout) for i in range(AT_ONCE)]
    watch(together, item.tab, args.timeout, [Path(f"{stem}-at-once-{i + 1}.png") for i in range(AT_ONCE)],
          log, offset, item.query)
    pages += together
    server = server_problems(log, offset)
    result = max((p.outcome for p in pages), key=ORDER.get)
    if server and result == "completed":
        result = "error"
    rows = [{k: v for k, v in asdict(p).items() if k not in ("handle", "started", "changed", "fatal")} for p in pages]
    return {"number": item.number, "figure": item.name, "section": item.section, "tab": item.tab, "url": url,
            "result": result, "layout": layout_word(rows), "server": server, "pages": rows}


# What Bokeh and Tornado log when a page closes while its last messages are on their way (each closed
# page of the rehearsal can give them): not the dashboard's failures
CLOSED = ("WebSocketClosedError", "StreamClosedError", "assert self._session is not None")


def rehearse_or_fail(browser, base: str, item: Item, args, out: Path, log: Path | None, login) -> dict:
    """rehearse(), or a failed row saying why when the browser itself failed: the next figures still run."""
    try:
        return rehearse(browser, base, item, args, out, log, login)
    except CLIError:
        raise
    except Exception as e:
        broken = Page("browser", outcome="error", problems=[f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"])
        return {"number": item.number, "figure": item.name, "section": item.section, "tab": item.tab, "url": "",
                "result": "error", "layout": "-", "server": [], "pages": [asdict(broken)] * 2}


def server_problems(log: Path | None, offset: int) -> list[str]:
    """The first line of each error the server logged since `offset` (its log, when rehearse started it): a
    record at ERROR or CRITICAL, or one with a traceback, but not those of a closed connection (CLOSED)."""
    if log is None:
        return []
    with open(log, "rb") as f:
        f.seek(offset)
        lines = f.read().decode(errors="replace").splitlines()
    levels = ("ERROR", "WARNING", "INFO", "DEBUG", "CRITICAL", "Task exception")
    starts = [0, *(i for i, line in enumerate(lines) if i and line.startswith(levels))]
    out = []
    for i, end in zip(starts, [*starts[1:], len(lines)]):
        record = "\n".join(lines[i:end])
        failed = lines[i:end] and (lines[i].startswith(("ERROR", "CRITICAL", "Task exception")) or "Traceback" in record)
        if failed and not any(mark in record for mark in CLOSED):
            out.append(lines[i].strip())
    return out


def note(row: dict) -> str:
    """What went wrong on a row's worst page, one line ('' when it completed)."""
    if row["result"] == "completed":
        return ""
    worst = max(row["pages"], key=lambda p: ORDER[p["outcome"]])
    if worst["outcome"] == "hung":
        return (f"{worst['label']}: no result after {worst_time(worst)}; the header said "
                f"{worst['status'][-90:]!r} for the last {worst['unchanged']:.0f} s")
    problems = worst["problems"] or row["server"]
    return f"{worst['label'] if worst['problems'] else 'server'}: {problems[0][:160]}"


def worst_time(page: dict) -> str:
    return "the timeout" if page["seconds"] is None else f"{page['seconds']} s"


def seconds(page: dict) -> str:
    return "-" if page["seconds"] is None else f"{page['seconds']:.1f}"


ROW = "{:>3}  {:<32} {:<8} {:>6} {:>6}  {:<17} {:<20} {:<9} {}"


def format_row(row: dict) -> str:
    pages = row["pages"]
    name = f"{row['figure']} {row['section']}"
    return ROW.format(row["number"], name[:32], row["tab"], seconds(pages[0]), seconds(pages[1]),
                      " ".join(seconds(p) for p in pages[2:]), row.get("layout", "-"), row["result"], note(row))


def summary(rows: list[dict], elapsed: float, out: Path) -> str:
    counts = {k: sum(r["result"] == k for r in rows) for k in ORDER}
    firsts = [(r["pages"][0]["seconds"], r["figure"]) for r in rows if r["pages"][0]["seconds"] is not None]
    slowest = f"; slowest first open {max(firsts)[1]} {max(firsts)[0]:.1f} s" if firsts else ""
    return (f"rehearsal: {len(rows)} links, {counts['completed']} completed, {counts['hung']} hung, "
            f"{counts['error']} failed in {elapsed:.0f} s{slowest}; screenshots and report in {out}")


def write_report(out: Path, rows: list[dict], line: str, command: str) -> None:
    (out / "report.json").write_text(json.dumps({"command": command, "summary": line, "figures": rows}, indent=1))
    table = [ROW.format("#", "figure", "tab", "1st s", "2nd s", f"{AT_ONCE} at once s", "layout", "result", "note"),
             *map(format_row, rows)]
    (out / "report.md").write_text(f"`{command}`\n\n```\n" + "\n".join(table) + f"\n```\n\n{line}\n")


# ---------------------------------------------------------------------------------- the command

def check_args(args) -> None:
    """Refuse bad combinations before anything starts (one `error:` line each)."""
    import os

    args.password = args.password or os.environ.get("MDLM_EXPLORER_REHEARSE_PASSWORD") or None
    if args.base_url is not None:
        if not args.base_url.startswith(("http://", "https://")):
            raise CLIError(f"--base-url must start with http:// or https://, got {args.base_url!r}")
        args.base_url = args.base_url.split("?")[0].rstrip("/") + "/"
        if args.port or args.serve_args:
            raise CLIError("--port and --serve-args are for the server rehearse starts; not with --base-url")
    elif args.password is not None:
        raise CLIError("--password logs in to a --base-url server; the server rehearse starts has no login")
    try:
        shlex.split(args.serve_args)
    except ValueError as e:
        raise CLIError(f"--serve-args: {e}") from None


def out_dir(args) -> Path:
    out = Path(args.out).expanduser() if args.out else Path("rehearsal") / time.strftime("%Y%m%d-%H%M%S")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / ".write-test").touch()
        (out / ".write-test").unlink()
    except OSError as e:
        raise CLIError(f"--out {out}: cannot write there ({e.strerror or e})") from None
    return out


@contextlib.contextmanager
def stopped_by_sigterm():
    """SIGTERM ends the rehearsal as Ctrl-C does, the server it started stopped too (Python's default would
    leave that server serving)."""
    import signal

    def stop(signum, frame):
        raise KeyboardInterrupt

    try:
        before = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave the signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def main(args) -> int:
    check_args(args)
    chosen = select(args)
    if args.list:
        for item in chosen:
            print(f"{item.number:>3}  {item.name:<28} {item.section:<12} {item.tab:<8} ?{item.query}")
        return 0
    out, began = out_dir(args), time.monotonic()
    try:
        return rehearse_all(args, chosen, out, began)
    finally:
        drop_if_empty(out, default=not args.out)


def drop_if_empty(out: Path, default: bool) -> None:
    """Remove the report folder when nothing was written to it (a server or browser that never started):
    an empty dated folder per failed attempt only hides the ones that hold reports. A server's log, even
    of a failed start, keeps it."""
    with contextlib.suppress(OSError):  # not empty (or already gone): kept
        out.rmdir()
        if default:
            out.parent.rmdir()  # rehearsal/ itself, when this was its only folder


def rehearse_all(args, chosen: list, out: Path, began: float) -> int:
    """Open every chosen figure's link as main() describes; returns the exit status (1 if any failed)."""
    command = "python run.py rehearse " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    rows = []
    with stopped_by_sigterm(), server(args, out) as (base, log), chromium() as browser:
        login = (args.user, args.password) if args.password else None
        print(f"rehearsing {len(chosen)} links on {base} at {VIEWPORT['width']}x{VIEWPORT['height']}, each opened "
              f"twice, then {AT_ONCE} at once (timeout {args.timeout:g} s)", flush=True)
        print(ROW.format("#", "figure", "tab", "1st s", "2nd s", f"{AT_ONCE} at once s", "layout", "result", "note"), flush=True)
        for item in chosen:
            rows.append(rehearse_or_fail(browser, base, item, args, out, log, login))
            print(format_row(rows[-1]), flush=True)
            # so far, after each row: a rehearsal stopped early (Ctrl-C) leaves its report
            write_report(out, rows, summary(rows, time.monotonic() - began, out), command)
    line = summary(rows, time.monotonic() - began, out)
    write_report(out, rows, line, command)
    print(line)
    return 0 if all(r["result"] == "completed" for r in rows) else 1
