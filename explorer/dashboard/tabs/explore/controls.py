"""The sidebar: the session's checkpoint and knobs and Explore's run buttons, every widget made from a
parameter (its doc is the hover help)."""
from __future__ import annotations


import panel as pn
import param

from ....sampling import knobs as schema
from ...ui.base import StateView, checkbox, notice, show_notice, widget_type_size
from ...ui.internals import no_debounce, sync_throttled

# Everything below is read from the knob schema (sampling/knobs.py): a knob declared there shows here.
# The sidebar's knobs but the seed, which sits beside its own "new seed" button
KNOBS = [k for k in schema.sidebar_knobs() if k.name != "seed"]
SLIDERS = {"length": pn.widgets.IntSlider, **{
    k.name: pn.widgets.IntSlider if k.type is int else pn.widgets.FloatSlider for k in KNOBS if k.widget == "slider"}}
# Sliders with a number box beside them, for an exact value (a linear 1-256 slider is hard to stop on 64)
EXACT = ("length", *(k.name for k in KNOBS if k.exact))
# The knobs real diffusion LMs use, in a card of their own: closed until wanted
REAL_MODEL_KNOBS = tuple(k.name for k in KNOBS if k.real_model)
# Knobs only the diffusion sampler reads: disabled while a causal (AR) model is loaded
DIFFUSION_ONLY = tuple(k.name for k in schema.sidebar_knobs() if "ar" not in k.kinds)


def in_order(knobs) -> list[str]:
    """The knobs' names as the sidebar lists them: the choices first (what to do), then the numbers
    (how much), each in the schema's order; those with a number box have rows of their own."""
    rest = [k for k in knobs if not k.exact]
    return [k.name for k in rest if k.choices] + [k.name for k in rest if not k.choices]


class ControlsView(StateView):
    """Checkpoint, sampler knobs, template editor with its notice, run / stop / seed buttons
    (`state`: the Explore state; the knobs are its session's)."""

    def __init__(self, **params):
        super().__init__(**params)
        p, e = self.state.session.param, self.state.param
        # scrubbing (state/run.py SCRUB_ENV): the value while dragging; otherwise on release only
        w = {name: cls.from_param(p[name], throttled=not self.state.scrub, sizing_mode="stretch_width")
             for name, cls in SLIDERS.items()}
        for name in EXACT:  # a box beside the slider takes the exact number
            w[f"{name}_exact"] = pn.widgets.IntInput.from_param(p[name], name="", width=72, align="end")
        for knob in schema.sidebar_knobs():
            if knob.widget != "slider":
                number = pn.widgets.IntInput if knob.type is int else pn.widgets.FloatInput
                cls = pn.widgets.Select if knob.choices else number
                w[knob.name] = cls.from_param(p[knob.name], sizing_mode="stretch_width")
        w["checkpoint"] = pn.widgets.Select.from_param(p.checkpoint, sizing_mode="stretch_width")
        w["template"] = pn.widgets.TextAreaInput.from_param(
            p.template, placeholder="e.g. ROMEO:  or  To be█████that is  or  To [___] or not", height=90,
            sizing_mode="stretch_width", css_classes=["template-editor"])
        w["fit_length"] = pn.widgets.Button.from_param(p.fit_length, sizing_mode="stretch_width")
        w["run"] = pn.widgets.Button.from_param(e.run, color="primary", sizing_mode="stretch_width")
        w["stop"] = pn.widgets.Button.from_param(e.stop, color="warning", sizing_mode="stretch_width")
        w["new_seed"] = pn.widgets.Button.from_param(e.new_seed, sizing_mode="stretch_width")
        w["auto_run"] = checkbox(e.auto_run)
        w["presentation"] = checkbox(p.presentation)
        w["chat"] = checkbox(p.chat)
        for name, widget in w.items():
            widget.css_classes = [*widget.css_classes, f"knob-{name.replace('_', '-')}"]  # for browser tests
            if name not in SLIDERS:  # (sliders keep Panel's debounce: ui/internals.no_debounce)
                no_debounce(widget)
            else:  # a drag back to a value the server has since changed must still reach it
                sync_throttled(widget)
        self.widgets = w
        self.notice = notice("danger", css_classes=["error-notice"], name="notice")
        self._show_error()
        self._running()
        self._fonts()
        self._kind()
        self.on(self.state.session, "model_info", self._kind)
        self.on(self.state.session, "error", self._show_error)
        self.on(self.state.session, "presentation", self._fonts)

    def _show_error(self):
        show_notice(self.notice, self.state.session.error)  # escaped (?checkpoint=<img onerror=...>)

    @param.depends("state.running", watch=True)
    def _running(self):
        self.widgets["run"].loading = False  # the button stays clickable: a click supersedes the run
        self.widgets["stop"].disabled = not self.state.running

    def _kind(self):
        """Disable the knobs the loaded model's sampler does not read (schema: Knob.kinds, Knob.processes)
        or the model cannot take (Knob.needs: a feature model_info says it lacks), and offer only the
        choices it takes (Knob.offers)."""
        info = self.state.session.model_info
        kind, process = info.get("kind"), info.get("process", "masked")
        for knob in schema.sidebar_knobs():
            unused = (kind is not None and kind not in knob.kinds
                      or kind == "diffusion" and process not in knob.processes
                      or kind is not None and knob.unmet(info))
            self.widgets[knob.name].disabled = unused
            if knob.name in EXACT:
                self.widgets[f"{knob.name}_exact"].disabled = unused
            if knob.offers is not None:  # the choices this model takes (code may take the prefix cache only)
                self.widgets[knob.name].options = list(knob.choices if unused else knob.allowed(info))

    def _fonts(self):
        for widget in self.widgets.values():
            widget_type_size(widget, self.state.session.presentation)

    def __panel__(self):
        w = self.widgets
        return pn.Column(
            w["checkpoint"], pn.Row(w["run"], w["stop"], sizing_mode="stretch_width"),
            pn.Row(w["seed"], pn.Column(w["new_seed"], align="end"), sizing_mode="stretch_width"), w["auto_run"],
            w["template"], w["fit_length"], self.notice, *(pn.Row(w[k], w[f"{k}_exact"], sizing_mode="stretch_width") for k in EXACT),
            *(w[k] for k in in_order(k for k in KNOBS if not k.real_model)),
            pn.Card(w["chat"], *(w[k] for k in in_order(k for k in KNOBS if k.real_model)),
                    title="Chat, guidance & decoding rules", collapsed=True,
                    sizing_mode="stretch_width", css_classes=["real-model-knobs"]),
            w["presentation"], sizing_mode="stretch_width")
