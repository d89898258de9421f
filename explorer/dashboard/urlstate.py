"""Shareable links: the knobs and the active tab live in the URL query, so opening a link reproduces
the view (same checkpoint, seed and knobs => the same trajectory).

Keys: the sidebar's knobs by name (`steps=8&strategy=margin`), `tab=Inspect`, each tab's
`URL_PARAMS` as `<tab>.<param>` (`inspect.t=0.3`), and `lesson=<slug>&figure=<n>` (lessons.py), which open
lesson mode and stay in the link. A link is untrusted input: every value is parsed
by its parameter's type and checked against its bounds / choices (param's own validation); an
unknown key or a bad value is never applied, and all of them are named in one notice. Values that
depend on the model (length <= context, top-k < vocabulary, the template's alphabet) are checked again
once it is loaded, before the first run. The URL is rewritten as knobs change, with only the values
that differ from the defaults (plus checkpoint and seed), so links stay short.
"""
from __future__ import annotations

import logging
import math
import re
from urllib.parse import urlencode

import param

from ..names import SCHEDULE_ALIASES
from .lessons import LESSONS
from .session import KNOBS, start_canvas
from .ui.internals import validate

log = logging.getLogger(__name__)

# The session knobs a link carries: the sampler's and the type size. The Explore tab's URL_PARAMS
# (confidence view, quality sweep) go unprefixed too, as they always have; other tabs' as <tab>.<param>.
URL_KNOBS = (*KNOBS, "presentation")
UNPREFIXED_TAB = "Explore"
ALWAYS = ("checkpoint", "seed")  # written even at their defaults: a link should not depend on the server's
HANDLED_ELSEWHERE = ("checkpoint",)  # read by app.served_args (only names in checkpoints/ are opened)
LESSON_KEYS = ("lesson", "figure")  # lesson mode (UrlState._lesson_problems): the lesson and figure a link opens
# knobs whose bounds are the model's (its context, its vocabulary): before a model without a preview (a listed
# Hugging Face model) is loaded, their bounds are the defaults', and a length of 1,000 on a 4,096-token model
# must wait for the model to be judged
MODEL_BOUNDED = ("length", "block_length", "top_k")
MAX_CHARS = 2000  # a longer value is an accident or an attack, not a setting
TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
_INT = re.compile(r"[+-]?\d+")


def query_args(session_args) -> dict[str, str]:
    """{key: value} from pn.state.session_args ({key: [bytes, ...]}): the last value of each key wins,
    bytes that are not UTF-8 become U+FFFD (so they match nothing) instead of raising."""
    out = {}
    for key, values in (session_args or {}).items():
        key = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
        if values:
            value = values[-1]
            out[key] = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    return out


def _number(text: str, integer: bool):
    text = text.strip()
    if integer:
        if not _INT.fullmatch(text):
            raise ValueError(f"{text!r} is not a whole number")
        return int(text)
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


def _choice(p, text: str):
    """The object of a Selector whose text form is `text` (objects may be numbers); a schedule's older
    name (links saved before it was renamed) reads as its current one."""
    if p.name in ("schedule", "schedules"):  # the sidebar's knob, the Sweep tab's list
        text = SCHEDULE_ALIASES.get(text, text)
    for obj in p.objects:
        if str(obj) == text or (isinstance(obj, float) and _same_float(obj, text)):
            return obj
    shown = ", ".join(map(str, p.objects))
    raise ValueError(f"{text!r} is not one of: {shown}")


def _same_float(obj: float, text: str) -> bool:
    try:
        return float(text) == obj
    except ValueError:
        return False


def parse_value(p: param.Parameter, text: str):
    """The value `text` stands for as parameter `p` (ValueError with a readable reason if it does not,
    including param's own check of bounds, choices and types)."""
    if len(text) > MAX_CHARS:
        raise ValueError(f"longer than {MAX_CHARS} characters")
    if isinstance(p, param.Boolean):
        low = text.strip().lower()
        if low not in TRUE + FALSE:
            raise ValueError(f"{text!r} is not true or false")
        value = low in TRUE
    elif isinstance(p, param.Integer):
        value = _number(text, integer=True)
    elif isinstance(p, param.Number):
        value = _number(text, integer=False)
    elif isinstance(p, param.ListSelector):
        value = [_choice(p, item.strip()) for item in text.split(",") if item.strip()]
    elif isinstance(p, param.Selector):
        value = _choice(p, text)
    elif isinstance(p, param.String):
        value = text
    else:
        raise ValueError("cannot be set from a link")
    _check(p, value)
    return value


def _check(p: param.Parameter, value) -> None:
    """param's validation (bounds, objects, types), its message made shorter for a notice."""
    bounds = getattr(p, "bounds", None)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and bounds is not None:
        lo, hi = bounds
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ValueError(f"{value} is outside {_range(lo, hi)}")
    try:
        validate(p, value)
    except (ValueError, TypeError) as e:
        raise ValueError(re.sub(r"\w+ parameter '[\w.]+' ", "", str(e))) from None


def _range(lo, hi) -> str:
    if lo is None:
        return f"the range up to {hi}"
    return f"the range from {lo}" if hi is None else f"the range {lo} to {hi}"


def format_value(p: param.Parameter, value) -> str:
    """The text a link carries for `value` (parse_value's inverse)."""
    if isinstance(p, param.Boolean):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(format_value(p, v) for v in value)
    if isinstance(value, float):
        return repr(value)  # the shortest text that reads back as the same float
    return str(value)


class UrlState(param.Parameterized):
    """The link of one session: reads a query into the session's knobs (`apply`, then `check_model`
    once the model is loaded), and says what the current URL should be (`query`, `search`).

    `tab` is the active tab's title (app.py links it with the page's Tabs); `notice` names every
    value of the link that was not applied, and why ('' = all applied)."""

    tab = param.String("Explore", doc="Title of the active tab")
    # plain text quoting the link (anyone's text): shown only in a notice, which never reads it as markup
    notice = param.String("", doc="What the link asked for that was not applied ('' = nothing), plain text")
    lesson = param.String("", doc="The slug of the lesson the link opens ('' = no lesson mode), a valid one only")
    figure = param.Integer(0, bounds=(0, None), doc="The lesson's figure the link opens (1-based; 0 = the lesson "
                                                    "without a figure)")

    def __init__(self, state, titles=("Explore",), **params):
        super().__init__(**params)
        self.state, self.titles = state, list(titles)
        self._pending: dict[str, str] = {}  # model-dependent values waiting for the model
        self._problems: list[str] = []

    # ------------------------------------------------------------------ where each key goes

    def targets(self) -> dict:
        """key -> (parameterized, parameter name) for every key a link may carry."""
        out = {name: (self.state, name) for name in URL_KNOBS}
        for title, tab in self.state.tabs.items():
            for name in getattr(tab, "URL_PARAMS", ()):
                if name in tab.param:
                    out[name if title == UNPREFIXED_TAB else f"{title.lower()}.{name}"] = (tab, name)
        return out

    def _title(self, text: str) -> str:
        match = [t for t in self.titles if t.lower() == text.strip().lower()]
        if not match:
            raise ValueError(f"{text!r} is not a tab ({', '.join(self.titles)})")
        return match[0]

    # ------------------------------------------------------------------ link -> session

    def apply(self, args: dict[str, str]) -> None:
        """Apply every valid value of the link (before the model is loaded); model-dependent ones are
        kept for `check_model` too. Invalid ones are named in `notice`, never applied."""
        targets, problems = self.targets(), self._lesson_problems(args)
        for key, text in args.items():
            if key in HANDLED_ELSEWHERE or key in LESSON_KEYS:
                continue
            try:
                if key == "tab":
                    self.tab = self._title(text)
                elif key not in targets:
                    raise ValueError(self._why_unknown(key))
                else:
                    self._set(targets[key], text)
                    if targets[key][0] is self.state and key in KNOBS:
                        self._pending[key] = text  # again once loaded: over the model's own defaults
            except ValueError as e:
                if self._waits_for_model(key, text):
                    self._pending[key] = text  # judged by check_model against the model's own bounds
                else:
                    problems.append(f"{_shown(key)}={_shown(text)} ({e})")
        self._problems = problems
        self._say()

    def _waits_for_model(self, key: str, text: str) -> bool:
        """Whether a refused value is a whole number for a knob whose bounds no model has set yet: the
        model's load checks it (check_model), as it checks every knob of the link again."""
        if key not in MODEL_BOUNDED or self.state.knobs_model() is not None or len(text) > 20:
            return False
        try:
            _number(text, integer=True)
        except ValueError:
            return False
        return True

    def _lesson_problems(self, args: dict[str, str]) -> list[str]:
        """Set `lesson` and `figure` from the link when both are valid (a lesson alone: figure 0); the
        problems of those that are not, for the notice."""
        slugs = {item.slug: item for item in LESSONS}
        text, figure = args.get("lesson"), args.get("figure")
        self.lesson, self.figure = "", 0
        if text is None:
            return [] if figure is None else [f"figure={_shown(figure)} (a figure needs a lesson=)"]
        if text not in slugs:
            why = f"lesson={_shown(text)} (not a lesson: {', '.join(slugs)})"
            return [why] + ([] if figure is None else [f"figure={_shown(figure)} (no lesson to show it in)"])
        n = len(slugs[text].figures)
        self.lesson = text
        if figure is None:
            return []
        try:
            index = _number(figure, integer=True) if len(figure) <= 12 else -1
        except ValueError as e:
            return [f"figure={_shown(figure)} ({e})"]
        if not 1 <= index <= n:
            return [f"figure={_shown(figure)} (not a figure of {text}: 1 to {n})"]
        self.figure = index
        return []

    def _why_unknown(self, key: str) -> str:
        tab = key.split(".", 1)[0] if "." in key else None
        if tab is not None and tab not in (t.lower() for t in self.state.tabs):
            return f"no tab {tab!r} here"
        known = key in self.state.param or any(key in t.param for t in self.state.tabs.values())
        return "not a setting a link can carry" if tab or known else "unknown setting"

    def _set(self, target, text: str) -> None:
        obj, name = target
        value = parse_value(obj.param[name], text)
        check = getattr(obj, "check_link_value", None)
        if check is not None:  # a tab's own reading of a value (Compare's columns: the sidebar's bounds)
            check(name, value)
        old = getattr(obj, name)
        setattr(obj, name, value)
        if obj is self.state and name in KNOBS:  # knobs that are valid alone may clash (threshold + remask)
            try:
                self.state.sampler_config()
            except ValueError as e:
                setattr(obj, name, old)
                raise ValueError(str(e)) from None

    def check_model(self, model) -> None:
        """Once the model is loaded (state.load_hooks, before the first run): apply the link's knobs
        again, over the model's recommended ones, and check the length, block length, top-k and
        template against this model (its context, vocabulary and alphabet). One-shot: a later
        checkpoint switch resets them as usual."""
        pending, self._pending = self._pending, {}
        for key, text in pending.items():
            try:
                value = parse_value(self.state.param[key], text)
                if key == "template" and value.strip():
                    start_canvas(model, value.strip(), self.state.length, self.state.seed)
                setattr(self.state, key, value)
            except ValueError as e:
                setattr(self.state, key, self._model_default(key, model))
                self._problems.append(f"{key}={_shown(text)} (not for {self.state.model_info.get('name', 'this model')}"
                                      f": {e})")
        self._say()

    def hook(self, model) -> None:
        """For state.load_hooks: check the link against the first model loaded, then step aside."""
        if self.hook in self.state.load_hooks:
            self.state.load_hooks.remove(self.hook)
        self.check_model(model)

    def _model_default(self, key: str, model):
        fallback = model.config.block_size if key == "length" else self.state.param[key].default
        return self.state.recommended_knobs(model).get(key, fallback)

    def _say(self) -> None:
        self.notice = ("Not applied from the link: " + "; ".join(self._problems)) if self._problems else ""

    # ------------------------------------------------------------------ session -> link

    def _default(self, obj, name: str):
        # a loaded model starts at its context and its knobs; before its load, its checkpoint's metadata says them
        model = self.state.knobs_model()
        if obj is self.state and name in KNOBS and model is not None:
            return self._model_default(name, model)
        chosen = obj.url_default(name) if hasattr(obj, "url_default") else None
        # a value the tab chose for the loaded model (Compare's and Sweep's for a uniform-state model): the
        # same model chooses it again when the link is opened, so the link need not carry it
        return obj.param[name].default if chosen is None else chosen

    def query(self) -> dict[str, str]:
        """The link's query: checkpoint and seed, then every value that differs from its default."""
        out = {}
        if self.state.checkpoint:
            out["checkpoint"] = self.state.checkpoint
        if self.tab != self.titles[0]:
            out["tab"] = self.tab
        for key, (obj, name) in self.targets().items():
            if hasattr(obj, "url_carries") and not obj.url_carries(name):
                continue
            value = getattr(obj, name)
            if key in ALWAYS or value != self._default(obj, name):
                out[key] = format_value(obj.param[name], value)
        if self.lesson:  # the page stays in lesson mode: a reload or a copied link shows the same bar
            out["lesson"] = self.lesson
            if self.figure:
                out["figure"] = str(self.figure)
        return out

    def departed(self, query: str) -> list[str]:
        """The keys of a link's `query` (a lesson figure's, without '?') whose values the page no longer
        shows: the checkpoint, the tab or a knob someone changed since. Keys the page does not carry, or
        whose text reads as no value, are not counted (the link's notice named them when it opened)."""
        from urllib.parse import parse_qsl

        now, targets, out = {"checkpoint": self.state.checkpoint, "tab": self.tab}, self.targets(), []
        for key, text in parse_qsl(query):
            if key in now:
                same = (now[key] or "").lower() == text.lower()
            elif key in targets:
                obj, name = targets[key]
                try:
                    same = getattr(obj, name) == parse_value(obj.param[name], text)
                except ValueError:
                    continue
            else:
                continue
            if not same:
                out.append(key)
        return out

    def search(self) -> str:
        """`?key=value&...` for pn.state.location.search (percent-encoded: █ and spaces are safe)."""
        query = self.query()
        return "?" + urlencode(query) if query else ""

    def watch(self, callback) -> None:
        """Call `callback()` whenever a value the link carries changes (to rewrite the URL)."""
        by_obj: dict = {}
        for obj, name in self.targets().values():
            by_obj.setdefault(id(obj), (obj, []))[1].append(name)
        for obj, names in by_obj.values():
            obj.param.watch(lambda *events: callback(), names)
        self.state.param.watch(lambda *events: callback(), ["checkpoint", "model_info"])
        self.param.watch(lambda *events: callback(), ["tab"])


def _shown(text: str, limit: int = 40) -> str:
    """A value as the notice shows it: short, on one line."""
    text = text.replace("\n", "↵")
    return text if len(text) <= limit else text[:limit] + "…"
