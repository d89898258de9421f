"""The same seed gives the same samples: runs over every path of the sampler (one generator, one per
row, merged and packed by sample_many, the AR baseline; every strategy, schedule, revision, threshold
and factor decoding, blocks, guidance, EOS rules, temperature 0 and above) against the final tokens
they gave when their step had several definitions (seed_runs.json; tests/support/seed_runs.py says how
to rewrite it, for a change meant to change samples)."""
from __future__ import annotations

import json

import pytest

from tests.support.seed_runs import FIXTURE, results


@pytest.mark.slow
def test_every_path_gives_the_samples_it_gave_for_its_seed():
    want = json.loads(FIXTURE.read_text())
    got = results()
    assert got.keys() == want.keys()
    changed = [name for name in want if got[name] != want[name]]
    assert not changed, f"{len(changed)} runs give other samples for their seed: {changed[:5]}"


def test_merged_and_packed_sweep_cells_are_the_same_runs():
    want = json.loads(FIXTURE.read_text())
    merged = {k.split("| run ")[1]: v for k, v in want.items() if "merge=True" in k}
    apart = {k.split("| run ")[1]: v for k, v in want.items() if "merge=False" in k}
    assert len(merged) == 9 and merged == apart
