"""A bounded, thread-safe result cache shared by every session of a server process (least recently
used entries go first), for results that cost model calls: sweeps, Inspect's curves and predictions."""
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

    def put(self, key, value) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
