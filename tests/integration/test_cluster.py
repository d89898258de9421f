"""Sweeps on a Dask cluster: a LocalCluster of 2 worker processes over tiny checkpoints
written here; the table must be the in-process sweep's, row for row."""
from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from distributed import Client, Event, LocalCluster

from explorer import cluster, experiments
from explorer.checkpoint import load_checkpoint, save_checkpoint
from explorer.cli import CLIError, build_parser
from explorer.cli import main as cli_main
from explorer.cli import serve
from explorer.data.corpus import TextCorpus
from explorer.cluster import sweep
from explorer.experiments import SweepCancelled
from explorer.sampling import SamplerConfig
from tests.support.dashboard import save_tiny_checkpoints
from tests.support.models import TINY_TEXT, make_model

TIMING = ["seconds", "solo_seconds", "tokens_per_s", "ms_per_sample"]


def _save_text_checkpoints(d: Path) -> None:
    """'text' (diffusion) and 'text-ar' (its judge), on the tiny corpus, with its word set."""
    corpus = TextCorpus(TINY_TEXT, name="tiny")
    tok = corpus.tokenizer
    meta = {"tokenizer": tok.to_dict(), "corpus": {"name": "tiny", "kind": "text"}, "words": sorted(corpus.words)}
    for name, kind in (("text", "diffusion"), ("text-ar", "ar")):
        model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=24, kind=kind, seed=2)
        save_checkpoint(model, d / f"{name}.safetensors", meta)


@pytest.fixture(scope="module")
def ckpt_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("checkpoints")
    save_tiny_checkpoints(d)  # tiny, tiny-training, tiny-ar: pattern alphabet
    _save_text_checkpoints(d)
    return d


@pytest.fixture(scope="module")
def client(ckpt_dir):
    lc = LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                      env={"MDLM_EXPLORER_CHECKPOINTS": str(ckpt_dir), "OMP_NUM_THREADS": "1"})
    c = Client(lc, set_as_default=False)
    yield c
    c.close()
    lc.close()


def _load(ckpt_dir, name):
    return load_checkpoint(ckpt_dir / f"{name}.safetensors")


def _started(client) -> int:
    return sum(client.run(cluster.jobs_started).values())


def _assert_same_table(local: pd.DataFrame, remote: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(local.drop(columns=TIMING), remote.drop(columns=TIMING))
    assert local.attrs == remote.attrs


def test_patterns_table_matches_in_process_row_for_row(client, ckpt_dir):
    model, ar = _load(ckpt_dir, "tiny"), _load(ckpt_dir, "tiny-ar")
    corpus = experiments.held_out(model)
    reference = experiments.reference_samples(model, corpus, 24, 5)
    kw = dict(n_samples=5, seed=3, batch_size=2, include_ar=ar, reference=reference)
    vary = {"steps": [1, 3, 6], "strategy": ["confidence", "random"]}
    local, local_summary = sweep(model, SamplerConfig(), vary, **kw)
    seen, before = [], client.run(cluster.jobs_started)
    remote, remote_summary = sweep(model, SamplerConfig(), vary, **kw, client=client,
                                   progress=lambda done, total: seen.append((done, total)))
    _assert_same_table(local, remote)
    speed = [c for c in local_summary if c.split("_")[0] in ("seconds", "solo", "tokens", "ms")]
    pd.testing.assert_frame_equal(local_summary.drop(columns=speed), remote_summary.drop(columns=speed))
    assert set(remote["sampler"]) == {"diffusion", "ar", "reference"}
    total = 6 * 5 + 5  # 6 cells and the AR baseline, 5 samples each
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1] == (total, total)
    after = client.run(cluster.jobs_started)
    assert all(after[w] > before[w] for w in after), "both workers ran tasks"


def test_text_scored_by_a_judge_loaded_on_the_workers(client, ckpt_dir):
    model, judge = _load(ckpt_dir, "text"), _load(ckpt_dir, "text-ar")
    kw = dict(n_samples=3, seed=1, judge=judge, include_ar=True, length=16)
    vary = {"steps": [2, 8], "strategy": ["confidence", "entropy"]}
    local, _ = sweep(model, SamplerConfig(), vary, **kw)
    remote, _ = sweep(model, SamplerConfig(), vary, **kw, client=client)
    _assert_same_table(local, remote)
    assert {"gen_ppl", "word_validity", "entropy"} <= set(remote.columns)
    assert remote["gen_ppl"].notna().all()


def test_a_model_not_from_a_file_is_refused(client):
    tok = TextCorpus(TINY_TEXT).tokenizer
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=16)
    model.tokenizer, model.meta = tok, {"corpus": {"kind": "text"}}
    before = _started(client)
    with pytest.raises(cluster.ClusterError, match="must come from a checkpoint file"):
        sweep(model, SamplerConfig(), {"steps": [2]}, n_samples=2, client=client)
    assert _started(client) == before


def test_a_worker_with_another_version_of_the_file_says_so(ckpt_dir):
    ref = cluster.ModelRef.of(_load(ckpt_dir, "tiny"))
    other = cluster.ModelRef(ref.path, ref.name, "0" * 16)
    with pytest.raises(cluster.ClusterError, match="another version of 'tiny'"):
        cluster.worker_model(other, "cpu")


def test_cancelled_sweep_stops_its_tasks(client, ckpt_dir):
    model = _load(ckpt_dir, "tiny")
    vary = {"steps": [8, 16, 24], "strategy": ["confidence", "random", "margin", "entropy"]}
    cancel, before = threading.Event(), _started(client)
    n_jobs = 12 * 40  # 12 cells x 40 one-sample batches
    with pytest.raises(SweepCancelled) as info:
        sweep(model, SamplerConfig(), vary, n_samples=40, batch_size=1, client=client, cancel=cancel,
              progress=lambda done, total: cancel.set())
    assert 0 < info.value.done < info.value.total and len(info.value.table) == info.value.done
    deadline, started = time.monotonic() + 10, -1
    while started != _started(client) - before and time.monotonic() < deadline:  # until no task starts for 0.5 s
        started = _started(client) - before
        time.sleep(0.5)
    assert not any(client.processing().values()), "tasks still queued or running 10 s after the cancel"
    assert started == _started(client) - before < n_jobs // 2, f"{started} of {n_jobs} tasks started"


def test_a_running_task_stops_when_its_sweep_is_cancelled(client, ckpt_dir):
    """The Event the client sets on cancel is what a running task polls between sampler steps."""
    ref = cluster.ModelRef.of(_load(ckpt_dir, "tiny"))
    job = experiments._plan([{"steps": 24}], 4, 4, False)[0]

    def spec(name):
        return cluster._Spec(ref, None, None, None, SamplerConfig(steps=24), 0, 24, None, name)

    Event("test-cancelled", client=client).set()
    assert client.submit(cluster.run_job, spec("test-cancelled"), job, pure=False).result() is None
    rows = client.submit(cluster.run_job, spec("test-not-cancelled"), job, pure=False).result()
    assert len(rows) == 4 and rows["pattern_quality"].notna().all()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_bad_scheduler_address_fails_fast(ckpt_dir, monkeypatch, capfd):
    """`run.py sweep`'s main in this process (a process of its own adds only its imports); capfd: whatever
    reaches the process's stderr, a logger's traceback included."""
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(ckpt_dir))
    argv = ["sweep", "--checkpoint", "tiny", "--steps", "1", "--n", "1",
            "--scheduler", f"tcp://127.0.0.1:{_free_port()}", "--scheduler-timeout", "1"]
    t0 = time.monotonic()
    code = cli_main(argv)  # an uncaught exception (a traceback) fails the test here
    err = capfd.readouterr().err
    assert code == 2, err
    assert "error: cannot reach a Dask scheduler at 'tcp://127.0.0.1:" in err
    assert "Traceback" not in err
    assert time.monotonic() - t0 < 60


@pytest.mark.parametrize("count", ["0", "-2"])
def test_cli_refuses_a_worker_count_below_one(count, ckpt_dir, monkeypatch, capsys):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(ckpt_dir))
    assert cli_main(["sweep", "--checkpoint", "tiny", "--workers", count]) == 2
    assert f"error: argument --workers: expected an integer in [1, 1024], got '{count}'" in capsys.readouterr().err
    with pytest.raises(cluster.ClusterError, match="at least 1 worker"):
        cluster.local_cluster(int(count))


def test_cli_sweep_on_a_scheduler_writes_the_in_process_table(client, ckpt_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(ckpt_dir))
    args = ["sweep", "--checkpoint", "tiny", "--steps", "1,4", "--strategy", "confidence,random", "--n", "3",
            "--threads", "1"]
    assert cli_main([*args, "--out", str(tmp_path / "local.csv")]) == 0
    assert cli_main([*args, "--out", str(tmp_path / "remote.csv"), "--scheduler", client.scheduler.address]) == 0
    assert f"sweeping on the Dask cluster at {client.scheduler.address} (2 workers)" in capsys.readouterr().err
    local, remote = (pd.read_csv(tmp_path / f).drop(columns=TIMING) for f in ("local.csv", "remote.csv"))
    pd.testing.assert_frame_equal(local, remote)


def test_dashboard_client_comes_from_the_environment(client, monkeypatch):
    monkeypatch.delenv(cluster.SCHEDULER_ENV, raising=False)
    assert cluster.client_from_env() is None
    monkeypatch.setenv(cluster.SCHEDULER_ENV, client.scheduler.address)
    try:
        got = cluster.client_from_env()
        assert got.scheduler.address == client.scheduler.address and cluster.client_from_env() is got
    finally:
        cluster._ENV_CLIENTS.pop(client.scheduler.address).close()


def test_serve_checks_the_scheduler_and_hands_it_to_the_app(client, ckpt_dir, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(ckpt_dir))
    for name in (cluster.SCHEDULER_ENV, "MDLM_EXPLORER_PRECISION"):  # what serve writes is undone after
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    bad = build_parser().parse_args(["serve", "--scheduler", "not-an-address"])
    with pytest.raises(CLIError, match="--scheduler: cannot reach a Dask scheduler at 'not-an-address'"):
        serve.check_args(bad)
    good = build_parser().parse_args(["serve", "--scheduler", client.scheduler.address])
    serve.check_args(good)
    serve.session_defaults(good)
    assert os.environ[cluster.SCHEDULER_ENV] == client.scheduler.address


def test_a_killed_worker_loses_only_its_tasks(client, ckpt_dir):
    """Last: it kills one worker process (its nanny starts a new one) mid-sweep."""
    model = _load(ckpt_dir, "tiny")
    vary = {"steps": [4, 8, 16], "strategy": ["confidence", "random"]}
    kw = dict(n_samples=6, seed=5, batch_size=1)  # 36 one-sample tasks: most still to run at the kill
    local, _ = sweep(model, SamplerConfig(), vary, **kw)
    killed = []

    def kill_a_busy_worker(done, total):
        if killed:
            return
        busy = [w for w, keys in client.processing().items() if keys] or list(client.nthreads())
        pid = client.run(os.getpid, workers=busy[:1])[busy[0]]
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    remote, _ = sweep(model, SamplerConfig(), vary, **kw, client=client, progress=kill_a_busy_worker)
    assert killed
    _assert_same_table(local, remote)
    client.wait_for_workers(2, timeout=60)
    assert killed[0] not in client.run(os.getpid).values()
