"""What every tab's state shares: the browser session (session.Session) it reads the model, device,
sampler knobs and dispatcher from, the knobs it puts in the URL, and hooks for model changes and for
being shown."""
from __future__ import annotations

import param


class TabState(param.Parameterized):
    """One tab's knobs and results. `session` is the browser session (model, device, dispatch,
    sampler knobs); the tab never loads models or samples on the UI thread itself."""

    URL_PARAMS: tuple[str, ...] = ()  # knobs the URL carries, as <tab>.<param>=value

    def __init__(self, session, **params):
        super().__init__(**params)
        self.session = session
        session.param.watch(lambda *events: self.on_model_changed(), "model_info")

    def url_carries(self, name: str) -> bool:
        """Whether the link carries URL_PARAMS' `name` now (a knob may only matter in some states)."""
        return True

    def on_model_changed(self) -> None:
        """Called (on the UI thread) when the session's model changes; override to reset results."""

    def on_shown(self) -> None:
        """Called (on the UI thread) when the tab is on screen with a model loaded: when it is
        clicked, when a link opens on it, and after a model change while it is shown. A tab whose
        view is a computed result starts it here if it has none, so a shared link reproduces it."""

    def on_hidden(self) -> None:
        """Called (on the UI thread) when another tab takes the screen, and at the start for every tab a link
        does not open on; a tab may leave work that only its view shows until its next on_shown."""

    def close(self) -> None:
        """Cancel this tab's background work (its browser tab closed)."""
