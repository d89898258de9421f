"""The dashboard's runtime: the only place that starts threads or holds process-wide state (the
dispatcher, background tasks bound to a device, the device queues, every cache: loaded models among them).

It keeps things and decides nothing about data: what to load or measure is decided above it
(dashboard/checkpoints.py, dashboard/mean_confidence.py), and it imports none of the data, metrics or
experiment code (tests/unit/test_layering.py checks)."""
