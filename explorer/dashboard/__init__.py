"""The dashboard: a Panel app over explorer.sampling and explorer.experiments, one session per browser tab.

    from explorer.dashboard import create_app
    create_app()                     # in Jupyter: shown inline
    panel serve explorer/dashboard/app.py

Layout: session.py (one browser session: model, device, sampler knobs), tabs/<tab>/ (each tab's
state without Panel, its view.py, and the TabSpec pairing them), ui/ (palette, the one heatmap figure,
shared views), runtime/ (the only place with threads or process-wide state: dispatcher, background
tasks bound to a device, device queues, caches), checkpoints.py and mean_confidence.py (what is
loaded and measured, kept in runtime's caches), frames.py (a run as display rows and their cell
states, numpy), urlstate.py (shareable links), app.py (layout and template). tests/unit/test_layering.py
keeps it so.
Importing this package is cheap: Panel, Bokeh and torch load on first use.
"""


def create_app(checkpoint: str | None = None, device: str = "auto", **kwargs):
    """The whole dashboard as one Panel template, for a notebook, a script or `panel serve`.

    Args:
        checkpoint: a name in checkpoints/ (default: shakespeare where present) or a listed Hugging
            Face model.
        device: "auto" (the GPU when there is one), "cpu" or "cuda".
        **kwargs: app.create_app's keywords (fallback, state, autoload).
    Returns:
        A pn.template.BootstrapTemplate; `.explorer_state` is its Session (the knobs and tabs a script
        drives), `.url_state` its link.
    Example:
        >>> from explorer.dashboard import create_app
        >>> app = create_app("patterns", device="cpu")  # in Jupyter, the cell's value shows it inline
        >>> app.explorer_state.steps = 8                # a knob set from code, as the slider sets it
    """
    from .app import create_app as _create

    return _create(checkpoint=checkpoint, device=device, **kwargs)


__all__ = ["create_app"]
