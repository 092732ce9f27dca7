"""``hudi-sink bench --mode upsert`` without processes: the option's wiring, later versions of a
record, the update phase's arithmetic (write amplification, merge rate, produce → visible)
from commits' write stats, and the targets. The run itself: tests/integration/test_bench_command.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from hudi_sink.cli import main as cli
from hudi_sink.cli.bench import command
from hudi_sink.cli.bench.data import RecordMaker
from hudi_sink.cli.bench.steady import SteadySent
from hudi_sink.cli.bench.timeline import SeenCommit, WriteTotals
from hudi_sink.cli.bench.updates import UpdateLoad, update_result
from hudi_sink.cli.bench.upsert import UpsertBench, upsert_targets

TOPIC = "bench-keyed"


def test_mode_upsert_reaches_the_bench_with_its_sizes(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    seen: list[command.BenchOptions] = []
    monkeypatch.setattr(command, "run_bench", lambda opts: seen.append(opts) or 0)
    out = str(tmp_path / "r.json")
    assert cli.main(["bench", "--mode", "upsert", "--out", out, "--upsert-rows", "50",
                     "--update-rps", "7", "--update-seconds", "3", "--no-compare"]) == 0
    assert cli.main(["bench", "--mode", "upsert", "--out", out]) == 0
    assert cli.main(["bench", "--out", out]) == 0
    quick, full, insert = seen
    assert quick.mode == "upsert" and quick.upsert == UpsertBench(50, 7, 3, compare_insert=False)
    assert full.upsert == UpsertBench(1_000_000, 10_000, 30, compare_insert=True)
    assert insert.mode == "insert" and insert.records == 1_000_000
    assert insert.participants == (1, 2) and (insert.steady_rps, insert.steady_seconds) == (5000, 30)


@pytest.mark.parametrize("args", [["--records", "10"], ["--steady-seconds", "0"], ["--stages"]])
def test_insert_modes_options_are_refused_in_upsert_mode(args: list[str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["bench", "--mode", "upsert", "--out", "r.json", *args])
    assert exited.value.code == 2
    assert args[0] in capsys.readouterr().err


def test_a_later_version_keeps_the_key_and_orders_after_every_first_version() -> None:
    maker = RecordMaker(512, "seed")
    first = orjson.loads(maker.value(999_999))
    later = [orjson.loads(maker.value(3, version=v)) for v in (1, 2)]
    assert maker.key(3) == b"seed-0000000003" == later[0]["id"].encode()
    assert later[0]["country"] == orjson.loads(maker.value(3))["country"]
    assert first["ts"] < later[0]["ts"] < later[1]["ts"]  # ISO text of one width sorts by time
    assert later[0]["payload"] != later[1]["payload"]
    assert abs(len(maker.value(3, version=10**6)) - 512) <= 2


def test_write_totals_count_rewritten_bytes_only_over_an_old_slice() -> None:
    totals = WriteTotals.of([
        {"numWrites": 100, "numUpdateWrites": 10, "numInserts": 0, "fileSizeInBytes": 4000,
         "prevCommit": "20260101000000000"},
        {"numWrites": 20, "numInserts": 20, "fileSizeInBytes": 900, "prevCommit": "null"},
        {"numWrites": 5, "numDeletes": 2, "fileSizeInBytes": 100},  # another writer's sparse stat
    ])
    assert totals == WriteTotals(rows=125, updates=10, inserts=20, deletes=2, bytes=5000,
                                 rewritten_bytes=4000)


def _commit(instant: str, mtime: float, offsets: dict[int, int], rows: int = 0,
            rewritten: int = 0) -> SeenCommit:
    return SeenCommit(instant, mtime, {TOPIC: offsets}, (),
                      WriteTotals(rows=rows, updates=rows // 10, bytes=rewritten,
                                  rewritten_bytes=rewritten))


def test_the_update_phase_numbers_come_from_its_own_commits() -> None:
    backlog = _commit("1", 50.0, {0: 10, 1: 10}, rows=20)
    phase = [_commit("2", 104.0, {0: 12, 1: 11}, rows=2000, rewritten=30 * 2**20),
             _commit("3", 110.0, {0: 14, 1: 12}, rows=2000, rewritten=30 * 2**20)]
    # four updates: offsets 10, 11, 12, 13 of partition 0 and 10, 11 of partition 1
    sent = SteadySent({0: [10, 11, 12, 13], 1: [10, 11]},
                      {0: [100.0, 101.0, 102.0, 103.0], 1: [100.5, 101.5]}, seconds=4.0)
    load = UpdateLoad(rps=2, seconds=3, rows=1000, seed="s")
    result = update_result(load, sent, 100.0, TOPIC, phase, [backlog, *phase], [3.0, 5.0])
    assert result.records == 6 and result.sent_rps == 1.5 and result.uncovered == 0
    assert result.commits == 2 and result.seconds == 10.0
    assert result.rows_written == 4000 and result.write_amplification == round(4000 / 6, 2)
    assert result.merge_mb_per_s == 6.0  # 60 MiB over old slices in 10 s of phase
    assert result.bytes_written == result.rewritten_bytes == 60 * 2**20
    assert result.update_writes == 400 and result.inserts == 0
    # partition 0: offsets 10, 11 visible at 104, 12, 13 at 110; partition 1: 10 at 104, 11 at 110
    assert result.visible_max_s == 8.5 and result.visible_p50_s == 4.0
    assert result.commit_latencies_s == [3.0, 5.0]


def test_targets_judge_the_ratio_the_p99_and_the_rate_actually_sent() -> None:
    result = {"settings": {"interval_ms": 2000}, "upsert_vs_insert": 0.62,
              "update_latency_p99_s": 33.0, "updates": {"sent_rps": 9600.0, "target_rps": 10_000}}
    met = {name: t["met"] for name, t in upsert_targets(result).items()}
    assert list(met.values()) == [True, False, True]
    assert "interval + 30 (32 s)" in list(met)[1]
    unmeasured = upsert_targets({"settings": {"interval_ms": 2000}, "upsert_vs_insert": None,
                                 "update_latency_p99_s": None, "updates": None})
    assert [t["met"] for t in unmeasured.values()] == [None, None, None]


def test_the_upsert_bench_sizes_the_driver_heap_unless_told() -> None:
    from hudi_sink.cli.bench.upsert import with_driver_memory

    assert with_driver_memory({}) == {"spark.driver.memory": "4g"}
    assert with_driver_memory({"spark.driver.memory": "2g", "a": "b"}) == {
        "spark.driver.memory": "2g", "a": "b"}


def test_updates_are_built_before_the_phase_and_are_the_same_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Prebuilt (the defaults fit) or built while sent (over ``PREBUILT_MAX_BYTES``), update
    ``n`` is the same record; past the prebuilt ones the sequence goes on unchanged."""
    from hudi_sink.cli.bench import updates

    load = UpdateLoad(rps=100, seconds=0.5, rows=50, seed="seed")
    made: list[int] = []
    real_value = updates.RecordMaker.value

    def counted(self: Any, n: int, version: int = 0) -> bytes:
        made.append(n)
        return real_value(self, n, version)

    monkeypatch.setattr(updates.RecordMaker, "value", counted)
    prebuilt = updates.prepare_updates(load, 256)
    assert len(made) == 51  # all of the phase's updates (and one spare), before any is sent
    sent = [prebuilt(n) for n in range(60)]
    assert len(made) == 60  # only those past the prebuilt ones were built while sent
    monkeypatch.setattr(updates, "PREBUILT_MAX_BYTES", 0)
    on_the_fly = updates.prepare_updates(load, 256)
    assert sent == [on_the_fly(n) for n in range(60)]
    keys = {key for key, _, _ in sent}
    assert all(key is not None and key.startswith(b"seed-") for key in keys) and len(keys) <= 50
    stamps = [orjson.loads(value)["ts"] for _, value, _ in sent]
    assert stamps == sorted(stamps) and len(set(stamps)) == 60  # version n + 1: later ts
