"""The dashboard's runtime: the only place that starts threads or holds process-wide state (the
dispatcher, background tasks bound to a device, the device queues, every cache, checkpoint lookup)."""
