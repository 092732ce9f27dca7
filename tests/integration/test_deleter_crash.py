"""A deleter SIGKILLed after deleting and before committing its offsets, and in the middle of
a batch (``deleter_victim.py`` halts the real service at that point; the test kills it there).
Every intent is redelivered to the next deleter: the files already gone count as success,
the rest are deleted, the live file listed by a completed commit survives both processes
(two forged intents name it), and the group's offsets end up covering every intent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from deleter_harness import T1, T2, Table, committed_offsets, deleter, sink_config
from eventually import eventually_async

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.shared.deletion.intent import DeletionReason, PendingDelete
from hudi_sink.shared.deletion.sender import IntentSender
from hudi_sink.shared.kafka.connection import producer_options
from hudi_sink.shared.kafka.sink_topics import ensure_sink_topics

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[2]
VICTIM = Path(__file__).resolve().parent / "deleter_victim.py"
DEAD_FILES = 40
MID_BATCH_DELETES = 5


@pytest.mark.parametrize("mode", ["after-delete", f"mid-batch:{MID_BATCH_DELETES}"])
async def test_deleter_killed_before_committing_redelivers_harmlessly(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str, mode: str
) -> None:
    base = tmp_path / "t"
    config = sink_config(broker, unique_name, base)
    table = Table(config)
    live = table.commit(T1)
    table.hudi.start_instant(T2)
    dead = [table.staged(T2, f"{i:04d}-1") for i in range(DEAD_FILES)]
    table.abort(T2)
    now = time.time()
    intents = [PendingDelete(table_path=table.base, file_path=path, reason=DeletionReason.ABORTED_INSTANT,
                             killing_instant=T2, not_before=now) for path in dead]
    intents += [  # forged: the live file, whatever the intent claims, must survive
        PendingDelete(table_path=table.base, file_path=live, reason=DeletionReason.UNCOMMITTED_FILE,
                      killing_instant=T1, not_before=now),
        PendingDelete(table_path=table.base, file_path=live, reason=DeletionReason.ABORTED_INSTANT,
                      killing_instant=T2, not_before=now),
    ]
    await ensure_sink_topics(config)
    producer = AIOKafkaProducer(**producer_options(config.kafka, "test-intents"))
    await producer.start()
    try:
        await IntentSender(producer, config.deletion_topic).send_intents(intents)
    finally:
        await producer.stop()

    config_path, marker = tmp_path / "config.json", tmp_path / "halted.json"
    config_path.write_text(config.model_dump_json(by_alias=True))
    log_path = tmp_path / "victim.log"
    with log_path.open("wb") as log:
        victim = subprocess.Popen(
            [sys.executable, str(VICTIM), str(config_path), mode, str(marker)],
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
            # the repository and tests/ (the harness's helpers), as pytest's rootdir sees them
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")]),
                 "PYTHONUNBUFFERED": "1"},
        )
    try:
        async def halted() -> bool:
            assert victim.poll() is None, f"victim exited:\n{log_path.read_text()}"
            return marker.exists()

        try:
            await eventually_async(halted, 90, "the victim deleter to reach its halt")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{log_path.read_text()}") from None
    finally:
        victim.kill()
        victim.wait(timeout=30)

    report = json.loads(marker.read_text())
    gone = [path for path in dead if not os.path.exists(path)]
    assert sorted(report["deleted"]) == sorted(gone)
    if mode == "after-delete":
        assert report["at"] == "commit" and gone, "nothing was deleted before the commit"
    else:
        assert report["at"] == "delete" and len(gone) == MID_BATCH_DELETES
    assert sum(await committed_offsets(config, config.deletion_topic)) == 0, "offsets were committed"
    assert os.path.exists(live)

    async with deleter(broker, unique_name, base, config=config) as (h, _):
        await h.wait_committed(config.deletion_topic, len(intents), timeout_s=60)
        stats = await h.stats()
    assert not any(os.path.exists(path) for path in dead), "a dead file was left behind"
    assert os.path.exists(live), "a live file was deleted"
    # Each file is unlinked once in all: what the victim deleted comes back as "already gone"
    # (more of those if the group rebalanced once more while the dead member was expelled).
    assert stats["deleted"] == DEAD_FILES - len(gone)
    assert stats["missing_already"] >= len(gone)
    assert stats["kept_in_use"] >= 2 and stats["retried"] == 0 and stats["dlq"] == 0
    assert not os.path.exists(table.hudi.staging_dir(T2))
