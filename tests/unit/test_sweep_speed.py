"""A sweep's speed is each cell's own: one generation of the cell timed by itself, not its share of the
model calls a packed sweep shares between cells (checked with a clock that advances only in model calls)."""
from __future__ import annotations

import pytest

from explorer import experiments
from explorer.experiments import sweep
from explorer.sampling import SamplerConfig
from tests.support.models import PeriodicDenoiser


class ClockedModel(PeriodicDenoiser):
    """Each model call costs one second of a fake clock, whatever its rows: what a cell's time should count."""

    def __init__(self, clock):
        super().__init__()
        self.clock = clock

    def forward(self, x, t=None):
        self.clock[0] += 1.0
        return super().forward(x, t)


@pytest.fixture
def fake_clock(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(experiments, "_clock", lambda: clock[0])
    return clock


@pytest.mark.parametrize("pack", [True, False])
def test_each_cell_reports_the_time_of_its_own_model_calls(fake_clock, pack):
    """steps=k: k model calls of one generation alone, so k seconds, the same in every row of the cell and
    whatever the other cells (packed, cells share their first all-[MASK] call; batches hold several rows)."""
    model = ClockedModel(fake_clock)
    table, summary = sweep(model, SamplerConfig(), {"steps": [1, 2, 4], "strategy": ["confidence", "random"]},
                           n_samples=3, batch_size=2, length=12, pack=pack)
    for steps in (1, 2, 4):
        rows = table[table["steps"] == steps]
        assert rows["solo_seconds"].tolist() == [float(steps)] * len(rows)
        assert rows["ms_per_sample"].tolist() == [1000.0 * steps] * len(rows)
        assert rows["tokens_per_s"].tolist() == [12 / steps] * len(rows)  # 12 positions generated
    by_cell = summary.set_index(["steps", "strategy"])
    assert by_cell.loc[(4, "confidence"), "tokens_per_s_mean"] == by_cell.loc[(4, "random"), "tokens_per_s_mean"]


def test_a_template_counts_only_the_positions_generated(fake_clock):
    table, _ = sweep(ClockedModel(fake_clock), SamplerConfig(), {"steps": [2]}, n_samples=1,
                     template="AB" + "█" * 10)
    assert table["solo_seconds"].tolist() == [2.0] and table["tokens_per_s"].tolist() == [10 / 2]
