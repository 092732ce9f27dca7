"""S3 behaviours at the edges, made to happen on the wire by a proxy in front of moto's S3
server (``s3_server.S3Proxy``), so the code sees them through its real client:

- a conditional create answered ``409 ConditionalRequestConflict`` (another conditional write
  of the key in flight) is retried and decided by the key's content, never read as fenced;
- a create whose reply was lost after it landed reads 412 on its retry: decided by content;
- CopyObject refuses a source over 5 GiB: a rename of a larger object copies it in parts; a
  copy that comes out the wrong size is deleted, so a retry copies again;
- ``table.base_path`` with an empty segment (``a//b``) is refused, naming the key and the
  spelling to use: services and ``hudi-sink config check`` exit 2; one trailing ``/`` is
  dropped (warned once), as configs spelled so ran before.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from s3_server import DROP, MotoS3, ProxiedRequest, Reply, S3Proxy, s3_error

from hudi_sink.cli.main import main
from hudi_sink.shared.config.settings import load_config
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.storage import object_store
from hudi_sink.shared.storage.backend import check_base_path, filesystem_for
from hudi_sink.shared.storage.object_store import COPY_LIMIT, ObjectStoreFileSystem, StorageError

CONFLICT = s3_error(409, "ConditionalRequestConflict", "A conflicting conditional operation is "
                    "currently in progress against this resource. Please try again.")
MiB = 1024 * 1024


class Script:
    """The proxy's intercept: answers of a test's choosing for conditional PUTs of keys
    containing ``marker`` (one per call, in order; then everything is forwarded), and a
    record of every request's method, path and notable headers."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.answers: list[object] = []
        self.seen: list[tuple[str, str, str | None, str | None]] = []
        self._lock = threading.Lock()

    def __call__(self, request: ProxiedRequest) -> Reply | str | None:
        with self._lock:
            self.seen.append((request.method, request.path, request.header("if-none-match"),
                              request.header("x-amz-copy-source")))
            conditional = request.method == "PUT" and request.header("if-none-match") == "*"
            if not (conditional and self.marker in request.path and self.answers):
                return None
            answer = self.answers.pop(0)
        return answer(request) if callable(answer) else answer  # type: ignore[return-value]

    def creates(self) -> int:
        return sum(1 for m, p, inm, _ in self.seen if m == "PUT" and inm == "*" and self.marker in p)


@pytest.fixture
def proxied(moto_s3: MotoS3, s3_bucket: str) -> Iterator[tuple[ObjectStoreFileSystem, Script, str]]:
    """(filesystem through the proxy, its script, table base) on a fresh bucket."""
    script = Script("/log/")
    proxy = S3Proxy(moto_s3.endpoint, script).start()
    base = f"s3://{s3_bucket}/warehouse/orders"
    try:
        yield ObjectStoreFileSystem(base, moto_s3.storage_options(proxy.endpoint)), script, base
    finally:
        proxy.stop()


def test_a_409_with_nothing_behind_it_is_retried_and_the_create_wins(
        proxied: tuple[ObjectStoreFileSystem, Script, str], moto_s3: MotoS3, s3_bucket: str) -> None:
    fs, script, base = proxied
    script.answers = [CONFLICT, CONFLICT]  # the rival's in-flight write failed
    assert fs.create_exclusive(f"{base}/log/000001.json", b"ours") is True
    assert script.creates() == 3
    assert fs.read_bytes(f"{base}/log/000001.json") == b"ours"
    assert not fs.create_exclusive(f"{base}/log/000001.json", b"later")  # still the fence


def test_a_409_while_a_rival_create_lands_loses_by_content(
        proxied: tuple[ObjectStoreFileSystem, Script, str]) -> None:
    fs, script, base = proxied

    def rival_lands_then_conflict(request: ProxiedRequest) -> Reply:
        status, _, _ = request.forward(request.method, request.path, request.headers, b"rival")
        assert status == 200
        return CONFLICT

    script.answers = [rival_lands_then_conflict]
    assert fs.create_exclusive(f"{base}/log/000002.json", b"ours") is False
    assert fs.read_bytes(f"{base}/log/000002.json") == b"rival"


def test_a_409_that_never_clears_is_an_error_not_a_lost_race(
        proxied: tuple[ObjectStoreFileSystem, Script, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fs, script, base = proxied
    monkeypatch.setattr(object_store, "CREATE_ATTEMPTS", 3)
    script.answers = [CONFLICT] * 3
    with pytest.raises(StorageError, match="409"):
        fs.create_exclusive(f"{base}/log/000003.json", b"ours")
    assert script.creates() == 3 and not fs.exists(f"{base}/log/000003.json")


def test_a_create_whose_reply_was_lost_is_decided_by_content(
        proxied: tuple[ObjectStoreFileSystem, Script, str]) -> None:
    """The PUT lands, its reply never comes; the client's retry is answered 412."""
    fs, script, base = proxied

    def land_then_drop(request: ProxiedRequest) -> str:
        request.forward()
        return DROP

    script.answers = [land_then_drop]
    assert fs.create_exclusive(f"{base}/log/000004.json", b"ours") is True
    assert script.creates() == 2
    script.answers = [land_then_drop]  # a rival's create would not be ours: lost
    assert fs.create_exclusive(f"{base}/log/000004.json", b"theirs") is False
    assert fs.read_bytes(f"{base}/log/000004.json") == b"ours"


def refuse_large_copies(limit: int, upstream: S3Proxy | None = None) -> object:
    """S3's answer to a CopyObject whose source exceeds ``limit`` (S3's own is 5 GiB)."""

    def intercept(request: ProxiedRequest) -> Reply | None:
        source = request.header("x-amz-copy-source")
        if request.method != "PUT" or source is None:
            return None
        status, headers, _ = request.forward("HEAD", "/" + source.lstrip("/"),
                                             {k: v for k, v in request.headers.items()
                                              if k.lower() != "x-amz-copy-source"}, None)
        size = int(dict((k.lower(), v) for k, v in headers)["content-length"])
        if status == 200 and size > limit:
            return s3_error(400, "InvalidRequest", "The specified copy source is larger than "
                            f"the maximum allowable size for a copy source: {limit}")
        return None

    return intercept


def test_rename_of_an_object_over_the_copy_limit_copies_in_parts(
        moto_s3: MotoS3, s3_bucket: str) -> None:
    limit = 1 * MiB
    seen: list[str | None] = []
    refuse = refuse_large_copies(limit)

    def intercept(request: ProxiedRequest) -> Reply | None:
        seen.append(request.header("x-amz-copy-source"))
        return refuse(request)  # type: ignore[operator,no-any-return]

    proxy = S3Proxy(moto_s3.endpoint, intercept).start()
    try:
        base = f"s3://{s3_bucket}/warehouse/orders"
        fs = ObjectStoreFileSystem(base, moto_s3.storage_options(proxy.endpoint), copy_limit=limit)
        large = bytes(range(256)) * (12 * MiB // 256) + b"tail"
        fs.write_atomic(f"{base}/.hoodie/.temp/T/de/big.parquet", large)
        fs.rename(f"{base}/.hoodie/.temp/T/de/big.parquet", f"{base}/de/big.parquet")
        assert fs.read_bytes(f"{base}/de/big.parquet") == large
        assert not fs.exists(f"{base}/.hoodie/.temp/T/de/big.parquet")
        assert not [s for s in seen if s and "big.parquet" in s]  # no CopyObject was tried
        head = moto_s3.client().head_object(Bucket=s3_bucket, Key="warehouse/orders/de/big.parquet")
        assert head["ETag"].strip('"').endswith("-2")  # a multipart upload: 8 MiB + the rest

        fs.write_atomic(f"{base}/small", b"x" * 100)  # under the limit: one server-side COPY
        fs.rename(f"{base}/small", f"{base}/moved")
        assert fs.read_bytes(f"{base}/moved") == b"x" * 100
        assert [s for s in seen if s and s.endswith("/small")]
    finally:
        proxy.stop()


def test_a_copy_in_parts_that_fails_leaves_no_target_and_is_retried(
        moto_s3: MotoS3, s3_bucket: str) -> None:
    """The store refuses to complete the multipart upload once: nothing appears at the
    target (no partial object a retry would take for a finished copy), the source stays,
    and the retried rename finishes the move."""
    refusals = [s3_error(403, "AccessDenied", "Access Denied")]

    def intercept(request: ProxiedRequest) -> Reply | None:
        completing = request.method == "POST" and "uploadId=" in request.path
        return refusals.pop() if completing and refusals else None

    proxy = S3Proxy(moto_s3.endpoint, intercept).start()
    try:
        base = f"s3://{s3_bucket}/t"
        fs = ObjectStoreFileSystem(base, moto_s3.storage_options(proxy.endpoint), copy_limit=1 * MiB)
        data = b"p" * (9 * MiB)
        fs.write_atomic(f"{base}/src", data)
        with pytest.raises(StorageError):
            fs.rename(f"{base}/src", f"{base}/dst")
        assert moto_s3.keys(s3_bucket) == ["t/src"] and not refusals
        fs.rename(f"{base}/src", f"{base}/dst")
        assert moto_s3.keys(s3_bucket) == ["t/dst"] and fs.read_bytes(f"{base}/dst") == data
    finally:
        proxy.stop()


def test_a_copy_in_parts_that_comes_out_short_is_removed_and_retried(
        moto_s3: MotoS3, s3_bucket: str) -> None:
    """The GET of the source ends early without an error (a proxy cutting the body, with a
    Content-Length to match): the upload completes, short. The wrong-size target is deleted
    (its name is this move's alone), so the retried rename copies again; the old code left
    it, and every retry met it as FileExistsError, which blocked the roll-forward for good."""
    cuts = [True]

    def intercept(request: ProxiedRequest) -> Reply | None:
        if request.method != "GET" or not request.path.split("?")[0].endswith("/src") or not cuts:
            return None
        cuts.pop()
        status, headers, body = request.forward()
        return status, [(k, v) for k, v in headers if k.lower() != "content-length"], body[:len(body) // 2]

    proxy = S3Proxy(moto_s3.endpoint, intercept).start()
    try:
        base = f"s3://{s3_bucket}/t"
        fs = ObjectStoreFileSystem(base, moto_s3.storage_options(proxy.endpoint), copy_limit=1 * MiB)
        data = bytes(range(256)) * (9 * MiB // 256)
        fs.write_atomic(f"{base}/src", data)
        with pytest.raises(StorageError, match="not 9437184"):
            fs.rename(f"{base}/src", f"{base}/dst")
        assert not cuts and moto_s3.keys(s3_bucket) == ["t/src"]  # the old code: t/dst too
        fs.rename(f"{base}/src", f"{base}/dst")
        assert moto_s3.keys(s3_bucket) == ["t/dst"] and fs.read_bytes(f"{base}/dst") == data
    finally:
        proxy.stop()


def test_the_default_copy_limit_is_s3s_5_gib(moto_s3: MotoS3) -> None:
    assert COPY_LIMIT == 5 * 1024**3
    assert ObjectStoreFileSystem("s3://b/t", moto_s3.storage_options()).copy_limit == COPY_LIMIT


@pytest.mark.parametrize(("base_path", "suggested"), [
    ("s3://bucket/warehouse//orders", "s3://bucket/warehouse/orders"),
    ("s3://bucket//orders", "s3://bucket/orders"),
    ("s3://bucket/warehouse/orders//", "s3://bucket/warehouse/orders"),
    ("s3://bucket//", "s3://bucket"),
    ("./warehouse//orders", "./warehouse/orders"),
    ("/data/warehouse/orders//", "/data/warehouse/orders"),
    ("file:///data//orders", "file:///data/orders"),
])
def test_a_base_path_with_an_empty_segment_is_refused(base_path: str, suggested: str) -> None:
    with pytest.raises(ConfigError, match="empty path segment") as caught:
        filesystem_for(base_path)
    assert caught.value.key == "table.base_path" and repr(suggested) in str(caught.value)


@pytest.mark.parametrize(("base_path", "canonical"), [
    ("s3://once/warehouse/orders/", "s3://once/warehouse/orders"),  # spellings of this test
    ("s3://once/", "s3://once"),                                       # only: warned once per
    ("/once/warehouse/orders/", "/once/warehouse/orders"),             # process
    ("file:///once/orders/", "file:///once/orders"),
    ("/", "/"),
])
def test_one_trailing_slash_is_dropped_with_a_warning_once(
        base_path: str, canonical: str, caplog: pytest.LogCaptureFixture) -> None:
    """Configs spelled so ran before the check refused them (an upgrade stopped every
    service): the trailing '/' is only a spelling of the same table."""
    assert check_base_path(base_path) == canonical == check_base_path(base_path)
    warned = [r for r in caplog.records if "trailing '/' dropped" in r.getMessage()]
    assert len(warned) == (base_path != canonical)


def test_the_loader_and_config_check_see_the_canonical_base_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "sink.yaml"
    sink = {"name": "slashes", "kafka": {"bootstrap_servers": "127.0.0.1:9", "topics": ["orders"]}}
    config.write_text(yaml.safe_dump({**sink, "table": {"base_path": "s3://bucket/warehouse/orders/"}}))
    assert load_config(config, environ={}).table.base_path == "s3://bucket/warehouse/orders"
    assert main(["config", "check", "--config", str(config)]) == 0
    assert 'base_path: "s3://bucket/warehouse/orders"  # file' in capsys.readouterr().out
    config.write_text(yaml.safe_dump({**sink, "table": {"base_path": "s3://bucket/warehouse//orders"}}))
    assert main(["config", "check", "--config", str(config)]) == 2  # the old code: 0 (valid)
    error = capsys.readouterr().err
    assert "table.base_path" in error and "'s3://bucket/warehouse/orders'" in error


def test_canonical_base_paths_are_accepted(moto_s3: MotoS3, tmp_path: Path) -> None:
    for good in (str(tmp_path / "t"), f"file://{tmp_path}/t", "relative/t", "/"):
        filesystem_for(good)
    filesystem_for("s3://bucket/warehouse/orders", moto_s3.storage_options())
    filesystem_for("s3://bucket", moto_s3.storage_options())


def test_keys_never_hold_an_empty_segment(moto_s3: MotoS3, s3_bucket: str) -> None:
    base = f"s3://{s3_bucket}/warehouse/orders"
    fs = ObjectStoreFileSystem(base, moto_s3.storage_options())
    fs.write_atomic(f"{base}//de///a.parquet", b"1")
    fs.write_atomic(f"{base}/de/b.parquet/", b"2")
    assert moto_s3.keys(s3_bucket) == ["warehouse/orders/de/a.parquet", "warehouse/orders/de/b.parquet"]
    assert [i.name for i in fs.list_dir(f"{base}/de")] == ["a.parquet", "b.parquet"]


def test_a_service_exits_2_on_a_base_path_with_an_empty_segment(
        tmp_path: Path, moto_s3: MotoS3, s3_bucket: str, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "sink.yaml"
    config.write_text(yaml.safe_dump({
        "name": "slashes",
        "kafka": {"bootstrap_servers": "127.0.0.1:9", "topics": ["orders"]},
        "table": {"base_path": f"s3://{s3_bucket}/warehouse//orders",
                  "storage_options": moto_s3.storage_options()},
        "admin": {"host": "127.0.0.1", "port": 0, "allow_unauthenticated": True},
    }))
    assert main(["coordinator", "--config", str(config), "--admin-port", "0"]) == 2
    error = capsys.readouterr().err
    assert "table.base_path" in error and f"write 's3://{s3_bucket}/warehouse/orders'" in error
    assert moto_s3.keys(s3_bucket) == []  # nothing written under either spelling
