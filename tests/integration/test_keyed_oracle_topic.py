"""The upsert oracle's broker side (``keyed_oracle``) on what ``hudi-sink produce --key-space``
sends: the topic's end offsets are right although the embedded broker's ListOffsets is not
after multi-record batches, ``read_topic`` stops exactly at the offsets it is given, and
``fold_topic`` keeps each key's last record in its partition and drops tombstoned keys, with
no record misplaced for murmur2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import yaml
from keyed_oracle import end_offsets, fold_topic, read_topic
from upsert_oracle import Spec, fold

HUDI_SINK = str(Path(sys.executable).with_name("hudi-sink"))


def test_the_oracle_reads_and_folds_a_keyed_topic(broker: Any, tmp_path: Path, unique_name: str) -> None:
    records, partitions, topic = 1500, 3, f"{unique_name}-data"
    config = tmp_path / "sink.yaml"
    config.write_text(yaml.safe_dump({
        "name": unique_name,
        "kafka": {"bootstrap_servers": broker.bootstrap, "topics": [topic], "startup_timeout_s": 30},
        "table": {"base_path": str(tmp_path / "table"), "name": unique_name, "record_key_field": "id",
                  "partition_field": "country", "schema": "id STRING, country STRING, amount DOUBLE"},
    }))
    result = subprocess.run(
        [HUDI_SINK, "produce", "--config", str(config), "--records", str(records), "--partitions",
         str(partitions), "--key-space", "60", "--delete-ratio", "0.2"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr

    ends = end_offsets(broker.bootstrap, topic)
    assert len(ends) == partitions and sum(ends.values()) == records
    everything = read_topic(broker.bootstrap, topic, ends)
    assert sorted((r.partition, r.offset) for r in everything) == [
        (p, o) for p in range(partitions) for o in range(ends[p])]

    upto = {0: ends[0] // 2, 2: 1}
    part = read_topic(broker.bootstrap, topic, upto)
    assert sorted((r.partition, r.offset) for r in part) == [
        *((0, o) for o in range(ends[0] // 2)), (2, 0)]

    # The plainest reading of a keyed topic without precombine: the last record of each key.
    last: dict[str, Any] = {}
    for record in sorted(everything, key=lambda r: (r.partition, r.offset)):
        assert record.key is not None
        last[record.key.decode()] = record
    live = {key: r for key, r in last.items() if r.value is not None}
    winners = fold_topic(broker.bootstrap, topic, ends)
    assert {k: (w.partition, w.offset) for k, w in winners.items()} == {
        k: (r.partition, r.offset) for k, r in live.items()}
    assert all(w.row == orjson.loads(live[k].value) and w.row["id"] == k for k, w in winners.items())
    assert 0 < len(winners) < len(last) <= 60

    checked = fold(everything, Spec(partitions=partitions))
    assert checked.rejected == [] and checked.winners == winners
    assert len(checked.deletes) + len(checked.absent_deletes) == sum(r.value is None for r in everything)
