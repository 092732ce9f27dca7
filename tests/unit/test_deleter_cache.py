"""The deleter's table-state cache on a real table (docs/design.md §4.3, PIP-186's ``ledgersCache``):
answers come from the cached snapshot until it expires, an intent naming an instant newer
than the snapshot forces a refresh first, and those forced refreshes are rate-limited."""

from __future__ import annotations

from pathlib import Path

from manual_clock import ManualClock
from table_files import FS, abort, complete

from hudi_sink.services.deleter.table_state import TableStateCache
from hudi_sink.shared.hudi.table import HudiTable

C1, P, C2, FUTURE = "20250101000000001", "20250101000000002", "20250101000000003", "20250101000000009"


async def test_the_cached_snapshot_answers_until_it_expires(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    table = HudiTable(FS, base)
    complete(table, C1, "aaaa-1")
    table.start_instant(P)
    clock = ManualClock()
    cache = TableStateCache(FS, 600, clock=clock, min_refresh_interval_s=1)

    first = await cache.get(base, [P])
    assert cache.loads == 1 and P in first.pending
    abort(table, P)  # an instant the snapshot already knows: no staleness guard
    clock.now = 599.9
    cached = await cache.get(base, [P])
    assert cached is first and cache.loads == 1, "reloaded before the expiry"
    assert P in cached.pending
    clock.now = 600.0
    fresh = await cache.get(base, [P])
    assert cache.loads == 2
    assert P in fresh.rolled_back and P not in fresh.pending


async def test_an_instant_newer_than_the_snapshot_forces_a_rate_limited_refresh(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    table = HudiTable(FS, base)
    complete(table, C1, "aaaa-1")
    clock = ManualClock()
    cache = TableStateCache(FS, 600, clock=clock, min_refresh_interval_s=1)
    first = await cache.get(base)
    assert first.latest_instant == C1 and cache.loads == 1

    listed = complete(table, C2, "bbbb-1")
    clock.now = 10.0
    assert await cache.get(base, [C1]) is first, "a known instant must not reload"
    fresh = await cache.get(base, [C2])
    assert cache.loads == 2 and C2 in fresh.completed and fresh.is_listed(listed)

    # A flood of intents naming an instant nobody started costs one listing per interval.
    clock.now = 10.5
    assert await cache.get(base, [FUTURE]) is fresh and cache.loads == 2
    clock.now = 11.0
    await cache.get(base, [FUTURE])
    assert cache.loads == 3


async def test_refresh_honours_its_maximum_age(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    complete(HudiTable(FS, base), C1, "aaaa-1")
    clock = ManualClock()
    cache = TableStateCache(FS, 600, clock=clock, min_refresh_interval_s=1)
    snap = await cache.refresh(base)
    assert await cache.refresh(base) is snap  # younger than the re-check interval
    assert await cache.refresh(base, max_age_s=0.0) is not snap  # the orphan scan's demand
    assert cache.loads == 2
