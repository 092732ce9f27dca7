"""The fence on an S3 API server: a zombie coordinator's COMMIT is refused by the store's
create-only PUT, its successor rolls the instant back and commits its own, a decided commit
interrupted before ``<T>.commit`` is rolled forward (moves finished by copy + delete), and
hudi-rs reads exactly the committed rows from ``s3://`` through the same storage options."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiReadOptions, HudiTableBuilder
from s3_server import MotoS3

from hudi_sink.cli.main import main
from hudi_sink.cli.table_cmd import read_rows, table_history, table_summary
from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.disposal import DirectDisposal
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.errors import FencedError
from hudi_sink.shared.hudi.naming import base_file_name, new_file_id, partition_path, write_token
from hudi_sink.shared.hudi.offsets import KAFKA_COMMIT_OFFSETS_KEY, format_offsets
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat, build_commit_metadata
from hudi_sink.shared.storage.object_store import ObjectStoreFileSystem

DDL = "id STRING, country STRING, amount DOUBLE"
T1, T2 = "20250101000000001", "20250101000000002"


class S3Table:
    def __init__(self, server: MotoS3, bucket: str) -> None:
        self.server = server
        self.base = f"s3://{bucket}/warehouse/orders"
        self.fs = ObjectStoreFileSystem(self.base, server.storage_options())
        self.config = TableConfig(base_path=self.base, name="orders", partition_field="country",
                                  schema=DDL)
        self.schema = self.config.table_schema()
        HudiTable(self.fs, self.base).initialize(self.config, self.schema)

    def committer(self, name: str) -> TableCommitter:
        """A separate coordinator: its own FileSystem and table objects."""
        fs = ObjectStoreFileSystem(self.base, self.server.storage_options())
        committer = TableCommitter(fs, HudiTable(fs, self.base), DirectDisposal(fs))
        committer.claim_epoch({"id": name})
        return committer

    def stage(self, instant: str, ids: list[str]) -> tuple[tuple[str, str], dict[str, object]]:
        """One base file uploaded into the instant's staging; (move, commit metadata)."""
        part = partition_path("NL", "country", False)
        fid = new_file_id()
        name = base_file_name(fid, write_token(0, 0, 1), instant)
        n = len(ids)
        data = pa.Table.from_arrays([
            pa.array([instant] * n), pa.array([f"{instant}_0_{i}" for i in range(n)]),
            pa.array(ids), pa.array([part] * n), pa.array([name] * n), pa.array(ids),
            pa.array(["NL"] * n), pa.array([float(i) for i in range(n)], pa.float64()),
        ], schema=self.schema.file_arrow_schema)
        buffer = io.BytesIO()
        pq.write_table(data, buffer)
        table = HudiTable(self.fs, self.base)
        self.fs.write_atomic(table.staging_path(instant, part, name), buffer.getvalue())
        staged = f".hoodie/.temp/{instant}/{part}/{name}"
        final = f"{part}/{name}"
        size = len(buffer.getvalue())
        extra = {"schema": self.schema.avro_schema_json(),
                 KAFKA_COMMIT_OFFSETS_KEY: format_offsets({("orders", 0): n}, ["orders"])}
        metadata = build_commit_metadata([WriteStat(fid, final, part, n, n, size, size)], extra)
        return (staged, final), metadata

    def read_ids(self) -> list[str]:
        table = HudiTableBuilder.from_base_uri(self.base).with_storage_options(
            self.server.storage_options()).build()
        batches = table.read(HudiReadOptions())
        return sorted(pa.Table.from_batches(batches).column("id").to_pylist()) if batches else []


@pytest.fixture
def s3_table(moto_s3: MotoS3, s3_bucket: str) -> S3Table:
    return S3Table(moto_s3, s3_bucket)


def test_a_zombie_commit_is_refused_by_the_store(s3_table: S3Table) -> None:
    zombie = s3_table.committer("zombie")
    zombie.start(T1)
    move, metadata = s3_table.stage(T1, ["a", "b"])
    successor = s3_table.committer("successor")  # claims the next epoch: the zombie is fenced
    with pytest.raises(FencedError):
        zombie.commit(T1, metadata, [move])
    assert successor.recover().rolled_back == [T1]
    successor.start(T2)
    move2, metadata2 = s3_table.stage(T2, ["c"])
    successor.commit(T2, metadata2, [move2])
    assert s3_table.read_ids() == ["c"]
    assert HudiTable(s3_table.fs, s3_table.base).completed_commits() == [T2]
    # What an operator sees: hudi-sink table show|history|read on the s3:// path.
    options = s3_table.server.storage_options()
    summary = table_summary(s3_table.base, options=options)
    assert (summary["commits"], summary["total_records"], summary["latest_commit"]) == (1, 1, T2)
    assert [(h["commit_time"], h["state"]) for h in table_history(s3_table.base, options)] == [
        (T2, "committed"), (T1, "rolled_back")]
    assert read_rows(s3_table.base, options=options).column("id").to_pylist() == ["c"]
    args = [f"--storage-option={k}={v}" for k, v in options.items()]
    assert main(["table", "read", "--path", s3_table.base, "--json", *args]) == 0
    assert main(["table", "show", "--path", s3_table.base, "--storage-option", "nonsense"]) == 2


def test_a_decided_commit_is_rolled_forward_by_the_successor(
        s3_table: S3Table, monkeypatch: pytest.MonkeyPatch) -> None:
    crashed = s3_table.committer("crashed")
    crashed.start(T1)
    move, metadata = s3_table.stage(T1, ["a", "b", "c"])

    def crash(*_args: object) -> None:
        raise SystemExit("killed after the COMMIT decision")

    # The decision is in the log, then the process dies before placing any file.
    monkeypatch.setattr(crashed, "_place", crash)
    with pytest.raises(SystemExit):
        crashed.commit(T1, metadata, [move])
    monkeypatch.undo()
    assert s3_table.read_ids() == []
    successor = s3_table.committer("successor")
    assert successor.recover().rolled_forward == [T1]
    assert s3_table.read_ids() == ["a", "b", "c"]
    assert not s3_table.fs.exists(f"{s3_table.base}/{move[0]}")  # moved: copied, then deleted
