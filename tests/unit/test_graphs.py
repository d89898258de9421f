"""explorer/graphs.py: a forward replayed from graphs computes what the plain forward computes.

On the CPU a stand-in capture (same contract as capture_cuda: its own copies of the inputs, an output
buffer the next replay overwrites, a fresh copy returned) exercises the cache, the fallbacks and the
sampler's use of it; on a GPU the real capture is held to the plain forward bit for bit."""
from __future__ import annotations

import pytest
import torch

from explorer import graphs
from explorer.sampling import SamplerConfig, sample
from tests.support.models import assert_same_run, gen, make_model

CPU = ("cpu",)


def stand_in_capture(forward, x, t, autocast):
    """capture_cuda's contract on the CPU: static inputs copied in, a static output overwritten per replay."""
    static_x, static_t = x.clone(), (None if t is None else t.clone())
    static_out = forward(static_x, static_t)

    def replay(x, t):
        static_x.copy_(x)
        if t is not None:
            static_t.copy_(t)
        static_out.copy_(forward(static_x, static_t))
        return static_out.clone()

    return replay


def adaln_model():
    model = make_model(time_conditioning="adaln", block_size=24, vocab_size=12, mask_id=11)
    with torch.no_grad():
        for block in model.blocks:  # adaLN starts at zero: perturbed so t changes the logits
            block.ada[1].weight.normal_(0, 0.2, generator=gen(1))
    return model


def test_a_run_through_graphs_is_the_plain_run_and_captures_shapes_seen_twice():
    cfg = SamplerConfig(steps=12, temperature=0.8, strategy="confidence", seed=3)
    want = sample(adaln_model(), cfg, length=24, batch_size=2, generator=gen(3))
    model = graphs.install(adaln_model(), stand_in_capture, devices=CPU)
    with torch.no_grad():
        got = sample(model, cfg, length=24, batch_size=2, generator=gen(3))
    assert_same_run(got, want)
    forward = graphs.installed(model)
    # the first call's rows are one all-[MASK] canvas, computed as one row (call_model): a shape seen once,
    # run plain; the (2, 24) calls are captured at their second sight and replayed from then on
    assert forward.captured == 1 and forward.replayed == got.nfe - 2 and forward.failed == 0


def test_calls_a_graph_cannot_hold_run_the_plain_forward():
    calls = []

    def counting_capture(forward, x, t, autocast):
        calls.append(tuple(x.shape))
        return stand_in_capture(forward, x, t, autocast)

    model = graphs.install(adaln_model(), counting_capture, devices=CPU)
    x, t = torch.zeros((1, 24), dtype=torch.long), torch.ones(1)
    model(x, t)  # gradient on: plain
    with torch.no_grad():
        model.train()
        model(x, t)  # training: plain (dropout)
        model.eval()
        model(x, t, cache=None)  # a keyword argument: plain
        big = torch.zeros((graphs.MAX_GRAPH_TOKENS // 24 + 1, 24), dtype=torch.long)  # a compute-bound call
        model(big, torch.ones(len(big)))
        model(big, torch.ones(len(big)))  # (seen twice: a shape that applied would be captured now)
    assert calls == [] and graphs.installed(model).replayed == 0
    on_cuda_only = graphs.install(adaln_model(), counting_capture)  # the default: CUDA tensors only
    with torch.no_grad():
        on_cuda_only(x, t)
    assert calls == []


def test_least_recently_used_shapes_are_dropped_and_outputs_are_fresh_copies():
    model = graphs.install(adaln_model(), stand_in_capture, max_graphs=2, devices=CPU)
    forward = graphs.installed(model)
    t = torch.full((1,), 0.5)

    def call(length):
        return model(torch.zeros((1, length), dtype=torch.long), t)

    with torch.no_grad():
        call(8)
        assert forward.captured == 0  # seen once: plain
        a = call(8)
        call(9), call(9)
        again = call(8)  # replayed: 8 is now the most recently used
        assert forward.captured == 2 and torch.equal(a, again) and a.data_ptr() != again.data_ptr()
        call(10), call(10)  # captured, dropping 9, the least recently used
        call(8)
        assert forward.captured == 3 and forward.replayed == 5  # a capture replays at once
        call(9), call(9)
        assert forward.captured == 4 and len(forward.graphs) == 2
        a.fill_(0)  # a caller writing into what it got leaves the next replay alone
        assert not torch.equal(call(8), a)


def test_a_failed_capture_stays_plain_and_is_not_tried_again():
    tries = []

    def refusing(forward, x, t, autocast):
        tries.append(1)
        raise RuntimeError("operation not permitted when stream is capturing")

    plain = adaln_model()
    model = graphs.install(adaln_model(), refusing, devices=CPU)
    x, t = torch.randint(0, 11, (2, 24), generator=gen(0)), torch.tensor([0.3, 0.9])
    with torch.no_grad():
        for _ in range(3):  # seen, capture refused, plain without another try
            assert torch.equal(model(x, t), plain(x, t))
    assert tries == [1] and graphs.installed(model).failed == 1


def test_install_keeps_the_model_itself():
    model = adaln_model()
    keys = set(model.state_dict())
    assert graphs.install(model, stand_in_capture, devices=CPU) is model
    first = graphs.installed(model)
    graphs.install(model)
    assert graphs.installed(model) is first and set(model.state_dict()) == keys
    assert graphs.installed(adaln_model()) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("autocast", [None, torch.bfloat16])
def test_cuda_graphs_replay_the_plain_forward_bit_for_bit(autocast):
    plain = adaln_model().cuda()
    model = graphs.install(adaln_model().cuda())
    cfg = SamplerConfig(steps=12, temperature=0.8, strategy="confidence", seed=3)
    context = torch.autocast("cuda", dtype=autocast) if autocast else torch.no_grad()
    with torch.no_grad(), context:
        want = sample(plain, cfg, length=24, batch_size=2, generator=gen(3))
        got = sample(model, cfg, length=24, batch_size=2, generator=gen(3))
    assert_same_run(got, want)
    assert graphs.installed(model).captured == 1 and graphs.installed(model).failed == 0
