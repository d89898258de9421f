"""SamplerConfig: every knob of the sampler, validated, frozen (hashable: usable as a cache key)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from . import knobs as _knobs
from ..names import SCHEDULE_ALIASES, SCHEDULES, STRATEGIES, SUPPRESS_EOS  # noqa: F401  (re-exported: the dashboard reads them here too)
from .knobs import MAX_STEPS, MIN_TEMPERATURE, is_int  # noqa: F401  (the first two re-exported)


def _knob_fields(cls):
    """Give `cls` one field per knob of the schema (knobs.KNOBS), in its order, at the knob's default:
    a knob is declared there only, and the dataclass stays a plain, fast, hashable one."""
    cls.__annotations__ = {name: knob.type.__name__ + (" | None" if knob.none else "")
                           for name, knob in _knobs.KNOBS.items()}
    for name, knob in _knobs.KNOBS.items():
        setattr(cls, name, knob.default)
    return cls


@dataclass(frozen=True)
@_knob_fields
class SamplerConfig:
    """Every knob of one sampler run, checked when made (a bad value is one ValueError line).

    Frozen and hashable: a run's cache key, and the same config with the same seed gives the same
    trajectory on every device. Its fields are the knobs of sampling/knobs.py, which says what each
    one does, its range and what "off" is; the checks here are knobs.Knob.check's, then the rules
    that relate two knobs.

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

    @property
    def adaptive(self) -> bool:
        """True when the step count is not fixed: threshold, factor or entropy-bound decoding runs until
        decoded."""
        return self.threshold is not None or self.factor is not None or self.entropy_bound is not None

    def __post_init__(self):
        for name, knob in _knobs.KNOBS.items():
            value = getattr(self, name)
            current = knob.normalize(value)  # an older name (a saved link or sweep) is its current one
            if current is not value:
                object.__setattr__(self, name, current)
            knob.check(current)
        self._check_pairs()

    def _check_pairs(self) -> None:
        """The rules between knobs (each alone is valid)."""
        if self.remask > 0 and self.threshold is not None:
            # Threshold decoding has no step budget that could absorb re-masked positions, so the
            # two together could revise forever.
            raise ValueError("remask must be 0 when threshold is set (threshold decoding has no step "
                             f"schedule to absorb re-masked positions), got remask={self.remask}")
        if self.remask_t_off > self.remask_t_on:
            raise ValueError(f"remask window needs remask_t_off <= remask_t_on, got "
                             f"[{self.remask_t_off}, {self.remask_t_on}]")
        rules = [k for k in ("threshold", "factor", "entropy_bound") if getattr(self, k) is not None]
        if len(rules) > 1:
            raise ValueError(f"choose one of threshold, factor and entropy_bound (each decides how many positions "
                             f"commit per step), got {' and '.join(rules)}")
        if self.remask > 0 and self.adaptive:
            raise ValueError(f"remask must be 0 when {rules[0]} is set (no step schedule to absorb re-masked "
                             f"positions), got remask={self.remask}")
        if self.cache != "none" and self.block_length == 0:
            # the cache is written at each block's start: one block is the whole canvas, nothing to reuse
            raise ValueError(f"cache {self.cache!r} needs block_length > 0 (the cache is refreshed at each "
                             "block's start): set block_length, or cache none")
        if self.alg_temp > 0 and self.adaptive:
            raise ValueError("alg_temp draws how many the schedule asks for; it does not combine with "
                             "threshold, factor or entropy-bound decoding")

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
    wanted = meta.get("sampler_defaults") or {}
    if not isinstance(wanted, dict):  # JSON written by hand or by another program
        raise ValueError(f"the checkpoint's sampler_defaults must be a JSON object of knobs, got "
                         f"{type(wanted).__name__}")
    wanted = dict(wanted)
    length = wanted.pop("length", None)
    SamplerConfig.from_dict(wanted)  # raises on an unknown knob or an invalid value
    if length is not None:
        context = model.config.block_size
        if not is_int(length) or not 1 <= length <= context:
            raise ValueError(f"the checkpoint's recommended length must be in [1, {context}], got {length!r}")
        wanted["length"] = length
    return wanted


def default_length(model) -> int:
    """The canvas a run takes when none is asked for: the checkpoint's recommended length (a Hugging Face
    model recommends one: hf/model.py), else the model's whole context.

    Args: model, a loaded model or a checkpoint's card (`.config.block_size`, `.meta`).
    Returns the length in tokens. Raises ValueError for a recommendation out of the context (recommended)."""
    return recommended(model).get("length") or model.config.block_size


def config_for(model, **knobs) -> SamplerConfig:
    """SamplerConfig of `knobs` over the checkpoint's recommended ones (length is not a config knob)."""
    base = {k: v for k, v in recommended(model).items() if k != "length"}
    return SamplerConfig(**{**base, **knobs})
