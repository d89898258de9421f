"""Panel's write queue as the dashboard mends it (ui/internals.mend_panel_write_queue): patches queued
while an earlier batch finishes are still sent, in order."""
from __future__ import annotations


def test_patches_queued_while_an_earlier_batch_finishes_are_still_sent():
    """Panel's write queue (ui/internals.mend_panel_write_queue): a sending task that finishes drops its
    document's write flag even when another batch was queued meanwhile, and that batch's task then
    returned without sending it. Seen under load as a page that kept "sampling …" after its run had
    ended. Here the queue is left in that state, and the batch must still go out, in order."""
    import asyncio

    from bokeh.document import Document
    from panel.io import document as panel_document

    from explorer.dashboard.ui.internals import mend_panel_write_queue

    mend_panel_write_queue()
    sent = []

    class Socket:  # a socket type Panel hands to a registered writer
        pass

    class Connection:
        _socket = Socket()

    panel_document.extra_socket_handlers[Socket] = lambda conn, msg=None: sent.append(msg) or []
    doc = Document()

    async def stranded():
        panel_document._WRITE_MSGS[doc] = {Connection(): ["first", "second"]}  # queued, flag dropped
        await panel_document._dispatch_msgs(doc)
        for _ in range(50):
            if sent:
                break
            await asyncio.sleep(0.01)

    try:
        asyncio.run(stranded())
    finally:
        del panel_document.extra_socket_handlers[Socket]
        panel_document._WRITE_MSGS.pop(doc, None)
        panel_document._WRITE_BLOCK.pop(doc, None)
    assert sent == ["first", "second"]
