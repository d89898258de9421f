"""Display data of one sampler run, grown row by row from StepRecords (live) or built from a Trajectory.

Pure numpy, no Panel or Bokeh: the views turn these rows into glyphs. Row 0 is the canvas before the
first step (template characters and [MASK]s); row k >= 1 is the canvas after step k - 1, together with
the proposals, scores and confidences that step computed. Only batch row `b` (default 0) is shown.
"""
from __future__ import annotations

import numpy as np

# What a heatmap cell can be at a row, in the order of their int8 codes (Frames.state). The data owns
# them; ui/palette.py only says how each is drawn (its colour, its mark).
# A uniform-state run (sampling/uniform.py) has no [MASK]: its cells hold random tokens ("noise": the
# block's start and every re-noised position), tokens drawn and accepted at the step ("accepted"), and a
# stopped block's final tokens ("settled" at the step, then "earlier"); "masked" is a block not started.
# Token editing (a masked run's edit_threshold) replaces a committed token: "edited" at the step, then "earlier".
STATES = ("masked", "new", "earlier", "remasked", "fixed", "noise", "accepted", "settled", "edited")
CODE = {name: i for i, name in enumerate(STATES)}  # cell state -> int8 code
STATE_LABELS = {"masked": "still masked", "new": "committed this step", "earlier": "committed earlier",
                "remasked": "re-masked (revision)", "fixed": "fixed (template)",
                "noise": "random token (re-noised)", "accepted": "accepted this step",
                "settled": "settled this step (final)", "edited": "edited this step (token replaced)"}
# The states each process's runs show, in their key's order, and the labels that read differently there
PROCESS_STATES = {"masked": ("masked", "new", "earlier", "remasked", "fixed", "edited"),
                  "uniform": ("noise", "accepted", "settled", "earlier", "masked", "fixed")}
UNIFORM_LABELS = {"masked": "block not started", "earlier": "settled earlier"}
COMMITTED = ("new", "earlier", "accepted", "settled", "edited")  # cells holding a chosen token (tinted by confidence)


def state_labels(process: str = "masked") -> dict:
    """{state: label} of the states a `process` run shows, in its key's order."""
    extra = UNIFORM_LABELS if process == "uniform" else {}
    return {s: extra.get(s, STATE_LABELS[s]) for s in PROCESS_STATES[process]}


def glyph_table(tokenizer) -> np.ndarray:
    """(V,) str: token id -> character (or a Hugging Face model's token string), [MASK] -> the mask
    glyph; vectorised decoding for every row."""
    return tokenizer.glyphs()


class Frames:
    """Rows of the trajectory heatmap plus what the text and confidence views need at each row."""

    def __init__(self, initial: np.ndarray, fixed: np.ndarray, mask_id: int, glyphs: np.ndarray,
                 process: str = "masked", blocks: np.ndarray | None = None):
        """process "uniform": a uniform-state run, whose row 0 holds the first block's noise (`blocks`:
        (L,) each position's block, -1 where fixed; the others are blocks not started)."""
        initial = np.asarray(initial, dtype=np.int64).reshape(-1)  # (L,)
        self.mask_id, self.glyphs, self.process = mask_id, glyphs, process
        self.fixed = np.asarray(fixed, dtype=bool).reshape(-1)  # (L,)
        nan = np.full(initial.shape, np.nan, dtype=np.float32)
        self.tokens = [initial]
        first = np.zeros(initial.shape, bool) if blocks is None or process != "uniform" else np.asarray(blocks) == 0
        start = np.where(first, CODE["noise"], CODE["masked"])  # (L,) a uniform run's first block is noise
        self.state = [np.where(self.fixed, CODE["fixed"], start).astype(np.int8)]
        self.done = np.zeros(initial.shape, bool)  # a uniform-state run's settled positions
        self.conf = [nan]  # confidence of each position's current token when it was committed
        # what the confidence bars show per position: conf, except that a uniform-state run's settled
        # positions keep the confidence they settled with (conf leaves them NaN: full colour in the heatmap)
        self.bar_conf = [nan]
        self.committed_at = [np.full(initial.shape, -1, dtype=np.int64)]  # row that committed it
        self.scores, self.proposals, self.step_conf = [nan], [initial], [nan]  # per-step proposals
        self.committed = [np.zeros(initial.shape, dtype=bool)]
        self.expected_rows = 1  # rows the run will produce when known (sizes the heatmap's axes)
        self.rows_known = False  # expected_rows is exact (a step count), not a threshold run's guess
        # bumped when row 0 is rewritten after it may have been drawn (a uniform-state run's start canvas
        # arrives with its first record): a view that drew an older row 0 draws it again
        self.start_revision = 0

    @property
    def n_rows(self) -> int:
        return len(self.tokens)

    @property
    def planned_rows(self) -> int:
        """Rows the run will have as far as known: the expected count, or more if it outgrew it."""
        return max(self.expected_rows, self.n_rows)

    @property
    def length(self) -> int:
        return self.tokens[0].shape[0]

    def add_step(self, tokens, scores, proposals, confidence, committed, remasked, settled=None,
                 edited=None) -> int:
        """Append the canvas after one step (each argument (L,)); returns the new row's index. A uniform-state
        run's committed are its accepted positions, remasked its re-noised ones, settled its settled ones;
        a masked run's edited its tokens replaced by token editing (confidence: the new token's)."""
        row = self.n_rows
        committed, remasked = np.asarray(committed, bool), np.asarray(remasked, bool)
        tokens = np.asarray(tokens, dtype=np.int64)
        confidence = np.asarray(confidence, dtype=np.float32)
        if self.process == "uniform":
            state, conf, bar, at = self._uniform_cells(row, committed, remasked, settled, confidence)
        else:
            state = np.where(tokens == self.mask_id, CODE["masked"], CODE["earlier"]).astype(np.int8)
            state[committed] = CODE["new"]
            edited = np.zeros_like(committed) if edited is None else np.asarray(edited, bool)
            state[edited] = CODE["edited"]
            state[remasked] = CODE["remasked"]
            state[self.fixed] = CODE["fixed"]
            conf = np.where(committed | edited, confidence, self.conf[-1])  # carry commit-time confidence forward
            conf[tokens == self.mask_id] = np.nan
            at = np.where(committed | edited, row, self.committed_at[-1])
            at[tokens == self.mask_id] = -1
            bar = conf
        self.tokens.append(tokens)
        self.state.append(state)
        self.conf.append(conf.astype(np.float32))
        self.bar_conf.append(bar.astype(np.float32))
        self.committed_at.append(at)
        self.scores.append(np.asarray(scores, dtype=np.float32))
        self.proposals.append(np.asarray(proposals, dtype=np.int64))
        self.step_conf.append(confidence)
        self.committed.append(committed)
        return row

    def _uniform_cells(self, row: int, accepted, renoised, settled, confidence):
        """A uniform-state step's (state, confidence, bar confidence, committed_at) rows: settled positions keep
        their final token (and the row they settled at); the block in progress is noise or accepted."""
        settled = np.zeros_like(accepted) if settled is None else np.asarray(settled, bool)
        earlier = self.done.copy()
        self.done |= settled
        state = np.full(accepted.shape, CODE["masked"], np.int8)
        state[renoised] = CODE["noise"]
        state[accepted] = CODE["accepted"]
        state[earlier] = CODE["earlier"]
        state[settled] = CODE["settled"]
        state[self.fixed] = CODE["fixed"]
        # an accepted token's confidence is its draw's; a settled one keeps full colour (NaN)
        conf = np.where(accepted & ~self.done, confidence, np.where(earlier, self.conf[-1], np.nan))
        # the bars keep a settled position at the confidence it settled with
        bar = np.where(settled & ~earlier, confidence, np.where(earlier, self.bar_conf[-1], conf))
        at = np.where(settled, row, np.where(earlier, self.committed_at[-1], -1))
        return state, conf, bar, at

    def add_record(self, record, b: int = 0) -> int:
        """Append a sampler StepRecord (batch row b). A uniform-state run's first record also brings the
        canvas before it (StepRecord.start): row 0 becomes that, as the run's Trajectory has it."""
        if getattr(record, "start", None) is not None and self.n_rows == 1:
            self.set_start(record.start[b])
        settled = None if getattr(record, "settled", None) is None else record.settled[b]
        edited = None if getattr(record, "edited", None) is None else record.edited[b]
        return self.add_step(record.tokens[b], record.scores[b], record.proposals[b], record.confidence[b],
                             record.committed[b], record.remasked[b], settled, edited)

    def set_start(self, tokens) -> None:
        """Row 0 of a uniform-state run (L,): random tokens where the run drew its first block's noise, the
        placeholder ([MASK]: "block not started") where a later block waits, the template fixed."""
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)  # (L,)
        state = np.where(tokens == self.mask_id, CODE["masked"], CODE["noise"])
        self.tokens[0] = self.proposals[0] = tokens
        self.state[0] = np.where(self.fixed, CODE["fixed"], state).astype(np.int8)
        self.start_revision += 1

    @classmethod
    def from_trajectory(cls, traj, glyphs: np.ndarray, b: int = 0) -> "Frames":
        """All rows of a finished, recorded Trajectory (replay without re-sampling)."""
        if not traj.recorded:
            raise ValueError("this trajectory was sampled with record=False: nothing to replay")
        process = getattr(traj, "process", "masked")
        frames = cls(traj.tokens[0, b], traj.fixed[b], traj.mask_id, glyphs, process, traj.blocks)
        if process == "uniform":
            for s in range(traj.n_steps):
                frames.add_step(traj.tokens[s + 1, b], traj.scores[s, b], traj.proposals[s, b], traj.confidence[s, b],
                                traj.committed[s, b], traj.remasked[s, b], traj.settled[s, b])
            return frames
        for s in range(traj.n_steps):
            before, after = traj.tokens[s, b], traj.tokens[s + 1, b]
            committed = (before == traj.mask_id) & (after != traj.mask_id)
            frames.add_step(after, traj.scores[s, b], traj.proposals[s, b], traj.confidence[s, b], committed,
                            traj.remasked[s, b], edited=None if traj.edited is None else traj.edited[s, b])
        return frames

    def chars(self, row: int) -> np.ndarray:
        """(L,) str: the canvas at `row`, [MASK] as the mask glyph."""
        return self.glyphs[self.tokens[row]]

    def text(self, row: int | None = None) -> str:
        return "".join(self.chars(self.n_rows - 1 if row is None else row))

    def cells(self, start: int, stop: int | None = None) -> dict:
        """Numeric columns for rows [start, stop), one entry per (row, position) cell, row-major.

        All numeric, so they travel to the browser as binary arrays; token ids are turned into
        characters there, with the glyph table sent once per run."""
        stop = self.n_rows if stop is None else stop
        rows = range(start, stop)
        L = self.length

        def cat(arrays, dtype):
            return np.concatenate([arrays[r] for r in rows]).astype(dtype) if rows else np.zeros(0, dtype)

        return {"x": np.tile(np.arange(L, dtype=np.int32), len(rows)),
                "y": np.repeat(np.arange(start, stop, dtype=np.int32), L),
                "state": cat(self.state, np.int32), "token": cat(self.tokens, np.int32),
                "proposal": cat(self.proposals, np.int32), "committed_at": cat(self.committed_at, np.int32),
                "conf": cat(self.conf, np.float32), "score": cat(self.scores, np.float32)}
