"""The spine, a participant kill, bad input and an open upstream transaction on Apache Kafka
itself (KRaft 4.3.1 from Maven Central, one node for the session: ``kafka_broker``).

Everywhere else the integration tests run on the embedded development broker, which implements
only part of Kafka. These run the same tests' bodies, unchanged, against real Kafka: its group
coordinator (rebalance delays, session expiry of a SIGKILLed member), its fetch semantics (last
stable offset, transaction markers taking offsets) and its topic creation. The aborted-transaction
test (``test_read_committed.py``) and the replicated cluster (``test_kafka_replicated.py``,
long suite) are on real Kafka only.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_cluster import KafkaCluster
from test_bad_records import (
    test_bad_records_go_to_the_dlq_and_hostile_partitions_stay_inside as bad_records_to_the_dlq,
)
from test_failures import (
    test_participant_sigkill_mid_transaction_loses_and_duplicates_nothing as participant_sigkill,
)
from test_pipeline_exactly_once import (
    test_exactly_once_across_coordinator_crash as spine_across_coordinator_crash,
)
from test_read_committed import (
    test_open_transaction_is_withheld_then_committed_exactly_once as open_transaction_withheld,
)

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]


def test_spine_across_a_coordinator_crash_on_kafka(
    kafka_broker: KafkaCluster, tmp_path: Path, unique_name: str
) -> None:
    spine_across_coordinator_crash(kafka_broker, tmp_path, unique_name)


def test_participant_sigkill_mid_transaction_on_kafka(
    kafka_broker: KafkaCluster, tmp_path: Path, unique_name: str
) -> None:
    participant_sigkill(kafka_broker, tmp_path, unique_name)


def test_bad_records_go_to_the_dlq_on_kafka(
    kafka_broker: KafkaCluster, tmp_path: Path, unique_name: str
) -> None:
    bad_records_to_the_dlq(kafka_broker, tmp_path, unique_name)


def test_open_transaction_holds_back_only_its_partition_on_kafka(
    kafka_broker: KafkaCluster, tmp_path: Path, unique_name: str
) -> None:
    open_transaction_withheld(kafka_broker, tmp_path, unique_name)
