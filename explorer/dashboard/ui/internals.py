"""The few places the dashboard touches private Panel, param or Bokeh internals, each saying why.

Kept together so an upgrade of Panel, param or Bokeh has one file to check (the tests exercise each).
"""
from __future__ import annotations

import functools


def no_debounce(widget) -> None:
    """Handle a widget's browser changes at once. Panel waits 50 ms (Syncable._debounce) before
    handling a change from the browser, to merge bursts. Selects, inputs and buttons send one change
    per edit, and the wait is a third of the 150 ms knob-to-rows budget. (Sliders keep it: arrow keys
    send a burst, and unmerged it races the values echoed back to the slider.)"""
    widget._debounce = 0


def validate(parameter, value) -> None:
    """param's own check of a value against a Parameter (types, bounds, objects), raising ValueError
    or TypeError, without setting it: a shared link's values are checked before any is applied.
    param has no public call for this (Parameter._validate)."""
    parameter._validate(value)


def session_document():
    """The Bokeh document of the Panel session being built now, or None. Panel's context variable
    (pn.state._curdoc), not pn.state.curdoc: that falls back to Bokeh's process-wide current
    document, which a server running in another thread of this process leaves set."""
    import panel as pn

    return pn.state._curdoc.get()


@functools.lru_cache(maxsize=1)
def quiet_file_download():
    """pn.widgets.FileDownload that ignores a callback's None (a failure: the button says why)
    instead of raising (FileDownload._sync_data); made once, on first use, so importing the
    downloads module does not import Panel."""
    import panel as pn

    class FileDownload(pn.widgets.FileDownload):
        def _sync_data(self, fileobj):
            if fileobj is not None:
                super()._sync_data(fileobj)

    return FileDownload
