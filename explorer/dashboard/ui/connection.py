"""What an open page does when it loses its server (a crash, a restart, a network cut).

Panel turns Bokeh's own connection notices off and does not reconnect (the document's config:
notify_connection_status and reconnect_session are False), so a page whose server died kept its last
status ("waiting for the device …") as if it were still working. A page cannot simply reconnect: a
restarted server has none of its sessions, and Bokeh re-attaching the old page to a new session would
leave the browser's models and the server's out of step. So the page says the connection is lost,
asks the server every POLL_MS whether it answers again, and then offers a reload: the link in the
URL bar carries the knobs and the tab (urlstate.py), so the reloaded page shows the same view.
"""
from __future__ import annotations

from bokeh.models import CustomJS

NOTICE_CLASS = "connection-notice"  # the banner; its reload button is `connection-reload`
POLL_MS = 2000
LOST_TEXT = "Connection to the server lost: this page no longer updates. Waiting for the server to come back …"
BACK_TEXT = "The server is back. Reload the page to go on (the link keeps your settings)."

# Bokeh sends connection_lost with the document as `cb_obj`. Text only through textContent: nothing
# here renders as markup. HEAD of the page itself: any answer under 500 means a server listens again
# (Bokeh answers 405 to HEAD, without building a session as a GET would); a proxy in front answers
# 502-504 while the server behind it is down, so those mean "not yet".
_LOST_JS = """
if (window.mdlmConnectionLost) { return }  // once per page
window.mdlmConnectionLost = true
const bar = document.createElement("div")
bar.className = NOTICE_CLASS
bar.setAttribute("role", "alert")
bar.style.cssText = "position: fixed; top: 0; left: 0; right: 0; z-index: 10000; padding: 10px 16px; " +
  "background: #b3261e; color: white; font: 16px/1.4 sans-serif; text-align: center; " +
  "box-shadow: 0 2px 6px rgba(0, 0, 0, 0.3)"
const text = document.createElement("span")
text.textContent = LOST_TEXT
bar.appendChild(text)
document.body.appendChild(bar)
const back = () => {
  bar.style.background = "#1e6b34"
  text.textContent = BACK_TEXT + " "
  const button = document.createElement("button")
  button.className = "connection-reload"
  button.textContent = "Reload"
  button.style.cssText = "margin-left: 8px; font: inherit; padding: 2px 12px; cursor: pointer"
  button.addEventListener("click", () => window.location.reload())
  bar.appendChild(button)
}
const probe = () => fetch(window.location.href, {method: "HEAD", cache: "no-store"}).then(
  (response) => response.status < 500 ? back() : setTimeout(probe, POLL_MS),
  () => setTimeout(probe, POLL_MS))
setTimeout(probe, POLL_MS)
"""


def watch_connection(doc) -> None:
    """Give the served page of `doc` the lost-connection banner (module docstring): shown when its
    websocket closes, then a reload button once the server answers again."""
    doc.js_on_event("connection_lost", CustomJS(code=_LOST_JS, args={
        "NOTICE_CLASS": NOTICE_CLASS, "POLL_MS": POLL_MS, "LOST_TEXT": LOST_TEXT, "BACK_TEXT": BACK_TEXT}))
