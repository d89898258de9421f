"""The sidebar: the session's checkpoint and knobs and Explore's run buttons, every widget made from a
parameter (its doc is the hover help)."""
from __future__ import annotations


import panel as pn
import param

from ...ui.base import StateView, checkbox, notice, show_notice, widget_type_size
from ...ui.internals import no_debounce

SLIDERS = {"steps": pn.widgets.IntSlider, "temperature": pn.widgets.FloatSlider,
           "top_p": pn.widgets.FloatSlider, "top_k": pn.widgets.IntSlider, "threshold": pn.widgets.FloatSlider,
           "remask": pn.widgets.FloatSlider, "length": pn.widgets.IntSlider, "cfg_scale": pn.widgets.FloatSlider,
           "alg_temp": pn.widgets.FloatSlider, "factor": pn.widgets.FloatSlider}
# Sliders with a number box beside them, for an exact value (issue 15: the steps slider is 1-256)
EXACT = ("length", "steps")
# The knobs real diffusion LMs use (issue 16), in a card of their own: closed until wanted
REAL_MODEL_KNOBS = ("cfg_scale", "suppress_eos", "alg_temp", "factor")
# Knobs only the diffusion sampler reads: disabled while a causal (AR) model is loaded (issue 15, defect 4)
DIFFUSION_ONLY = ("steps", "strategy", "schedule", "block_length", "threshold", "remask", *REAL_MODEL_KNOBS)


class ControlsView(StateView):
    """Checkpoint, sampler knobs, template editor with its notice, run / stop / seed buttons
    (`state`: the Explore state; the knobs are its session's)."""

    def __init__(self, **params):
        super().__init__(**params)
        p, e = self.state.session.param, self.state.param
        w = {name: cls.from_param(p[name], throttled=True, sizing_mode="stretch_width")
             for name, cls in SLIDERS.items()}
        for name in EXACT:  # a linear 1-256 slider is hard to stop on 64: a box beside it takes the number
            w[f"{name}_exact"] = pn.widgets.IntInput.from_param(p[name], name="", width=72, align="end")
        w["checkpoint"] = pn.widgets.Select.from_param(p.checkpoint, sizing_mode="stretch_width")
        w["strategy"] = pn.widgets.Select.from_param(p.strategy, sizing_mode="stretch_width")
        w["schedule"] = pn.widgets.Select.from_param(p.schedule, sizing_mode="stretch_width")
        w["suppress_eos"] = pn.widgets.Select.from_param(p.suppress_eos, sizing_mode="stretch_width")
        w["block_length"] = pn.widgets.IntInput.from_param(p.block_length, sizing_mode="stretch_width")
        w["seed"] = pn.widgets.IntInput.from_param(p.seed, sizing_mode="stretch_width")
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
        causal = self.state.session.model_info.get("kind") == "ar"
        for name in DIFFUSION_ONLY:
            self.widgets[name].disabled = causal
            if name in EXACT:
                self.widgets[f"{name}_exact"].disabled = causal

    def _fonts(self):
        for widget in self.widgets.values():
            widget_type_size(widget, self.state.session.presentation)

    def __panel__(self):
        w = self.widgets
        return pn.Column(
            w["checkpoint"], pn.Row(w["run"], w["stop"], sizing_mode="stretch_width"),
            pn.Row(w["seed"], pn.Column(w["new_seed"], align="end"), sizing_mode="stretch_width"), w["auto_run"],
            w["template"], w["fit_length"], self.notice, *(pn.Row(w[k], w[f"{k}_exact"], sizing_mode="stretch_width") for k in EXACT),
            w["strategy"], w["schedule"],
            w["temperature"], w["top_p"], w["top_k"], w["block_length"], w["threshold"], w["remask"],
            pn.Card(w["chat"], *(w[k] for k in REAL_MODEL_KNOBS), title="Chat, guidance & decoding rules", collapsed=True,
                    sizing_mode="stretch_width", css_classes=["real-model-knobs"]),
            w["presentation"], sizing_mode="stretch_width")
