"""A bounded, thread-safe result cache shared by every session of a server process (least recently
used entries go first), for results that cost model calls; and the process's named caches, so every
cache of the dashboard is here (runtime/ is the only place with process-wide state)."""
from __future__ import annotations

import threading
from collections import OrderedDict


class SharedCache:
    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        """The cached value, or None."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        return None

    def get_or_make(self, key, make):
        """The cached value for `key`, else `make()`, cached. `make` runs outside the lock: two sessions
        missing the same key at once may both make it (the results are the same); an exception from
        `make` caches nothing.

        Returns: the value."""
        value = self.get(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value

    def put(self, key, value) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every entry (benchmarks measure a server's first session with it)."""
        with self._lock:
            self._items.clear()


class ModelCache:
    """Loaded models by (name, device, version), one load per key: a session asking for a model that
    another session is loading waits for it and gets the same object. A newer version of a name on a
    device (a checkpoint saved again by a training) replaces the older one."""

    def __init__(self):
        self._items: dict[tuple, object] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple, load):
        """The model of `key` ((name, device, version)), calling `load()` if it is not loaded yet."""
        with self._lock:  # held while loading: the first caller loads, the others wait for it
            model = self._items.get(key)
            if model is None:
                for old in [k for k in self._items if k[:2] == key[:2]]:
                    del self._items[old]  # an older save of the same checkpoint
                model = self._items[key] = load()
        return model


def model_key(model) -> tuple:
    """Identifies a loaded model in cache keys: a re-saved checkpoint is a new object
    (dashboard/checkpoints.load keys on the file's mtime), so its results are never mixed with the old one's."""
    return (str(getattr(model, "path", "")), id(model))


SWEEPS = SharedCache(64)  # quality sweeps (Explore's quality vs steps, the Sweep tab): key -> (table, summary)
INSPECT = SharedCache(256)  # Inspect's predictions and curves: (kind, model key, ...) -> result
MEAN_CONFIDENCE = SharedCache(64)  # (model key, t, length): mean_confidence.mean_confidence_table
MODELS = ModelCache()  # every loaded checkpoint and listed model (dashboard/checkpoints.load)
HELD_OUT = SharedCache(256)  # a checkpoint's held-out tokens, reference scores and corpus preview
CARDS = SharedCache(128)  # (path, mtime, size): a checkpoint's metadata, config and tokenizer (checkpoints.card)
# The Hugging Face models the operator listed (`serve --models`) and their options (hf.HFOptions),
# set once when the server starts: sessions may open these besides checkpoints/.
LISTED_MODELS: dict = {"options": None}
SWEEP_RATES: dict = {}  # checkpoint name -> measured seconds per token per model call (cost estimates)
TRAINING_NAMES: set[str] = set()  # checkpoint names being trained right now by any session of this process
TRAINING_LOCK = threading.Lock()
