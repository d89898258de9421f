"""`python run.py serve`'s checks and the defaults it gives every new session, without starting a server:
bad arguments (and a bad precision in the environment) are one error line and exit 2 before anything starts;
serve is the default command; --no-auto-sweep and --precision (or their variables) become each new session's
defaults; the server leaves a core for the browser unless told its thread count."""
from __future__ import annotations

import time

import pytest
import torch

from explorer.dashboard.tabs.explore import open_session
from tests.support.dashboard import explore, save_tiny_checkpoints
from tests.support.serving import serve_options


@pytest.fixture
def checkpoints(tmp_path, monkeypatch):
    d = tmp_path / "checkpoints"
    d.mkdir()
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(d))
    torch.set_num_threads(1)  # tiny models; and the machine's cores are shared
    return save_tiny_checkpoints(d)


@pytest.mark.parametrize("argv, needle", [
    (["--basic-auth", ""], "--basic-auth is empty"),
    (["--basic-auth", "missing-users.json"], "--basic-auth: no file 'missing-users.json'"),
    # a mistyped users file never becomes the shared password
    (["--basic-auth", "users.jsn"], "--basic-auth: no file 'users.jsn'"),
    (["--basic-auth", "users.JSON"], "--basic-auth: no file 'users.JSON'"),
    (["--basic-auth", "users.txt"], "a shared password may not look like a file name"),
    (["--basic-auth", "{users}"], "must hold a JSON object of user names"),
    (["--cookie-secret", " "], "--cookie-secret is empty"),
    (["--num-threads", "-2"], "--num-threads must be >= 0, got -2"),
    (["--allow-training", "--user-checkpoints", "0"], "argument --user-checkpoints: expected an integer"),
    (["--checkpoint", "../tiny"], "no checkpoint named '../tiny' in checkpoints/"),
    (["--data", "missing.txt"], "--data missing.txt: no such readable file"),
    (["--data", "{bad}"], "is not UTF-8 text"),  # no checkpoint's held-out text can come from it
    # Bokeh checks the origins only as the server starts, with a traceback
    (["--allow-websocket-origin", ""], "--allow-websocket-origin '': expected HOST or HOST:PORT"),
    (["--allow-websocket-origin", ":5006"], "--allow-websocket-origin ':5006': expected HOST or HOST:PORT"),
    (["--allow-websocket-origin", "a:1:2"], "--allow-websocket-origin 'a:1:2': expected HOST or HOST:PORT"),
    (["--allow-websocket-origin", "foo:abc"], "--allow-websocket-origin 'foo:abc': the port must be a number in 1..65535"),
])
def test_serve_refuses_bad_arguments_before_starting(checkpoints, tmp_path, capsys, argv, needle):
    from explorer.cli import main

    users = tmp_path / "users.json"
    users.write_text('["alice", "secret"]')
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("café au lait".encode("latin-1"))
    argv = [a.format(users=users, bad=bad) for a in argv]
    assert main(["serve", "--no-show", "--port", "0", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0]


def test_serve_refuses_a_missing_file_in_the_data_variable_as_it_does_the_flag(checkpoints, capsys, monkeypatch):
    """MDLM_EXPLORER_DATA does what --data does: a typo in it left Inspect without held-out text, unsaid."""
    from explorer.cli import main

    monkeypatch.setenv("MDLM_EXPLORER_DATA", "missing.txt")
    assert main(["serve", "--no-show", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: MDLM_EXPLORER_DATA missing.txt: no such readable file"]


def test_serve_takes_the_origins_bokeh_takes_with_a_port_a_browser_can_have():
    """Bokeh itself takes any integer port (foo:0 would start a server no origin can reach)."""
    from explorer.cli import CLIError
    from explorer.cli.serve import check_origins

    check_origins(["*", "localhost", "lab.example.org:5006", "*.example.org:80", "10.0.0.*:65535"])
    check_origins(None)
    for origin in ("foo:0", "foo:65536", "foo:-1", "foo:", "foo: 80"):
        with pytest.raises(CLIError, match="the port must be a number in 1..65535|expected HOST or HOST:PORT"):
            check_origins([origin])


def test_serve_says_it_serves_only_once_it_listens(checkpoints, fresh_defaults, capsys):
    """A port that is taken is one error line, with no "serving ..." line before it."""
    import socket

    from explorer.cli import main

    with socket.socket() as taken:
        taken.bind(("localhost", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--no-show", "--offline", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: cannot serve on localhost:{port}: ")


def test_serve_names_the_port_it_bound(checkpoints, fresh_defaults, monkeypatch, capsys):
    """--port 0: the line names the free port the server listens on, not :0."""
    import signal

    from explorer.cli import main, serve

    bound = []

    def stop_at_once(server):  # instead of serving until Ctrl-C
        bound.append(server.port)
        server.stop()

    monkeypatch.setattr(serve, "run_server", stop_at_once)
    handler = signal.getsignal(signal.SIGINT)  # pn.serve installs its own
    try:
        assert main(["serve", "--no-show", "--offline", "--port", "0"]) == 0
    finally:
        signal.signal(signal.SIGINT, handler)
    err = capsys.readouterr().err.strip().splitlines()
    assert bound[0] > 0 and err == [f"serving the dashboard on http://localhost:{bound[0]}/ (Ctrl-C to stop)"]


def test_cli_serve_is_the_default_command_and_refuses_bad_arguments(checkpoints, capsys):
    from explorer.cli import build_parser, main

    args = build_parser().parse_args(["serve", "--no-show", "--port", "0"])
    assert args.command == "serve" and args.no_show and args.checkpoint is None and args.device == "auto"
    assert main(["--checkpoint", "nope", "--no-show"]) == 2  # no subcommand: serve
    assert "no checkpoint named 'nope'" in capsys.readouterr().err
    assert main(["serve", "--checkpoint", "../tiny", "--no-show"]) == 2
    assert main(["serve", "--threads", "-1", "--no-show"]) == 2


@pytest.mark.parametrize("argv, needle", [
    (["--num-procs", "0"], "--num-procs must be >= 1 (the number of server processes), got 0"),
    (["--num-procs", "-3"], "--num-procs must be >= 1 (the number of server processes), got -3"),
    (["--num-procs", "2", "--port", "0"], "--num-procs needs a fixed --port"),
])
def test_serve_refuses_bad_process_counts(checkpoints, capsys, argv, needle):
    from explorer.cli import main

    assert main(["serve", "--no-show", "--port", "5999", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0]


@pytest.fixture
def fresh_defaults(monkeypatch):
    """The environment a served session reads its defaults from, restored after the test, and no
    device queue yet (the precision is read when the first one is made)."""
    from explorer.dashboard.runtime import queue as jobs

    for name in ("MDLM_EXPLORER_AUTO_SWEEP", "MDLM_EXPLORER_PRECISION"):
        # setenv first: monkeypatch then remembers the variable's original state, so what `serve`
        # writes into os.environ during the test is undone (delenv of a missing one records nothing)
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setattr(jobs, "_QUEUES", {})


def serve_args(*argv):
    import argparse

    from explorer.cli import serve

    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    args = parser.parse_args(["--no-show", "--port", "0", *argv])
    serve.check_args(args)
    serve.session_defaults(args)
    return args


@pytest.mark.slow
def test_no_auto_sweep_and_bf16_are_every_new_sessions_defaults(checkpoints, fresh_defaults):
    from explorer.dashboard.ui.header import HeaderView

    args = serve_args("--no-auto-sweep", "--precision", "bf16")
    assert args.precision == "bf16"
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False)
    try:
        assert explore(s).sweep_auto is False and "bf16 autocast" in s.device_name
        s.load(wait=True)
        header = HeaderView(state=s).pane.object
        assert "device <b>cpu, bf16 autocast</b>" in header
        s.steps = 4
        explore(s).param.update(sweep_samples=1, sweep_strategies=["confidence"])
        assert explore(s).start_run(wait=True) and explore(s).trajectory is not None
        time.sleep(0.2)
        assert explore(s).quality.result is None and not explore(s).quality.running  # no sweep after the run ...
        assert explore(s).start_sweep(wait=True) and explore(s).quality.result is not None  # ... but Compute still works
        assert explore(open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=True)).sweep_auto
    finally:
        s.close()


def test_the_defaults_stay_fp32_with_auto_sweeps(checkpoints, fresh_defaults):
    args = serve_args()
    assert args.precision == "fp32" and not args.no_auto_sweep
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False)
    assert explore(s).sweep_auto is True and s.device_name == "cpu"


def test_the_environment_sets_the_same_defaults(checkpoints, fresh_defaults, monkeypatch):
    """Under `panel serve explorer/dashboard/app.py` the environment is the only way in."""
    monkeypatch.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")
    monkeypatch.setenv("MDLM_EXPLORER_PRECISION", "bf16")
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False)
    assert explore(s).sweep_auto is False and "bf16" in s.device_name
    assert serve_args().precision == "bf16"


def test_serve_refuses_a_bad_precision_in_the_environment(checkpoints, fresh_defaults, monkeypatch, capsys):
    from explorer.cli import main

    monkeypatch.setenv("MDLM_EXPLORER_PRECISION", "fp16")
    assert main(["serve", "--no-show", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: MDLM_EXPLORER_PRECISION must be one of auto, fp32, bf16, got 'fp16'"]


def test_scrubbing_is_every_new_sessions_and_a_bad_value_is_refused(checkpoints, fresh_defaults, monkeypatch,
                                                                    capsys):
    from explorer.cli import main
    from explorer.dashboard.tabs.explore.state.run import scrub_wanted

    monkeypatch.setenv("MDLM_EXPLORER_SCRUB", "")
    serve_args("--scrub", "on")
    assert scrub_wanted(torch.device("cpu"))  # on a CPU too, as asked
    monkeypatch.setenv("MDLM_EXPLORER_SCRUB", "")  # (serve left "on" there for its sessions)
    serve_args()  # auto: a GPU's sessions scrub, a CPU's do not
    assert not scrub_wanted(torch.device("cpu")) and scrub_wanted(torch.device("cuda"))
    monkeypatch.setenv("MDLM_EXPLORER_SCRUB", "fast")
    assert main(["serve", "--no-show", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: MDLM_EXPLORER_SCRUB must be one of auto, on, off, got 'fast'"]


def test_a_bad_resident_walk_setting_is_refused_at_start(checkpoints, fresh_defaults, monkeypatch, capsys):
    from explorer.cli import main

    monkeypatch.setenv("MDLM_EXPLORER_RESIDENT", "always")
    assert main(["serve", "--no-show", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: MDLM_EXPLORER_RESIDENT must be one of auto, on, off, got 'always'"]


def test_a_server_leaves_a_core_for_the_browser_unless_told(monkeypatch):
    """`serve` without --threads runs torch on one fewer thread than the cores (a
    2-core laptop also runs the browser); --threads N is taken as given."""
    import torch

    from explorer.cli.serve import main as serve_main
    from explorer.devices import serving_threads

    assert [serving_threads(n) for n in (1, 2, 4, 16)] == [1, 1, 3, 15]
    assert serving_threads() >= 1
    seen = []
    monkeypatch.setattr(torch, "set_num_threads", seen.append)
    monkeypatch.setattr("explorer.cli.serve.session_defaults", lambda args: (_ for _ in ()).throw(SystemExit(0)))
    from explorer.cli import build_parser

    for argv, expected in ((["serve"], serving_threads()), (["serve", "--threads", "3"], 3)):
        args = build_parser().parse_args(argv)
        with pytest.raises(SystemExit):
            serve_main(args)
        assert seen[-1] == expected


def test_a_page_has_a_minute_to_open_its_connection(monkeypatch):
    """Bokeh drops a session whose page has not connected within 15 s; pages a class opens together on a
    busy server take longer, and each late connection had the whole app built again (with stylesheets
    from a CDN, before the app pinned them to the server)."""
    from bokeh.server.tornado import BokehTornado

    opts = serve_options(monkeypatch)
    assert opts["unused_session_lifetime_milliseconds"] >= 60_000
    tornado = BokehTornado({}, unused_session_lifetime_milliseconds=opts["unused_session_lifetime_milliseconds"])
    assert tornado._unused_session_lifetime_milliseconds == opts["unused_session_lifetime_milliseconds"]


@pytest.mark.parametrize("device", ["auto", "cuda"])
def test_the_device_check_before_forking_leaves_cuda_uninitialised(checkpoints, monkeypatch, device):
    """serve checks --device before Panel forks its processes. PyTorch's plain torch.cuda.is_available()
    initialises the CUDA runtime, after which no forked process can use the GPU (on an H200 every page of
    a --num-procs server failed to build); asked with PYTORCH_NVML_BASED_CUDA_CHECK=1 it counts the GPUs
    through NVML and leaves fork safe. The check sees the variable set, and the environment is as before."""
    import argparse
    import os

    from explorer.cli import serve

    monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    seen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: seen.append(os.environ.get(
        "PYTORCH_NVML_BASED_CUDA_CHECK")) or True)
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    serve.check_args(parser.parse_args(["--no-show", "--port", "5999", "--num-procs", "2", "--device", device]))
    assert seen == ["1"] and "PYTORCH_NVML_BASED_CUDA_CHECK" not in os.environ
