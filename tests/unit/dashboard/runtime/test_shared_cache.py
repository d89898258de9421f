"""The result cache every session of a server shares (runtime/cache.SharedCache)."""
from __future__ import annotations

import pytest

from explorer.dashboard.runtime.cache import SharedCache


def test_get_or_make_makes_once_and_a_failure_caches_nothing():
    cache, made = SharedCache(2), []
    assert cache.get_or_make("a", lambda: made.append("a") or 1) == 1
    assert cache.get_or_make("a", lambda: made.append("again") or 2) == 1 and made == ["a"]
    with pytest.raises(ValueError):
        cache.get_or_make("b", lambda: (_ for _ in ()).throw(ValueError("no data")))
    assert cache.get("b") is None
    assert cache.get_or_make("b", lambda: 3) == 3


def test_the_least_recently_used_entry_goes_first():
    cache = SharedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")  # used: "b" is now the oldest
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    cache.clear()
    assert cache.get("a") is None
