"""Many sessions, one device: the shared run queue batches sessions' compatible runs, and
each session still gets exactly its solo result; superseded runs never run; Stop works; knobs and
seeds never leak between sessions; background work takes turns with the runs."""
from __future__ import annotations

import threading
import types
import time
from contextlib import contextmanager

import pytest
import torch

from explorer.dashboard.runtime.queue import MAX_BATCH, DeviceQueue, device_queue
from explorer.dashboard.runtime.tasks import Worker
from explorer.dashboard.session import sample_canvas
from explorer.dashboard.session import Session
from explorer.dashboard.tabs.explore import open_session
from tests.support.dashboard import SlowModel, explore, save_tiny_checkpoints, wait_for
from tests.support.models import assert_same_run


@pytest.fixture
def checkpoints(tmp_path, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    return save_tiny_checkpoints(tmp_path)


def session(checkpoint="tiny", **knobs) -> Session:
    s = open_session(checkpoint=checkpoint, device="cpu", auto_run=False, sweep_auto=False)
    s.load(wait=True)
    assert s.model is not None and s.error == ""
    s.param.update(**knobs)
    return s


@pytest.fixture
def queue():
    return device_queue(torch.device("cpu"))


@pytest.fixture
def merging(queue, monkeypatch):
    """The CPU queue merging runs whose knobs differ, as a GPU's queue does by default."""
    monkeypatch.setattr(queue, "merge", True)
    return queue


def delta(queue, before: dict) -> dict:
    now = queue.stats.snapshot()
    sizes = {k: v - before["batch_sizes"].get(k, 0) for k, v in now["batch_sizes"].items()}
    return {**{k: now[k] - before[k] for k in ("requests", "dropped", "batches", "rows")},
            "batch_sizes": {k: v for k, v in sizes.items() if v}}


def start_together(queue, sessions) -> list:
    """Start every session's run while the device is busy (held here), so they wait together."""
    with queue.turns.turn("background"):
        for s in sessions:
            assert explore(s).start_run(), s.error
        jobs = [explore(s)._runs.current for s in sessions]
    for job in jobs:
        assert job.done.wait(60)
    return jobs


def solo(s: Session):
    """The session's knobs through the plain sampler, alone."""
    return sample_canvas(s.model, s.sampler_config(), s.canvas())


KNOBS = {
    "default": dict(steps=8),
    "random, hot, remask": dict(steps=10, strategy="random", temperature=1.4, remask=0.3),
    "threshold, blocks": dict(threshold=0.07, block_length=8, template="AB█C[___]"),  # 12, 11, 12 steps
}


@pytest.mark.parametrize("name", list(KNOBS))
def test_sessions_started_together_share_one_call_and_get_their_solo_runs(checkpoints, queue, name):
    sessions = [session(**KNOBS[name], seed=seed) for seed in (1, 2, 1)]
    assert len({id(s.model) for s in sessions}) == 1  # one model object, shared by the process
    before = queue.stats.snapshot()
    start_together(queue, sessions)
    assert delta(queue, before) == {"requests": 3, "dropped": 0, "batches": 1, "rows": 3, "batch_sizes": {3: 1}}
    for s in sessions:
        want = solo(s)
        assert_same_run(explore(s).trajectory, want)
        assert explore(s).frames.n_rows == want.n_steps + 1 and (explore(s).frames.tokens[-1] == want.final[0]).all()
        assert s.status.startswith(f"{want.n_steps} steps") and not explore(s).running
    assert (explore(sessions[0]).trajectory.final == explore(sessions[2]).trajectory.final).all()  # same seed, same text
    if name.startswith("threshold"):  # rows of one call that took different numbers of steps
        assert explore(sessions[0]).trajectory.n_steps != explore(sessions[1]).trajectory.n_steps


def test_each_session_streams_only_its_own_rows(checkpoints, queue):
    a, b = session(steps=6, seed=3), session(steps=6, seed=4)
    start_together(queue, [a, b])
    for s in (a, b):  # the live rows are the session's own run, step for step
        traj = solo(s)
        assert explore(s).frames.n_rows == traj.n_steps + 1
        for row in range(explore(s).frames.n_rows):
            assert (explore(s).frames.tokens[row] == traj.tokens[row, 0]).all()


def test_sessions_whose_knobs_differ_step_as_one_merged_batch_and_get_their_solo_runs(checkpoints, merging):
    """A class turns different knobs (steps, strategy, temperature, seed): such runs step as one merged batch
    (sampling/merged.py) instead of one after another, and each session still gets its solo run and streams
    its own steps."""
    sessions = [session(steps=6, strategy="confidence", temperature=0.8, seed=1),
                session(steps=9, strategy="random", temperature=1.2, seed=2),
                session(steps=4, strategy="margin", temperature=0.0, seed=1),
                session(steps=6, strategy="confidence", temperature=0.8, seed=5)]
    before = merging.stats.snapshot()
    start_together(merging, sessions)
    assert delta(merging, before)["batch_sizes"] == {4: 1}
    for s in sessions:
        want = solo(s)
        assert_same_run(explore(s).trajectory, want)
        assert explore(s).frames.n_rows == want.n_steps + 1
        for row in range(explore(s).frames.n_rows):  # the live rows are the session's own run, step for step
            assert (explore(s).frames.tokens[row] == want.tokens[row, 0]).all()
        assert s.status.startswith(f"{want.n_steps} steps") and not explore(s).running


def test_on_a_cpu_sessions_whose_knobs_differ_run_one_after_another(checkpoints, queue):
    """A CPU's forward is most of a step, so a merged batch would mostly make each session wait for the
    others' rows (DeviceQueue.merge): runs of different knobs go one at a time, each its solo run; a
    GPU's queue merges them."""
    assert queue.merge is False and DeviceQueue("cuda").merge is True and DeviceQueue("cuda:1").merge is True
    sessions = [session(steps=6, strategy="confidence", temperature=0.8, seed=1),
                session(steps=9, strategy="random", temperature=1.2, seed=2),
                session(steps=6, strategy="confidence", temperature=0.8, seed=5)]  # the first's knobs, another seed
    before = queue.stats.snapshot()
    start_together(queue, sessions)
    # the first and the third share one call (the same knobs but the seed), the second runs alone
    assert delta(queue, before)["batch_sizes"] == {2: 1, 1: 1}
    for s in sessions:
        assert_same_run(explore(s).trajectory, solo(s))


def test_a_short_run_of_a_merged_batch_ends_before_the_long_one(checkpoints, merging):
    short, long = session(steps=3, temperature=0.5, seed=1), session(steps=60, temperature=1.0, seed=2)
    short.model = long.model = SlowModel(short.model, 0.03)  # one model: runs merge only on one
    with merging.turns.turn("background"):
        for s in (short, long):
            assert explore(s).start_run()
        jobs = [explore(s)._runs.current for s in (short, long)]
    assert jobs[0].done.wait(60)
    assert not jobs[1].done.is_set()  # the short run's result did not wait for the long one's end
    assert jobs[1].done.wait(60)
    for s in (short, long):
        assert_same_run(explore(s).trajectory, solo(s))


def test_a_stopped_session_leaves_its_merged_batch_and_the_others_finish(checkpoints, merging):
    a, b = session(steps=40, temperature=0.5, seed=1), session(steps=40, temperature=1.0, seed=2)
    a.model = b.model = SlowModel(a.model, 0.03)  # one model (runs merge only on one), slow enough to stop
    stopped, before = [], merging.stats.snapshot()
    with merging.turns.turn("background"):
        for s in (a, b):
            assert explore(s).start_run()
        jobs = [explore(s)._runs.current for s in (a, b)]
        explore(a).param.watch(lambda e: stopped.append(1) if e.new > 1 else None, "n_rows")
    wait_for(lambda: stopped, timeout=30, message="a's run never streamed")
    explore(a).stop_run()
    for job in jobs:
        assert job.done.wait(60)
    assert delta(merging, before)["batch_sizes"] == {2: 1}  # one merged batch
    assert a.status == "stopped" and explore(a).trajectory is None
    assert_same_run(explore(b).trajectory, solo(b))


def test_knobs_never_leak_between_sessions(checkpoints, queue):
    a = session(steps=5, temperature=0.0, strategy="margin", seed=7)
    b = session(steps=9, temperature=1.5, strategy="random", top_k=4, seed=7)
    c = session(steps=5, temperature=0.0, strategy="margin", seed=8, template="ABC")
    before = queue.stats.snapshot()
    start_together(queue, [a, b, c])
    assert delta(queue, before)["batch_sizes"] == {1: 3}  # different knobs or canvas: never one call
    for s in (a, b, c):
        assert explore(s).trajectory.config == s.sampler_config()
        assert_same_run(explore(s).trajectory, solo(s))


def test_a_superseded_queued_run_never_runs(checkpoints, queue):
    s = session(steps=4, seed=1)
    begun = []
    real_begin = explore(s)._begin
    explore(s)._begin = lambda job, frames, config: (begun.append(config.seed), real_begin(job, frames, config))
    before = queue.stats.snapshot()
    with queue.turns.turn("background"):
        explore(s).start_run()
        first = explore(s)._runs.current
        s.seed = 2
        explore(s).start_run()  # supersedes the waiting run: it leaves the queue at once
        assert first.done.is_set() and first.cancelled
    explore(s)._runs.current.done.wait(60)
    assert begun == [2] and explore(s).trajectory.config.seed == 2
    assert delta(queue, before) == {"requests": 2, "dropped": 1, "batches": 1, "rows": 1, "batch_sizes": {1: 1}}


def test_stop_while_waiting_and_while_running(checkpoints, queue):
    a, b = session(steps=12, seed=1), session(steps=12, seed=2)
    with queue.turns.turn("background"):  # stopped before the device is free: it never runs
        explore(a).start_run()
        explore(a).stop_run()
        assert explore(a)._runs.current.done.is_set() and a.status == "stopped" and explore(a).trajectory is None
    real_push = explore(a)._push

    def push_then_stop(job, record):  # a stops at its third step, mid-batch; b goes on
        real_push(job, record)
        if record.index == 2:
            explore(a).stop_run()
    explore(a)._push = push_then_stop
    start_together(queue, [a, b])
    assert a.status == "stopped" and explore(a).trajectory is None and not explore(a).running and explore(a).frames.n_rows == 4
    assert_same_run(explore(b).trajectory, solo(b))


def test_a_batch_stops_when_every_row_is_cancelled(checkpoints, queue):
    sessions = [session(steps=20, seed=i) for i in range(2)]
    for s in sessions:
        real = explore(s)._push
        explore(s)._push = (lambda s, real: lambda job, record: (real(job, record), record.index == 1 and explore(s).stop_run()))(s, real)
    start_together(queue, sessions)
    for s in sessions:
        assert s.status == "stopped" and explore(s).frames.n_rows == 3  # nothing after the step that stopped it


def test_ar_runs_go_through_the_queue_alone(checkpoints, queue):
    a, b = session("tiny-ar", seed=1), session("tiny-ar", seed=2)
    before = queue.stats.snapshot()
    start_together(queue, [a, b])
    assert delta(queue, before)["batch_sizes"] == {1: 2}
    for s in (a, b):
        assert_same_run(explore(s).trajectory, solo(s))


def test_background_work_lends_the_device_to_runs(checkpoints, queue):
    """A Worker bound to the device holds it while its task runs, and lets a waiting run go whenever
    the task checks job.cancelled (as sweeps do after every sampler step)."""
    worker, holding, polls = Worker("busy", device=torch.device("cpu")), threading.Event(), []

    def busy(job):
        holding.set()
        while not job.cancelled:  # the yield point
            polls.append(time.monotonic())
            time.sleep(0.002)

    worker.submit(busy)
    assert holding.wait(10)
    s = session(steps=4, seed=5)
    assert explore(s).start_run(wait=True) and explore(s).trajectory is not None  # ran while the busy task is still on
    n = len(polls)
    wait_for(lambda: len(polls) > n + 2, message="the background task did not get the device back")
    worker.cancel()
    assert worker.current.done.wait(10)


def test_max_batch_caps_the_rows_of_one_call(checkpoints, queue):
    sessions = [session(steps=4, seed=seed) for seed in range(3)]
    before, queue.max_batch = queue.stats.snapshot(), 2
    try:
        start_together(queue, sessions)
    finally:
        queue.max_batch = MAX_BATCH
    assert delta(queue, before)["batch_sizes"] == {2: 1, 1: 1}  # oldest first: the third waits
    for s in sessions:
        assert_same_run(explore(s).trajectory, solo(s))


# ---------------------------------------------------------------------------------- precision

@pytest.fixture
def bf16_queue(monkeypatch):
    """The process's cpu queue replaced by one at bf16 (as `serve --precision bf16` makes it)."""
    from explorer.dashboard.runtime import queue as jobs

    q = jobs.DeviceQueue("cpu", precision="bf16")
    monkeypatch.setattr(jobs, "_QUEUES", {"cpu": q})
    return q


@contextmanager
def forward_dtypes(model):
    """The dtype of every output of the model's first Linear layer, as the calls happen (the hook is
    removed after: the model object is shared by the whole test process)."""
    linear = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
    seen = []
    handle = linear.register_forward_hook(lambda mod, args, out: seen.append(out.dtype))
    try:
        yield seen
    finally:
        handle.remove()


def test_precision_resolves_as_training_does(monkeypatch):
    from explorer.dashboard.runtime.queue import DeviceQueue, precision_from_env
    from explorer.devices import autocast_dtype

    assert DeviceQueue("cpu").dtype is None and DeviceQueue("cpu").precision_label == "fp32"
    assert DeviceQueue("cpu", precision="bf16").dtype is torch.bfloat16
    assert DeviceQueue("cpu", precision="bf16").precision_label == "bf16"
    assert DeviceQueue("cpu", precision="auto").dtype == autocast_dtype(torch.device("cpu"), "auto")
    monkeypatch.delenv("MDLM_EXPLORER_PRECISION", raising=False)
    assert precision_from_env() == "fp32"  # the default: every figure as documented
    monkeypatch.setenv("MDLM_EXPLORER_PRECISION", "BF16")
    assert precision_from_env() == "bf16"
    monkeypatch.setenv("MDLM_EXPLORER_PRECISION", "fp16")
    assert precision_from_env() == "fp32"  # logged and ignored, never a crash in a served class


@pytest.mark.parametrize("name", ["default", "threshold, blocks"])
def test_bf16_queue_batches_under_autocast_and_each_session_gets_its_row(checkpoints, bf16_queue, name):
    """bf16 is not batch-invariant in general (jobs.py: on shakespeare at 128 characters most batched
    rows differ from their solo bf16 run), so only what does hold is checked: one batched call, run
    in bf16, each session its own complete run of its own knobs."""
    sessions = [session(**KNOBS[name], seed=seed) for seed in (1, 2, 3, 1)]
    assert all("bf16" in s.device_name for s in sessions)  # what the header shows
    before = bf16_queue.stats.snapshot()
    with forward_dtypes(sessions[0].model) as dtypes:
        start_together(bf16_queue, sessions)
    assert delta(bf16_queue, before)["batch_sizes"] == {4: 1}
    assert dtypes and set(dtypes) == {torch.bfloat16}  # the batch really ran under autocast
    for s in sessions:
        traj = explore(s).trajectory
        assert traj is not None and traj.seed == s.seed and traj.config == s.sampler_config()
        assert traj.final.shape == (1, s.canvas().length) and explore(s).frames.n_rows == traj.n_steps + 1
        assert s.status.startswith(f"{traj.n_steps} steps") and not explore(s).running
        assert not (traj.final == s.model.config.mask_id).any()  # every position decided


def test_fp32_queue_runs_without_autocast(checkpoints, queue):
    s = session(steps=4, seed=7)
    assert queue.dtype is None and "bf16" not in s.device_name
    with forward_dtypes(s.model) as dtypes:
        assert explore(s).start_run(wait=True)
    assert dtypes and set(dtypes) == {torch.float32}
    assert_same_run(explore(s).trajectory, solo(s))


def test_background_work_runs_at_the_devices_precision(bf16_queue):
    """Sweeps and the mean confidence use the same precision as the runs (one device, one choice)."""
    seen = []
    job = Worker("busy", device=torch.device("cpu")).submit(
        lambda job: seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))))
    assert job.done.wait(10)
    assert seen == [(True, torch.bfloat16)]
    assert not torch.is_autocast_enabled("cpu")  # autocast is per thread: this one is untouched


def test_an_idle_queue_gives_freed_memory_back(checkpoints, queue, monkeypatch):
    """After a batch, with nothing waiting, the C heap is trimmed (RSS follows live memory, not the
    largest batch seen); the trim itself is safe to call anywhere."""
    from explorer.dashboard.runtime import queue as jobs

    jobs.release_free_memory()  # glibc here; a no-op where there is no malloc_trim
    trims = []
    monkeypatch.setattr(jobs, "release_free_memory", lambda: trims.append(queue.waiting()))
    s = session(steps=4, seed=11)
    assert explore(s).start_run(wait=True)
    wait_for(lambda: trims == [0], message="the queue did not trim after going idle")


def test_only_a_queue_shared_by_sessions_waits_to_gather_a_batch(monkeypatch):
    """A lone session starts at once; once two sessions ask, an idle queue waits gather_s for partners;
    a session silent for `recent_s` no longer counts."""
    from explorer.dashboard.runtime import queue as jobs

    q = jobs.DeviceQueue("cpu", gather_s=0.02)
    monkeypatch.setattr(q, "_loop", lambda: None)  # no worker: only the bookkeeping is under test
    clock = [100.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: clock[0])

    def ask(owner):
        q.submit(jobs.SampleRequest(__import__("explorer.dashboard.runtime.tasks", fromlist=["Job"]).Job("run"), model=None, config=None, length=8, template=None, owner=owner))

    ask("a")
    ask("a")
    assert q._gather_wait() == 0.0
    ask("b")
    assert q._gather_wait() == 0.02
    clock[0] += 11  # both went quiet; "a" asks again, alone
    ask("a")
    assert q._gather_wait() == 0.0


def pump(queued: list) -> None:
    """Run what a session handed to its (test) dispatcher, as a page's event loop would."""
    while queued:
        queued.pop(0)()


def queued_session(queued: list) -> Session:
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False, dispatch=queued.append)
    s.load()
    s._loads.current.done.wait(30)
    pump(queued)
    assert s.model is not None
    return s


@pytest.mark.slow
def test_a_run_reaches_the_page_with_its_rows_and_waiting_is_said_only_of_a_wait(checkpoints, queue, monkeypatch):
    """The page's first message of a run carries its start canvas, its rows so far and the
    header's line (one redraw, not three), and "waiting for the device" appears only once the run has
    waited START_GRACE, never per knob change on an idle device."""
    from explorer.dashboard.tabs.explore.state import run as explore_run

    START_GRACE = 1.0  # longer than a loaded machine's pause between start_run and the first check
    monkeypatch.setattr(explore_run, "START_GRACE", START_GRACE)
    queued, said, updates = [], [], []
    s = queued_session(queued)
    e = explore(s)
    s.param.watch(lambda event: said.append(event.new), "status")
    e.param.watch(lambda *events: updates.append({ev.name: ev.new for ev in events}), ["run_id", "n_rows"])
    with queue.turns.turn("background"):  # the device is busy: the run waits
        e.start_run()
        pump(queued)
        assert said == [] and updates == []
        wait_for(lambda: queued, timeout=10 * START_GRACE + 5)
        pump(queued)
        assert said == ["waiting for the device …"]
    e._runs.current.done.wait(30)
    pump(queued)  # the run's begin, its rows and its end, queued while the page was busy
    rows = e.trajectory.n_steps + 1
    assert updates[0] == {"run_id": 1, "n_rows": rows}  # the start came with every row, in one update
    assert said[1:] == [said[1], e.session.status] and said[1].startswith("sampling")


def test_a_run_whose_first_step_is_slow_shows_its_start_canvas_after_the_grace(checkpoints, queue):
    """When no row follows the device's start within START_GRACE (a big model's first step), the
    start canvas and the header's line are shown by the timer alone."""
    from explorer.dashboard.frames import Frames, glyph_table
    from explorer.dashboard.tabs.explore.state import START_GRACE

    queued = []
    s = queued_session(queued)
    e = explore(s)
    with queue.turns.turn("background"):  # the real run waits; its begin is played by hand
        e.start_run()
        m = s.model
        frames = Frames(s.canvas().tokens, s.canvas().fixed, m.config.mask_id, glyph_table(m.tokenizer))
        frames.expected_rows = s.steps + 1
        e._begin(e._runs.current, frames, s.sampler_config())
        assert e.run_id == 0 and not e.running  # not shown yet: it waits for a row
        wait_for(lambda: len(queued) >= 2, timeout=10 * START_GRACE + 5)  # the wait's line, then the start
        pump(queued)
        assert e.run_id == 1 and e.running and e.frames is frames and e.n_rows == 1
        assert s.status == f"sampling {s.steps} steps …"  # the begun run's line, not "waiting"
        e.stop_run()
    e._runs.current.done.wait(30)
    pump(queued)
    assert s.status == "stopped" and not e.running


def test_no_live_tick_just_before_the_end(checkpoints):
    """A tick is skipped when, at the run's pace so far, its end (which shows every row) comes sooner
    than LIVE_INTERVAL: a redraw of the page for nothing, on the cores the sampler needs."""
    from explorer.dashboard.tabs.explore.state import LIVE_INTERVAL

    e = explore(session())
    e.frames = types.SimpleNamespace(n_rows=5, expected_rows=33)
    e._begun_at, e._shown_at = 0.0, 0.0
    pace = LIVE_INTERVAL / 10  # seconds per row: 4 rows sampled by `now`
    now = 4 * pace + LIVE_INTERVAL  # the interval has passed since the last tick...
    e._begun_at = now - 4 * pace
    assert e._tick_due(now)  # ...and 28 rows (2.8 intervals) are left
    e.frames.n_rows = 31  # 2 rows left: 0.2 of an interval
    e._begun_at = now - 30 * pace
    assert not e._tick_due(now)
    e.frames.n_rows = 40  # past the estimate (a threshold run): the end is unknown, so tick
    assert e._tick_due(now)
    e._shown_at = now - LIVE_INTERVAL / 2
    assert not e._tick_due(now)  # within the interval: never
    e.frames.n_rows = 2
    assert e._tick_due(now)  # the first sampled row: at once


def test_steps_that_reach_the_page_before_their_runs_begin_are_kept_for_it(checkpoints, queue):
    """A flush queued before a run's begin (the last run's, still waiting on a busy page) may carry the
    new run's first steps, a fast model's: they wait for the begin instead of going into the frames
    on screen (seen: a page kept 22 of 29 rows of a 28-step run while a loaded machine lagged)."""
    from explorer.dashboard.tabs.explore.state import ExploreState

    queued = []
    s = queued_session(queued)
    e = explore(s)
    for seed in (1, 2):  # the first run (no frames yet), then one over a shown run
        s.seed = seed
        e.start_run()
        e._runs.current.done.wait(30)
        flushes = [c for c in queued if getattr(c, "__func__", None) is ExploreState._flush]
        for callback in flushes + [c for c in queued if c not in flushes]:  # every flush before the begin
            callback()
        queued.clear()
        traj = e.trajectory
        assert traj is not None and traj.config.seed == seed
        assert e.frames.n_rows == traj.n_steps + 1 == e.n_rows
        assert (e.frames.tokens[-1] == traj.final[0]).all()


def test_steps_between_live_ticks_wait_for_the_tick_not_a_callback_each(checkpoints, queue, monkeypatch):
    """Once a run's first sampled row is shown, its later steps wait for the next live tick instead of each
    asking the page's loop for a callback (a flush per step was 64 callbacks a run, each locking the
    document; a class of 30 multiplies them): a 20-step run between two ticks costs a few flushes, and its
    end still brings every row."""
    from explorer.dashboard.tabs.explore.state import run as explore_run
    from explorer.dashboard.tabs.explore.state.run import RunState

    monkeypatch.setattr(explore_run, "LIVE_INTERVAL", 3600.0)  # no tick after the first rows
    queued = []
    s = queued_session(queued)
    e = explore(s)
    s.steps = 20
    flushes, done = [], threading.Event()

    def page_loop():  # what the page's event loop does with the dispatcher's queue, as it comes
        while not done.is_set() or queued:
            if not queued:
                time.sleep(0.001)
                continue
            callback = queued.pop(0)
            if getattr(callback, "__func__", None) is RunState._flush:
                flushes.append(1)
            callback()

    loop = threading.Thread(target=page_loop, daemon=True)
    loop.start()
    try:
        e.start_run()
        wait_for(lambda: e.trajectory is not None and not e.running, timeout=60)
    finally:
        done.set()
        loop.join(30)
    assert e.frames.n_rows == e.trajectory.n_steps + 1 == 21  # every row, brought by the end
    assert len(flushes) <= 4, len(flushes)  # the start's, the first rows'; not one per step
