"""A throttled sidebar slider still reaches the session after the server moved its knob (ui/internals.py,
sync_throttled): the browser kept the value its last drag ended on, so a drag ending there again sent
nothing, and the slider showed one step count while the runs used another."""
from __future__ import annotations

from tests.support.browser import open_page, wait_until


def drag_to_the_end(page, knob: str) -> None:
    """Drag the slider's handle past its right end (its largest value), as a mouse does: one release."""
    handle = page.locator(f".knob-{knob} .noUi-handle").first
    track = page.locator(f".knob-{knob} .noUi-base").first.bounding_box()
    box = handle.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(track["x"] + track["width"] + 40, box["y"] + box["height"] / 2, steps=8)
    page.mouse.up()


def test_a_drag_back_to_a_value_the_server_changed_reaches_the_session(browser, served):
    url, states = served
    page, problems = open_page(browser, url)
    wait_until(lambda: states and states[-1].tabs["Explore"].trajectory is not None)
    session, top = states[-1], states[-1].param.steps.bounds[1]
    drag_to_the_end(page, "steps")
    wait_until(lambda: session.steps == top, 60)
    box = page.locator(".knob-steps-exact input").first
    # the box shows the dragged value first: typed into before the server's update reached it, the
    # update would overwrite what was typed (a person reads the box before typing)
    wait_until(lambda: box.input_value() == str(top), 60)
    box.fill("8")  # the number box moves the knob on the server, not the slider's last drag
    box.press("Enter")
    wait_until(lambda: session.steps == 8, 60)
    # the handle shows 8 before the user drags again (a drag that starts while the server's value is still
    # on its way would begin at the end, and a busy server can take seconds to send it)
    handle = page.locator(".knob-steps .noUi-handle").first
    wait_until(lambda: float(handle.get_attribute("aria-valuenow") or "nan") == 8, 60)
    drag_to_the_end(page, "steps")  # where the last drag ended: the browser had nothing new to send
    wait_until(lambda: session.steps == top, 60)
    ran = lambda: getattr(session.tabs["Explore"].trajectory, "config", None)  # noqa: E731 (None while a run starts)
    wait_until(lambda: ran() is not None and ran().steps == top, 60)  # and it ran there
    assert not problems, problems
    page.close()
