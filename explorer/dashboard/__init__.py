"""The dashboard (issue 5): a Panel app over explorer.sampling / explorer.experiments.

    from explorer.dashboard import create_app
    create_app()                     # in Jupyter: shown inline
    panel serve explorer/dashboard/app.py

Files: state.py (all knobs and results, one Parameterized), sweeps.py (quality vs steps in the
background, cached), runtime/ (threads, device queues, caches, checkpoint lookup: the only place with
process-wide state), frames.py (a run as display rows, numpy), palette.py (colours, type sizes),
views/ (one Viewer per panel), tabs/ (the tabs after Explore), app.py (layout and template).
Importing this package is cheap: Panel, Bokeh and torch load on first use.
"""


def create_app(checkpoint: str | None = None, device: str = "auto", **kwargs):
    """Build the dashboard template; see app.create_app."""
    from .app import create_app as _create

    return _create(checkpoint=checkpoint, device=device, **kwargs)


__all__ = ["create_app"]
