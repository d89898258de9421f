"""One browser session: the checkpoint it has open, the device it samples on, and the sampler knobs.

Every tab (tabs/) reads the model, device and knobs from here; the Explore tab's run, like every
other tab's work, lives in its own state. The canvas helpers turn a session's knobs into the
sampler's inputs exactly as a run will see them, so every tab draws and samples the same canvas.
Loading happens on a worker bound to the device (runtime/); results come back through `dispatch`,
so parameters are only ever set on the UI thread in a served session.
"""
from __future__ import annotations

import logging
import math
import types

import param

from ..checkpoint import CheckpointError
from ..sampling import knobs as schema
from ..sampling.config import SamplerConfig
from . import checkpoints
from .runtime.dispatch import call_now
from .runtime.limits import SessionShare
from .runtime.queue import device_queue
from .runtime.tasks import Worker

log = logging.getLogger(__name__)


class StepNumber(param.Number):
    """A float knob whose value is kept to 12 significant digits: a slider's arrow keys add its step in
    the browser's floating point (0.85 + 0.05 = 0.9000000000000001), which the link would carry as such.
    Kept, not rounded to the step: a typed value off the step stays what was typed. The sampler reads the
    value as float32, where the two are the same number."""

    def __set__(self, obj, val):
        if isinstance(val, float) and math.isfinite(val):
            val = float(f"{val:.12g}")
        super().__set__(obj, val)


def knob_parameters(knobs: dict | None = None) -> dict[str, param.Parameter]:
    """One parameter per sidebar knob of the schema (sampling/knobs.py: schema.sidebar_knobs), with its
    label, help and the UI's bounds, at its default as the UI shows it (threshold's None is 0 = off).
    The sidebar's widgets, links and Compare's columns all read these, so they share one bound."""
    out = {}
    for knob in schema.sidebar_knobs(knobs):
        default, common = knob.to_ui(knob.default), dict(label=knob.label, doc=knob.help + knob.off_note(ui=True))
        if knob.choices:
            out[knob.name] = param.Selector(default=default, objects=list(knob.choices), **common)
        elif knob.type is int:
            out[knob.name] = param.Integer(default, bounds=knob.ui_bounds, **common)
        else:
            out[knob.name] = StepNumber(default, bounds=knob.ui_bounds, step=knob.step, **common)
    return out


# Every knob a session holds: the sampler's, then the canvas's (length, template, chat); the seed stays
# where links have always carried it
SAMPLER_KNOBS = tuple(k.name for k in schema.sidebar_knobs() if k.name != "seed")
KNOBS = (*SAMPLER_KNOBS, "length", "seed", "template", "chat")


def start_canvas(model, template: str, length: int, seed: int):
    """The canvas a run starts from, exactly as the sampler builds it (so row 0 is drawn at once):
    sampling.plan.start_canvas, an AR model's start token drawn from `seed` as its run draws it."""
    from ..sampling.plan import start_canvas as plan_canvas

    return plan_canvas(model, length=length, template=template or None, seed=seed)


def run_plan(model, config, canvas):
    """The plan of a run of `config` from `canvas` (sampling.plan.RunPlan): its blocks and steps, the
    rows it records (`rows`: exact unless `rows_exact` is False, threshold decoding's guess, which the
    views outgrow) and `max_steps` (what the server's limits count). The heatmap is sized from it and
    the sampler is handed it, so the run starts from the canvas the views drew, as parsed."""
    from ..sampling.plan import plan_run

    return plan_run(model, config, canvas=canvas)


def sample_canvas(model, config, canvas, **kwargs):
    """One recorded run of the real sampler from `canvas`: sample_any with its run_plan (the AR
    baseline for causal models)."""
    from ..sampling import sample_any

    return sample_any(model, config, plan=run_plan(model, config, canvas), **kwargs)


def default_for(names: list[str], fallback: str | None = None) -> str | None:
    """The checkpoint a session opens unless told otherwise: `fallback` (the server's choice) when it
    is one of `names`, else the project's default of them (checkpoints.default_checkpoint)."""
    return fallback if fallback in names else checkpoints.default_checkpoint(names)


def checkpoint_or_default(name: str | None, names: list[str], fallback: str | None = None) -> tuple[str | None, str]:
    """The checkpoint to open first and a notice ('' = none). A name that is not one of `names` (from
    a URL or a script: a path, a typo) is never opened: `fallback` (the server's choice) or the
    default is, with a notice saying why."""
    default = default_for(names, fallback)
    if not name or name in names:
        return name or default, ""
    instead = f"; showing {default} instead" if default else ""
    listed = ", ".join(names) or "none"
    return default, f"checkpoint {name!r} is not one of the checkpoints in checkpoints/ ({listed}){instead}"


# The sampler knobs as parameters, made from the schema: Session inherits them
SessionKnobs = types.new_class("SessionKnobs", (param.Parameterized,), exec_body=lambda ns: ns.update(knob_parameters()))


class Session(SessionKnobs):
    """The checkpoint, device and sampler knobs of one browser session, and its notices.

    Its sampler knobs are the schema's (SessionKnobs; `sampler_config` converts them). `loaded` is bumped
    once a model is loaded and the knobs are fitted to it: the tabs start their work from there. `tabs`
    maps a tab's name to its state (tabs/); `close` cancels their work."""

    checkpoint = param.Selector(default=None, objects=[], allow_None=True, label="Checkpoint",
                                doc="Model to sample from (files in checkpoints/)")
    length = param.Integer(256, bounds=(1, 256), label="Length",
                           doc="Canvas length in characters; a template is padded with █ up to it")
    template = param.String("", label="Prompt / infill template",
                            doc="Text to keep; █ = one character to generate, [___] = five. The canvas is "
                                "padded with █ up to Length (so text after the template is generated too): "
                                "to fill only the blanks, set Length to the template's length (the button "
                                "below does). Empty = generate everything")
    fit_length = param.Event(label="Fill only the blanks",
                             doc="Set Length to the template's own length, so that only its █ and [___] are "
                                 "generated and nothing after it")

    chat = param.Boolean(False, label="Chat prompt (instruct models)",
                         doc="Send the prompt as the user's message in the model's chat template (Hugging Face "
                             "instruct models such as LLaDA-Instruct); the answer is generated after it")
    presentation = param.Boolean(False, label="Presentation (large type)", doc="Larger type for projectors")
    show_tab = param.String("", doc="A tab a tab's action brings to the front (Model's 'Sample from it': "
                                     "Explore); the app shows it and resets this to ''")
    status = param.String("", doc="What the session is doing (loading, sampling ...), in the header")
    error = param.String("", doc="A readable notice for the last failed action ('' = none)")
    model_info = param.Dict(default={})
    loaded = param.Integer(0, doc="Bumped once a model is loaded and the knobs fitted to it (its context...)")
    unloaded = param.Boolean(False, doc="No model is loaded and none is loading: every one tried failed, or "
                                        "there is none (`error` says why)")

    def __init__(self, checkpoint: str | None = None, device: str = "auto", dispatch=call_now, *,
                 fallback: str | None = None, **params):
        from ..devices import describe_device, resolve_device

        super().__init__(**params)
        # knobs given here (a script's, a test's) win over the first model's recommended ones
        self._pinned = {k: v for k, v in params.items() if k in KNOBS}
        names = checkpoints.available()
        self.param.checkpoint.objects = names
        self.dispatch = dispatch
        self.device = resolve_device(device)
        self.device_name = describe_device(self.device)
        precision = device_queue(self.device).precision_label
        if precision != "fp32":  # the texts differ from fp32 ones: the page says why
            self.device_name += f", {precision} autocast"
        self.model = None
        self.fitted_to = None  # the model, or before its load its checkpoint's metadata, the knobs are fitted to
        # what this session may ask of the server (serve's limits): its tabs' Workers and results count here
        self.share = SessionShare()
        self._loads = Worker("load", device=self.device)
        self.quiet = False  # set while the session fits its own knobs: tabs do not react per change
        self.tabs: dict = {}  # tab name -> its TabState (tabs/), filled when the app builds its tabs
        self.load_hooks: list = []  # hook(model) once a model is loaded, before `loaded` (urlstate.py)
        self._wanted, self._notice = checkpoint_or_default(checkpoint, names, fallback)
        self._fallback, self._failed = fallback, set()  # what a failed first load falls back to (_open_instead)
        self.error = self._notice  # on the page from the start; set again once the default is loaded
        self._preview(self._wanted)

    def sampler_config(self) -> SamplerConfig:
        """The SamplerConfig these knobs describe (raises ValueError with a readable message)."""
        return SamplerConfig(**{k.name: k.from_ui(getattr(self, k.name)) for k in schema.sidebar_knobs()})

    def recommended_knobs(self, model) -> dict:
        """Every sampler knob at what `model` recommends (its `sampler_defaults`, measured against held-out
        text), else at the knob's default: a checkpoint opens with the settings it reads best at. A link's
        own values are applied after these (urlstate.check_model)."""
        from ..sampling.config import recommended

        try:
            wanted = recommended(model)
        except ValueError as e:  # a bad recommendation is the checkpoint's fault: say so, keep defaults
            log.warning("ignoring the checkpoint's sampler_defaults: %s", e)
            wanted = {}
        # top-k stays as the user set it (fitted to the vocabulary in _loaded), as the seed does
        out = {k: self.param[k].default for k in SAMPLER_KNOBS if k != "top_k"}
        out.update({k: schema.KNOBS[k].to_ui(v) if k in schema.KNOBS else v  # None = off: the widget's 0
                    for k, v in wanted.items() if k in self.param})
        return out

    def knobs_model(self):
        """What the knobs' model-dependent defaults and bounds come from: the loaded model, else (before its
        load) the checkpoint's metadata they were fitted to; None before either. Tested against None, not
        `model or fitted_to`: that asks a torch module for its truth value, a container module's length."""
        return self.model if self.model is not None else self.fitted_to

    def canvas(self):
        """The starting canvas (template or blank) for the loaded model; ValueError if the template is bad."""
        if self.model is None:
            raise ValueError("no model is loaded yet")
        return start_canvas(self.model, self.prompt_template(), self.length, self.seed)

    def prompt_template(self) -> str:
        """The template as the sampler gets it: as typed (stripped), or the user's message in the model's
        chat template when `chat` is on (ValueError, shown as a notice, where the model has none)."""
        from ..sampling.template import as_chat

        text = self.template.strip()
        if self.chat and text and self.model is not None:
            return as_chat(text, self.model.tokenizer)
        return text

    def load(self, name: str | None = None, *, wait: bool = False) -> None:
        """Load `name` (default: the chosen / default checkpoint) in the background, then run."""
        name = name or self.checkpoint or self._wanted
        if name is None:
            self.error = self._notice or "no checkpoints found in checkpoints/: train one with `python run.py train`"
            self.unloaded = self.model is None
            return
        self.status = f"loading {name} …"
        self._loads.submit(lambda job: self._load_job(job, name), wait=wait)

    def _load_job(self, job, name: str) -> None:
        try:
            model = checkpoints.load(name, self.device)
            info = checkpoints.describe(model, name)
        except Exception as e:  # shown as a notice; the traceback goes to the server log...
            if isinstance(e, CheckpointError):  # ...unless it is the user's choice, not a bug
                log.warning("loading %r failed: %s", name, e)
            else:
                log.exception("loading %s failed", name)
            # the message is made here: Python unbinds `e` when the except block ends, before a
            # served session's loop runs the callback
            message = f"could not load {name}: {e}"
            self.dispatch(lambda: self._load_failed(job, name, message))
            return
        self.dispatch(lambda: self._loaded(job, name, model, info))

    def _loaded(self, job, name, model, info) -> None:
        if not self._loads.is_current(job):
            return
        self.quiet = True
        try:
            self.model, self.model_info = model, info
            if name not in self.param.checkpoint.objects:
                self.param.checkpoint.objects = [*self.param.checkpoint.objects, name]
            self.checkpoint = name
            pinned, self._pinned = self._pinned, {}
            self._fit_knobs(model, pinned)
            for hook in list(self.load_hooks):  # e.g. a shared link's length, checked against this model
                hook(model)
            # after the hooks: a link's knobs are applied again there, and one this model cannot take
            # (the cache on a masked LM, dual on code that takes the prefix cache only) is switched off
            self._notice = _joined(self._notice, self._switch_off_unmet(info))
        finally:
            self.quiet = False
        notice, self._notice = self._notice, ""
        self.status, self.error, self.unloaded = f"{name} loaded", "", False
        self.loaded += 1  # the tabs start their work (Explore: its first run, which may set a notice)
        if not self.error:
            self.error = notice  # e.g. why ?checkpoint= was not used, unless the first run's notice is shown

    def _fit_knobs(self, model, pinned: dict) -> None:
        """The knobs fitted to `model` (a loaded one, or a checkpoint's metadata: checkpoints.peek): its
        context bounds the length (set to it) and block length, its vocabulary top-k; then its recommended
        knobs, and `pinned` over them. A template in another alphabet is dropped."""
        self.fitted_to = model  # what a knob's default is read from (urlstate: a link leaves defaults out)
        context = model.config.block_size
        self.param.length.bounds = (1, context)
        self.param.block_length.bounds = (0, context)
        # top-k counts the tokens that can be proposed: the vocabulary less [MASK]. (Not the mask's id: that is
        # the last id only in our own models; BERT's is 103 of 30,522.)
        proposable = model.config.vocab_size - 1
        self.param.top_k.bounds = (0, proposable)
        self.length = context
        self.top_k = min(self.top_k, proposable)
        pinned = {k: v for k, v in pinned.items() if not (k == "length" and v > context)}
        self.param.update(**{**self.recommended_knobs(model), **pinned})
        if self.template and model.tokenizer.unknown_chars(self.template.replace("[___]", "").replace("█", "")):
            self.template = ""  # a template for another model's alphabet

    def _switch_off_unmet(self, info: dict) -> str:
        """Switch off each knob whose value this model cannot take (Knob.takes: the KV cache it lacks, a cache
        mode its code does not offer) and say so. A link or the previous model may have left one on; the
        sidebar disables its widget, or does not offer the value, for this model, so a run that refused it
        would leave no way to clear it but editing the link.

        Args: info, the loaded model's card (checkpoints.describe). Returns the notice ('' if none)."""
        dropped = []
        for knob in schema.sidebar_knobs():
            value = knob.from_ui(getattr(self, knob.name))
            if not knob.takes(info, value):  # e.g. the cache on a masked LM, dual on code taking prefix only
                setattr(self, knob.name, knob.to_ui(knob.off))
                dropped.append(f"{knob.name}={value}")
        if not dropped:
            return ""
        return f"Switched off for this model, which cannot take it: {', '.join(dropped)}"

    def _preview(self, name: str | None) -> None:
        """Show `name` and its knobs from the first paint: the checkpoint's metadata (read without its
        weights) fits the knobs as its load will, so a page does not show the default checkpoint's
        knobs (256 characters, 32 steps) for the seconds the model takes to load, and a link's knobs
        are applied (urlstate.py) and checked against this checkpoint's bounds over these. The load
        fits them again from the model (_loaded)."""
        card = checkpoints.peek(name) if name else None
        if card is None:  # a Hugging Face model, or a file the load will report on
            return
        self.quiet = True
        try:
            self.checkpoint = name
            self._fit_knobs(card, self._pinned)
        finally:
            self.quiet = False

    def _load_failed(self, job, name: str, message: str) -> None:
        """Keep the model that was loaded, and put the selector back on it so the page does not claim
        the failed one is in use. With none loaded yet (the page's first load: a listed model whose
        files are gone, a link to a broken file), open the default instead (_open_instead): a page
        left without a model can do nothing at all."""
        if not self._loads.is_current(job):
            return
        self.quiet = True
        try:
            in_use = self.model_info.get("name")
            if self.checkpoint != in_use:
                self.checkpoint = in_use
            if in_use is None:  # the selector adds any value set to its choices: "no model" is not one
                self.param.checkpoint.objects = [n for n in self.param.checkpoint.objects if n is not None]
        finally:
            self.quiet = False
        notice, self._notice = self._notice, ""  # why this one was tried: still worth saying
        message = f"{notice}. {message}" if notice else message
        if self.model is None and self._open_instead(name, message):
            return
        self.fail(message)
        self.unloaded = self.model is None

    def _open_instead(self, failed: str, message: str) -> bool:
        """Load the default of the checkpoints not yet failed, `failed` being the latest, with a notice
        that says what failed and what is shown instead; False when none is left to try."""
        self._failed.add(failed)
        left = [n for n in self.param.checkpoint.objects if n not in self._failed]
        instead = default_for(left, self._fallback)
        if instead is None:
            return False
        self._notice = f"{message}; showing {instead} instead"
        self.error = self._notice  # on the page while it loads; shown again once it is loaded (_loaded)
        self.load(instead)
        return True

    @param.depends("fit_length", watch=True)
    def _fit_length(self):
        from ..sampling.template import expand_blanks

        n, context = len(expand_blanks(self.template)), self.param.length.bounds[1]
        if not self.template.strip():
            self.fail("type a template first: Length then becomes its length, so only its blanks are filled")
        elif n > context:
            self.fail(f"the template is {n} positions but the model's context is {context}; shorten the template")
        else:  # a change of Length (the run follows, as for any knob), made after the click's own
            # handling: set inside it, Panel's link to the throttled Length slider raised "Constant
            # parameter 'value_throttled' cannot be modified" and the slider kept the old value
            self.dispatch(lambda: setattr(self, "length", n))

    @param.depends("checkpoint", watch=True)
    def _checkpoint_chosen(self):
        if not self.quiet and self.checkpoint and self.checkpoint != self.model_info.get("name"):
            self.load(self.checkpoint)

    def fail(self, message: str) -> None:
        """A notice in the page (never a traceback)."""
        self.status, self.error = "", message

    def close(self) -> None:
        """Cancel everything this session started (called when its browser tab closes)."""
        try:
            self._loads.cancel()
            for name, tab in self.tabs.items():
                try:
                    tab.close()
                except Exception:  # one tab's failure must not keep the others (or their rows) alive
                    log.exception("closing the %s tab failed", name)
        finally:
            self.model = None  # the model stays in the shared cache; this session lets go of it now


def _joined(*notices: str) -> str:
    """The non-empty notices, one sentence after another."""
    return "; ".join(n for n in notices if n)
