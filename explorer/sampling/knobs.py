"""The sampler's knobs, each declared once: its type, range, default, what "off" is, its help and where
it shows. Everything else is generated or read from here: SamplerConfig's fields and checks
(config.py), the `sample` and `sweep` flags (cli/), the dashboard session's parameters and the sidebar's
widgets (dashboard/session.py, tabs/explore/controls.py), so links and Compare's columns too, and the
knobs merged runs may differ in (merged.py).

A leaf: it imports only the valid name lists (explorer/names.py). To add a knob, add a Knob to KNOBS
and teach the sampler to read it; docs/design.md ("Knobs") says more.

"Off" has one representation per side: the config keeps `off` (None for threshold, factor and
entropy_bound: "no such rule"), and a widget that cannot show None shows `ui_off` (0) instead. `to_ui` and `from_ui`
convert both ways, in this one place.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..names import CACHES, KINDS, PROCESSES, SCHEDULE_ALIASES, SCHEDULES, STRATEGIES, SUPPRESS_EOS

MAX_STEPS = 4096
# A positive temperature below this divides the logits past float64's range (1/1e-320 is inf) and
# the draw stops being a distribution; any temperature this small is greedy decoding in effect.
MIN_TEMPERATURE = 1e-6
NO_OFF = "<no off>"  # `off` of a knob that has no "off" value (steps, temperature, seed)
WIDGETS = ("slider", "input", "select")  # the sidebar's slider, number box, or drop-down of names
MERGES = ("vary", "share", "off")  # see Knob.merge


INT64_END = 2**63  # the first integer a 64-bit signed column or tensor cannot hold


@dataclass(frozen=True)
class Knob:
    """One sampler knob: everything any part of the project needs to know about it.

    Config side: `type` (int, float or str), `default`, the range [lo, hi] (an end None = unbounded;
    lo_open / hi_open make an end exclusive), `choices` and older `aliases` for names, `none` (None is
    valid: its "off"), `greedy_below` (a positive value below it is refused: temperature). `off` is
    the config's value that switches the knob off, `off_means` what that does; `ui_off` what a widget
    shows for it where the config's off is None.
    UI side: `label` (None = not in the sidebar, nor in links or Compare), `ui_range` (the one bound of
    the slider, links and Compare where it is narrower than the config's), `step`, `widget`, `exact`
    (a number box beside the slider), `real_model` (the card of LLaDA / Dream / Fast-dLLM knobs).
    Where it applies: `kinds` (model kinds whose sampler reads it: the sidebar disables it for others),
    `processes` (the diffusion processes whose sampler reads it: masked, uniform-state; the same);
    `needs`, a feature the model must have (a key of the dashboard's model_info, true where it has it:
    the sidebar disables the knob for other models, and their runs refuse it while it is on); `offers`, a
    key of model_info listing the choices (besides `off`) the loaded model takes, where that depends on
    the model (the cache: code may take the prefix cache only): the sidebar offers those, and loading
    the model switches another choice off.
    `merge`: merged runs (merged.py) may "vary" in it, must "share" it, or merge only while it is "off"
    (the merged stepper does not implement it: the safe choice for a new knob). `sweep`: `run.py sweep`
    takes a list of it, `sweep_default` its list when not given.
    """

    name: str
    type: type
    default: object
    help: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple = ()
    aliases: tuple = ()  # (older name, current name) pairs
    none: bool = False
    greedy_below: float | None = None
    off: object = NO_OFF
    off_means: str = "off"
    ui_off: object = NO_OFF
    label: str | None = None
    ui_range: tuple | None = None
    step: float | None = None
    widget: str = "slider"
    exact: bool = False
    real_model: bool = False
    kinds: tuple = ("diffusion",)
    processes: tuple = PROCESSES
    needs: str | None = None
    offers: str | None = None
    merge: str = "off"
    sweep: bool = False
    sweep_default: str | None = None

    def __post_init__(self):
        # a declaration mistake fails at import, naming the knob, instead of surfacing in one consumer
        names = (self.type is str) == bool(self.choices) == (self.widget == "select")
        if self.type not in (int, float, str) or not names:
            raise TypeError(f"knob {self.name}: type int or float, or str with choices and widget='select'")
        if self.widget not in WIDGETS or self.merge not in MERGES or not set(self.kinds) <= set(KINDS) or not (
                set(self.processes) <= set(PROCESSES)):
            raise ValueError(f"knob {self.name}: widget in {WIDGETS}, merge in {MERGES}, kinds in {KINDS}, "
                             f"processes in {PROCESSES}")
        if self.merge == "off" and self.off is NO_OFF:
            raise ValueError(f"knob {self.name}: merge='off' needs an off value")
        if self.ui_off is not NO_OFF and self.off is not None:
            raise ValueError(f"knob {self.name}: ui_off stands in for a None off only")
        self.check(self.default)

    # ------------------------------------------------------------------ the config's side

    @property
    def flag(self) -> str:
        """The command-line flag: --block-length for block_length."""
        return "--" + self.name.replace("_", "-")

    def normalize(self, value):
        """`value` under its current name (an older one from a saved link or sweep), else itself."""
        return dict(self.aliases).get(value, value) if isinstance(value, str) else value

    def check(self, value) -> None:
        """Raise ValueError (one line naming the knob, its range and `value`) unless `value` is valid."""
        if value is None and self.none:
            return
        if self.choices:
            if value not in self.choices:
                raise ValueError(f"unknown {self.name} {value!r}; valid: {', '.join(self.choices)}")
        elif self.type is int:
            if not (is_int(value) and self._in_range(value)):
                note = f" ({self.off} = {self.off_means})" if self.off is not NO_OFF else ""
                raise ValueError(f"{self.name} must be an integer {self.range_text()}{note}, got {value!r}")
            if self.hi is None and value >= INT64_END:  # tables and tensors hold it as a 64-bit integer
                raise ValueError(f"{self.name} must be an integer below 2^63, got {value!r}")
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if not (ok and self._in_range(value)):
                raise ValueError(f"{self.name} must be {self.range_text()}, got {value!r}")
            if self.greedy_below is not None and 0 < value < self.greedy_below:
                raise ValueError(f"{self.name} must be 0 (greedy) or at least {self.greedy_below:g}, got {value!r}")

    def _in_range(self, value) -> bool:
        lo_ok = self.lo is None or (value > self.lo if self.lo_open else value >= self.lo)
        return lo_ok and (self.hi is None or (value < self.hi if self.hi_open else value <= self.hi))

    def range_text(self) -> str:
        """The config's range as messages write it: in [1, 4096], in (0, 1], in [0, 2^63), >= 0."""
        if self.hi is None:
            return f"{'>' if self.lo_open else '>='} {self.lo}"
        return f"in {'(' if self.lo_open else '['}{self.lo}, {_shown(self.hi)}{')' if self.hi_open else ']'}"

    def is_off(self, value) -> bool:
        """Whether `value` (the config's) switches the knob off."""
        return self.off is not NO_OFF and (value is None if self.off is None else value == self.off)

    # ------------------------------------------------------------------ the UI's side

    def to_ui(self, value):
        """The config's `value` as a widget shows it (None for off -> ui_off)."""
        return self.ui_off if value is None and self.ui_off is not NO_OFF else value

    def from_ui(self, value):
        """A widget's `value` as the config takes it (ui_off -> None; numbers as the knob's type)."""
        if self.ui_off is not NO_OFF and value == self.ui_off:
            return None
        return self.type(value) if self.type in (int, float) and value is not None else value

    @property
    def ui_bounds(self) -> tuple:
        """The sidebar's, links' and Compare's bounds: ui_range, else the config's range."""
        return self.ui_range if self.ui_range is not None else (self.lo, self.hi)

    def unmet(self, info: dict) -> bool:
        """Whether a model whose card is `info` (the dashboard's model_info) lacks the feature this knob
        needs (`needs`): the sidebar disables the knob, and loading such a model switches it off."""
        return self.needs is not None and not info.get(self.needs)

    def allowed(self, info: dict) -> tuple:
        """The choices a model whose card is `info` takes: `off` and those its card lists under `offers`
        (all of them where the knob has no `offers`, or the card does not say)."""
        listed = info.get(self.offers) if self.offers is not None else None
        return self.choices if listed is None else (self.off, *listed)

    def takes(self, info: dict, value) -> bool:
        """Whether a model whose card is `info` takes `value` (the config's) of this knob: off always;
        otherwise it must have the feature the knob needs and, for a choice, offer it."""
        if self.is_off(value):
            return True
        return not self.unmet(info) and (self.offers is None or value in self.allowed(info))

    def off_note(self, ui: bool) -> str:
        """' (0 = off)': what switches it off, as the UI (ui=True) or the command line writes it."""
        if self.off is NO_OFF or self.choices:  # a choice's "off" is one of the names listed
            return ""
        shown = self.ui_off if ui and self.ui_off is not NO_OFF else self.off
        return f" ({'none' if shown is None else _shown(shown)} = {self.off_means})"


def unread_by(kind: str, process: str, names) -> list[str]:
    """The knobs among `names` that a model's sampler does not read: one whose `kinds` leave out the model's
    kind ("diffusion", "ar"), or a diffusion model's process ("masked", "uniform") its `processes`. A run
    given one would be the run without it, so callers refuse it rather than ignore it.

    Args: kind and process of the model (sampling.uniform.model_process); names, knob names (others pass).
    Returns the unread names, in the order given."""
    return [n for n in names if n in KNOBS and (kind not in KNOBS[n].kinds
                                                or (kind == "diffusion" and process not in KNOBS[n].processes))]


def is_int(value) -> bool:
    # bool is an int subclass, but True as a step count or top-k is a mistake, not a number
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(number) -> str:
    """A bound or value as text: 1.0 as 1, 2**63 as 2^63."""
    if is_int(number) and number >= 2**32 and number & (number - 1) == 0:
        return f"2^{number.bit_length() - 1}"
    return f"{number:g}" if isinstance(number, float) else str(number)


def registry(*knobs: Knob) -> dict[str, Knob]:
    """{name: knob}, in the order given (SamplerConfig's field order); a name given twice is an error."""
    out = {}
    for knob in knobs:
        if knob.name in out:
            raise ValueError(f"knob {knob.name} is declared twice")
        out[knob.name] = knob
    return out


BOTH = ("diffusion", "ar")  # the AR baseline draws each token with the same proposal rule
MASKED, UNIFORM = ("masked",), ("uniform",)  # knobs of one diffusion process's sampler (sampling/uniform.py)
KNOBS: dict[str, Knob] = registry(
    Knob("steps", int, 32, "Denoising steps: model calls per sample (1 = everything in one shot; threshold "
         "and factor decoding set their own count; a uniform-state model takes at most this many per block)",
         lo=1, hi=MAX_STEPS, label="Steps", ui_range=(1, 256),
         exact=True, merge="vary", sweep=True, sweep_default="1,2,4,8,16,32"),
    Knob("temperature", float, 1.0, "Sampling temperature: 0 = always the most likely token (greedy); higher = "
         "more varied, more errors", lo=0, hi=100, greedy_below=MIN_TEMPERATURE, label="Temperature",
         ui_range=(0.0, 2.0), step=0.05, kinds=BOTH, merge="vary", sweep=True),
    Knob("temperature_end", float, None, "Anneal the temperature linearly from temperature to this across "
         "the steps", lo=0, hi=100, greedy_below=MIN_TEMPERATURE, none=True, off=None,
         off_means="a constant temperature", kinds=BOTH),
    # The uniform-state process's stop (uniform.py: DiffusionGemma's StableAndConfidentStoppingCriteria)
    Knob("stop_entropy", float, 0.005, "Uniform-state models: a block stops once its mean entropy (nats, "
         "tempered) is below this and its draft has been stable for stable_steps steps", lo=0, lo_open=True,
         hi=100, none=True, off=None, ui_off=0.0, off_means="every block takes all its steps", merge="share",
         label="Stop entropy (uniform-state)", widget="input", real_model=True, processes=UNIFORM),
    Knob("stable_steps", int, 1, "Uniform-state models: steps the draft (the argmax) must stay unchanged "
         "before a block may stop (0: confidence alone)", lo=0, hi=MAX_STEPS, merge="share",
         label="Stable steps (uniform-state)", widget="input", real_model=True, processes=UNIFORM),
    Knob("top_k", int, 0, "Keep only the k most likely tokens", lo=0, off=0, label="Top-k", ui_range=(0, 128),
         kinds=BOTH, merge="share", sweep=True, processes=MASKED),
    Knob("top_p", float, 1.0, "Nucleus: keep the most likely tokens up to this probability mass", lo=0, hi=1,
         lo_open=True, off=1.0, label="Top-p", ui_range=(0.05, 1.0), step=0.05, kinds=BOTH, merge="share",
         sweep=True, processes=MASKED),
    Knob("strategy", str, "confidence", "Which masked positions to commit at each step", choices=STRATEGIES,
         label="Strategy", widget="select", merge="vary", sweep=True, sweep_default="confidence,random",
         processes=MASKED),
    Knob("schedule", str, "linear", "How many positions to commit at each step (remaining: what is masked, "
         "spread over the steps left)", choices=SCHEDULES, aliases=tuple(SCHEDULE_ALIASES.items()),
         label="Schedule", widget="select", merge="vary", sweep=True, processes=MASKED),
    Knob("block_length", int, 0, "Semi-autoregressive: fill blocks of this many generated positions left to "
         "right; the last block may be shorter", lo=0, off=0, off_means="one block", label="Block length",
         ui_range=(0, 256), widget="input", sweep=True),
    Knob("cache", str, "none", "Fast-dLLM's key/value cache for blocks (needs block_length > 0 and a model whose "
         "forward takes cached keys and values: this project's own, or LLaDA- or Dream-style remote code taking "
         "past_key_values; dual also needs its replace_position): one full forward at each block's start, then "
         "each step recomputes the block and everything after it (prefix) or the block alone (dual), attending to "
         "the cached keys and values of the rest. Approximate: those were computed from the canvas (and t) at the "
         "block's start", choices=CACHES, off="none", label="KV cache (blocks)", widget="select", processes=MASKED,
         needs="kv_cache", offers="cache_modes", sweep=True),
    Knob("threshold", float, None, "Fast-dLLM: commit every position scoring at least this (replaces the "
         "schedule)", lo=0, hi=1, none=True, off=None, ui_off=0.0, label="Threshold", step=0.05, sweep=True,
         processes=MASKED),
    Knob("remask", float, 0.0, "ReMDM revision rate η: the chance that committed tokens are masked again",
         lo=0, hi=1, off=0.0, label="Revision η", step=0.05, sweep=True, processes=MASKED),
    Knob("remask_t_on", float, 0.55, "Revision window's upper end: the masked fraction of the current block "
         "where revising starts", lo=0, hi=1, merge="share", processes=MASKED),
    Knob("remask_t_off", float, 0.05, "Revision window's lower end: the masked fraction where it stops",
         lo=0, hi=1, merge="share", processes=MASKED),
    Knob("seed", int, 0, "Random seed: the same seed and knobs give the same text", lo=0, hi=2**63,
         hi_open=True, label="Seed", ui_range=(0, 2**31 - 1), widget="input", kinds=BOTH, merge="vary"),
    # Knobs real diffusion LMs use, with LLaDA's, Dream's and Fast-dLLM's meaning (so their settings carry over)
    Knob("cfg_scale", float, 0.0, "Classifier-free guidance (LLaDA) w: push predictions away from what the "
         "model says without the prompt, l_u + (w + 1)(l_c - l_u); costs a second model call per step",
         lo=0, hi=100, off=0.0, label="Guidance (CFG) scale", ui_range=(0.0, 10.0), step=0.25, real_model=True,
         processes=MASKED),
    Knob("suppress_eos", str, "off", "End-of-sequence / end-of-turn tokens: never proposed (logits), committed "
         "last (confidence), or both. Needs a tokenizer with EOS tokens", choices=SUPPRESS_EOS, off="off",
         label="Suppress EOS", widget="select", real_model=True, processes=MASKED, needs="eos"),
    Knob("alg_temp", float, 0.0, "Dream: draw which positions to commit from softmax(score / this) instead of "
         "taking the best ones", lo=0, hi=100, off=0.0, label="Position temperature (Dream alg_temp)",
         ui_range=(0.0, 5.0), step=0.05, real_model=True, processes=MASKED),
    Knob("factor", float, None, "Fast-dLLM's factor rule: commit the n best positions while the n-th scores "
         ">= 1 - factor/(n+1) (replaces the schedule, like threshold)", lo=0, hi=100, lo_open=True, none=True,
         off=None, ui_off=0.0, label="Factor (Fast-dLLM)", ui_range=(0.0, 10.0), step=0.25, real_model=True,
         sweep=True, processes=MASKED),
    Knob("entropy_bound", float, None, "EB-sampler: in the strategy's order, commit the most positions whose "
         "entropies (nats) sum to at most this plus the largest of them (replaces the schedule, like threshold); "
         "a uniform-state model accepts its lowest-entropy positions by the same sum (none: 0.1)",
         lo=0, hi=100, lo_open=True, none=True, off=None, ui_off=0.0, label="Entropy bound (EB)",
         ui_range=(0.0, 5.0), step=0.05, real_model=True, sweep=True),
    Knob("edit_threshold", float, 0.0, "Token editing (LLaDA2.1): replace a committed token of the current "
         "block by the token drawn there when it differs and its probability exceeds this; a block filled before "
         "its last step takes post steps while they edit (diffusers' BlockRefinementScheduler)", lo=0, hi=1,
         off=0.0, label="Edit threshold (LLaDA2.1)", step=0.05, real_model=True, merge="off", sweep=True,
         processes=MASKED),
)


def sidebar_knobs(knobs: dict[str, Knob] | None = None) -> list[Knob]:
    """The knobs the dashboard shows (a label), in the registry's order: the session's parameters."""
    return [k for k in (KNOBS if knobs is None else knobs).values() if k.label is not None]
