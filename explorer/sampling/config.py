"""SamplerConfig: every knob of the sampler, validated, frozen (hashable: usable as a cache key)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

from ..names import SCHEDULE_ALIASES, SCHEDULES, STRATEGIES, SUPPRESS_EOS  # noqa: F401  (re-exported: the dashboard reads them here too)

MAX_STEPS = 4096


def _check_name(knob: str, value: str, valid) -> None:
    if value not in valid:
        raise ValueError(f"unknown {knob} {value!r}; valid: {', '.join(valid)}")


def _is_int(value) -> bool:
    # bool is an int subclass, but True as a step count or top-k is a mistake, not a number
    return isinstance(value, int) and not isinstance(value, bool)


def _check_range(knob: str, value, lo, hi, lo_open=False, hi_open=False, allow_none=False) -> None:
    if value is None and allow_none:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi)
    if not ok:
        lb, rb = "(" if lo_open else "[", ")" if hi_open else "]"
        raise ValueError(f"{knob} must be in {lb}{lo}, {hi}{rb}, got {value!r}")


# A positive temperature below this divides the logits past float64's range (1/1e-320 is inf) and
# the draw stops being a distribution; any temperature this small is greedy decoding in effect.
MIN_TEMPERATURE = 1e-6


def _check_temperature(knob: str, value, allow_none=False) -> None:
    _check_range(knob, value, 0, 100, allow_none=allow_none)
    if value is not None and 0 < value < MIN_TEMPERATURE:
        raise ValueError(f"{knob} must be 0 (greedy) or at least {MIN_TEMPERATURE:g}, got {value!r}")


@dataclass(frozen=True)
class SamplerConfig:
    """Every knob of one sampler run, checked when made (a bad value is one ValueError line).

    Frozen and hashable: a run's cache key, and the same config with the same seed gives the same
    trajectory on every device. The fields below say what each knob does and what "off" is; the
    ones after `seed` are the knobs real diffusion LMs (LLaDA, Dream, Fast-dLLM) add.

    Example:
        >>> from explorer.sampling import SamplerConfig
        >>> cfg = SamplerConfig(steps=16, strategy="margin", temperature=0.8, seed=1)
        >>> cfg.replace(steps=32).steps, cfg.adaptive
        (32, False)
        >>> SamplerConfig.from_dict({"steps": 0})
        Traceback (most recent call last):
        ...
        ValueError: steps must be an integer in [1, 4096], got 0
    """
    steps: int = 32  # denoising steps S (1 = single shot; ignored under threshold decoding)
    temperature: float = 1.0  # 0 = argmax
    temperature_end: float | None = None  # anneal linearly from temperature to this across steps
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # nucleus mass in (0, 1]; 1 = off
    strategy: str = "confidence"  # which masked positions to commit: see STRATEGIES
    schedule: str = "linear"  # how many per step: see SCHEDULES
    block_length: int = 0  # semi-autoregressive block size; 0 = whole canvas. Need not divide the
    # number of generated positions: the last block is simply shorter (sampler.plan_blocks)
    threshold: float | None = None  # Fast-dLLM confidence threshold gamma; None = use the schedule
    remask: float = 0.0  # ReMDM revision rate eta in [0, 1]
    remask_t_on: float = 0.55  # revision window [t_off, t_on]: masked fraction of the current block
    remask_t_off: float = 0.05
    seed: int = 0
    # Knobs real diffusion LMs use, with LLaDA's, Dream's and Fast-dLLM's meaning (so their settings carry over):
    cfg_scale: float = 0.0  # classifier-free guidance w: l_u + (w + 1)(l_c - l_u), l_u with the prompt masked
    suppress_eos: str = "off"  # EOS / end-of-turn tokens: "logits" never proposed, "confidence" committed last
    alg_temp: float = 0.0  # Dream: > 0 draws the positions to commit from softmax(score / alg_temp)
    factor: float | None = None  # Fast-dLLM's factor rule: commit the n best while score_n >= 1 - f / (n + 1)

    @property
    def adaptive(self) -> bool:
        """True when the step count is not fixed: threshold or factor decoding runs until decoded."""
        return self.threshold is not None or self.factor is not None

    def __post_init__(self):
        if not _is_int(self.steps) or not 1 <= self.steps <= MAX_STEPS:
            raise ValueError(f"steps must be an integer in [1, {MAX_STEPS}], got {self.steps!r}")
        _check_temperature("temperature", self.temperature)
        _check_temperature("temperature_end", self.temperature_end, allow_none=True)
        if not _is_int(self.top_k) or self.top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0 (0 = off), got {self.top_k!r}")
        _check_range("top_p", self.top_p, 0, 1, lo_open=True)
        _check_name("strategy", self.strategy, STRATEGIES)
        if self.schedule in SCHEDULE_ALIASES:  # an older name (a saved link or sweep) is its current one
            object.__setattr__(self, "schedule", SCHEDULE_ALIASES[self.schedule])
        _check_name("schedule", self.schedule, SCHEDULES)
        if not _is_int(self.block_length) or self.block_length < 0:
            raise ValueError(f"block_length must be an integer >= 0 (0 = one block), got {self.block_length!r}")
        _check_range("threshold", self.threshold, 0, 1, allow_none=True)
        _check_range("remask", self.remask, 0, 1)
        _check_range("remask_t_on", self.remask_t_on, 0, 1)
        _check_range("remask_t_off", self.remask_t_off, 0, 1)
        if self.remask > 0 and self.threshold is not None:
            # Threshold decoding has no step budget that could absorb re-masked positions, so the
            # two together could revise forever.
            raise ValueError("remask must be 0 when threshold is set (threshold decoding has no step "
                             f"schedule to absorb re-masked positions), got remask={self.remask}")
        if self.remask_t_off > self.remask_t_on:
            raise ValueError(f"remask window needs remask_t_off <= remask_t_on, got "
                             f"[{self.remask_t_off}, {self.remask_t_on}]")
        self._check_real_model_knobs()
        if not _is_int(self.seed) or not 0 <= self.seed < 2**63:
            raise ValueError(f"seed must be an integer in [0, 2^63), got {self.seed!r}")

    def _check_real_model_knobs(self) -> None:
        _check_range("cfg_scale", self.cfg_scale, 0, 100)
        _check_name("suppress_eos", self.suppress_eos, SUPPRESS_EOS)
        _check_range("alg_temp", self.alg_temp, 0, 100)
        _check_range("factor", self.factor, 0, 100, lo_open=True, allow_none=True)
        if self.factor is not None and self.threshold is not None:
            raise ValueError("choose one of threshold and factor (both decide how many positions commit per step)")
        if self.remask > 0 and self.factor is not None:
            raise ValueError(f"remask must be 0 when factor is set (no step schedule to absorb re-masked "
                             f"positions), got remask={self.remask}")
        if self.alg_temp > 0 and self.adaptive:
            raise ValueError("alg_temp draws how many the schedule asks for; it does not combine with "
                             "threshold or factor decoding")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SamplerConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown sampler knob(s): {', '.join(sorted(unknown))}; valid: {', '.join(sorted(known))}")
        return cls(**d)

    def replace(self, **changes) -> "SamplerConfig":
        return replace(self, **changes)


def recommended(model) -> dict:
    """The sampler knobs a checkpoint recommends (its metadata's `sampler_defaults`, chosen by measuring
    its samples against held-out text, as Hugging Face models ship a generation config), checked.

    Returns SamplerConfig knobs plus, where the checkpoint names one, `length`. A checkpoint without
    recommendations gives {}: SamplerConfig's own defaults apply. Unknown or invalid entries raise
    ValueError: a checkpoint that recommends nonsense is a bad checkpoint, not a silent fallback."""
    meta = getattr(model, "meta", None) or {}
    wanted = dict(meta.get("sampler_defaults") or {})
    length = wanted.pop("length", None)
    SamplerConfig.from_dict(wanted)  # raises on an unknown knob or an invalid value
    if length is not None:
        context = model.config.block_size
        if not _is_int(length) or not 1 <= length <= context:
            raise ValueError(f"the checkpoint's recommended length must be in [1, {context}], got {length!r}")
        wanted["length"] = length
    return wanted


def config_for(model, **knobs) -> SamplerConfig:
    """SamplerConfig of `knobs` over the checkpoint's recommended ones (length is not a config knob)."""
    base = {k: v for k, v in recommended(model).items() if k != "length"}
    return SamplerConfig(**{**base, **knobs})
