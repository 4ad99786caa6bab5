"""VolumeCache: last seen state of log dirs missing from a successful observation."""

from kvq.model.volume import LogDirDescription, Volume
from kvq.model.volume_cache import VolumeCache


def test_observed_volumes_pass_through():
    cache = VolumeCache(validity_seconds=120)
    merge = cache.merge(0, [LogDirDescription(1, "/a", 100, 50)])
    assert merge.volumes == (Volume(1, "/a", 100, 50),)
    assert (merge.cached, merge.evicted) == ((), ())


def test_missing_log_dir_is_judged_from_cache_until_as_old_as_the_validity():
    cache = VolumeCache(validity_seconds=120)
    cache.merge(0, [LogDirDescription(1, "/a", 100, 50), LogDirDescription(2, "/a", 100, 1)])
    at_60 = cache.merge(60, [LogDirDescription(1, "/a", 100, 50)])
    assert [c.volume for c in at_60.cached] == [Volume(2, "/a", 100, 1)]
    at_119 = cache.merge(119.999, [LogDirDescription(1, "/a", 100, 50)])  # just before: kept
    assert len(at_119.cached) == 1 and at_119.evicted == ()
    at_120 = cache.merge(120, [LogDirDescription(1, "/a", 100, 50)])  # at the validity: evicted
    assert at_120.cached == ()
    assert [e.volume.key for e in at_120.evicted] == [(2, "/a")]
    assert cache.merge(200, [LogDirDescription(1, "/a", 100, 50)]).evicted == ()  # counted once


def test_cached_state_is_refreshed_when_the_log_dir_comes_back():
    cache = VolumeCache(validity_seconds=10)
    cache.merge(0, [LogDirDescription(2, "/a", 100, 1)])
    cache.merge(5, [LogDirDescription(2, "/a", 100, 90)])
    merge = cache.merge(14, [])
    assert [(c.volume.available_bytes, c.seen_at) for c in merge.cached] == [(90, 5)]


def test_log_dir_described_as_unusable_replaces_its_cached_state_without_eviction():
    cache = VolumeCache(validity_seconds=10)
    cache.merge(0, [LogDirDescription(2, "/a", 100, 1)])
    merge = cache.merge(1, [LogDirDescription(2, "/a", 100, 1, error_code=56)])
    assert (merge.volumes, merge.cached, merge.evicted) == ((), (), ())
    assert len(cache) == 0
