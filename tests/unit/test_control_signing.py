"""Signed control messages: sign and verify (``shared.kafka.signing``), the keys' sources and
their checks (``shared.config.signing_keys``), and what the control channel hands to the
protocol (``decode_control_records``): forgeries never, counted and logged, rate-limited."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from manual_clock import ManualClock
from prometheus_client import generate_latest

from hudi_sink.cli.main import main
from hudi_sink.shared.config.settings import KafkaConfig, SinkConfig, config_from_mapping
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.kafka.channel import ControlChannel, decode_control_records
from hudi_sink.shared.kafka.protocol import Envelope, Role, Sender, StartCommit, encode
from hudi_sink.shared.kafka.signing import (
    SIGNATURE_HEADER,
    ControlKeys,
    Rejection,
    RejectionLog,
    control_keys,
)
from hudi_sink.shared.runtime.metrics import Metrics

OLD = "old-key-0123456789abcdef"
NEW = "new-key-0123456789abcdef"
FOREIGN = "foreign-key-0123456789ab"


def _keys(*keys: str) -> ControlKeys:
    return ControlKeys(tuple(k.encode() for k in keys))


def _start(epoch: int, *, sink: str = "orders", role: Role = Role.COORDINATOR) -> bytes:
    envelope = Envelope.wrap(StartCommit(offsets=[]), sink=sink,
                             sender=Sender(role=role, id="c1"),
                             commit_time="20260101000000000", epoch=epoch)
    return encode(envelope)


@dataclass(frozen=True)
class _Record:
    """What ``decode_control_records`` reads of an aiokafka ConsumerRecord."""

    offset: int
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


def _signed(offset: int, value: bytes, keys: ControlKeys) -> _Record:
    return _Record(offset, value, (keys.sign(value),))


# --- sign and verify -----------------------------------------------------------------------


def test_a_signed_value_verifies_and_any_change_of_it_does_not() -> None:
    keys = _keys(NEW)
    value = _start(3)
    header = keys.sign(value)
    assert header[0] == SIGNATURE_HEADER
    assert keys.verify(value, [header]) is None
    tampered = value.replace(b'"coordinator_epoch":3', b'"coordinator_epoch":9')
    assert tampered != value
    assert keys.verify(tampered, [header]) is Rejection.BAD_SIGNATURE


def test_unsigned_foreign_and_malformed_signatures_are_told_apart() -> None:
    keys = _keys(NEW)
    value = _start(1)
    assert keys.verify(value, None) is Rejection.UNSIGNED
    assert keys.verify(value, [("other", b"x")]) is Rejection.UNSIGNED
    assert keys.verify(value, [_keys(FOREIGN).sign(value)]) is Rejection.UNKNOWN_KEY
    good = keys.sign(value)
    assert keys.verify(value, [good, good]) is Rejection.BAD_SIGNATURE  # ambiguous: refused
    version, key_id, mac = good[1].split(b":")
    for bad in (b"", b"garbage", b"v2:" + key_id + b":" + mac, version + b":" + key_id + b":" + mac[:-2],
                version + b":" + key_id + b":" + bytes(reversed(mac))):
        assert keys.verify(value, [(SIGNATURE_HEADER, bad)]) is Rejection.BAD_SIGNATURE, bad


def test_rotation_signs_with_the_first_key_and_accepts_each() -> None:
    value = _start(2)
    before, during, after = _keys(OLD, NEW), _keys(NEW, OLD), _keys(NEW)
    # Step 1: the new key is accepted everywhere, the old one still signs.
    assert during.verify(value, [before.sign(value)]) is None
    # Step 2: the new key signs; a pod still at step 1 accepts it.
    assert before.verify(value, [during.sign(value)]) is None
    assert after.verify(value, [during.sign(value)]) is None
    # Step 3: the old key is gone: what it signs is refused.
    assert after.verify(value, [_keys(OLD).sign(value)]) is Rejection.UNKNOWN_KEY
    assert during.signing_key_id != before.signing_key_id


def test_keys_never_show_in_their_repr() -> None:
    text = repr(_keys(NEW, OLD))
    assert NEW not in text and OLD not in text
    assert "ControlKeys(ids=" in text


# --- where keys come from ------------------------------------------------------------------


def test_no_key_configured_means_unsigned_and_unchecked() -> None:
    assert control_keys(KafkaConfig()) is None


def test_a_key_a_list_and_a_file_with_a_trailing_newline(tmp_path: Path) -> None:
    value = _start(1)
    single = control_keys(KafkaConfig(control_signing_key=f" {NEW}\n"))
    listed = control_keys(KafkaConfig(control_signing_key=[NEW, OLD]))
    key_file = tmp_path / "key"
    key_file.write_text(f"{NEW}\n\n{OLD}\n", encoding="utf-8")
    filed = control_keys(KafkaConfig(control_signing_key_file=str(key_file)))
    assert single is not None and listed is not None and filed is not None
    header = _keys(NEW).sign(value)
    assert single.sign(value) == listed.sign(value) == filed.sign(value) == header
    assert filed.verify(value, [_keys(OLD).sign(value)]) is None


@pytest.mark.parametrize(("kafka", "key", "words"), [
    ({"control_signing_key": "short-key"}, "kafka", "shorter than 16"),
    ({"control_signing_key": [NEW, "tiny"]}, "kafka", "key #2 is shorter"),
    ({"control_signing_key": [NEW, NEW]}, "kafka", "listed twice"),
    ({"control_signing_key": []}, "kafka", "empty list"),
    ({"control_signing_key": NEW, "control_signing_key_file": "/nonexistent"}, "kafka", "not both"),
])
def test_bad_keys_fail_at_load_naming_the_key_and_never_showing_it(
        kafka: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"kafka": kafka}, environ={})
    text = str(info.value)
    assert words in text and "control_signing_key" in text
    assert NEW not in text and "short-key" not in text and "tiny" not in text


def test_the_key_file_is_read_by_the_services_that_sign_not_at_load(tmp_path: Path) -> None:
    """The deleter loads the same config but never signs: it need not see the Secret."""
    key_file = tmp_path / "key"
    config = config_from_mapping({"kafka": {"control_signing_key_file": str(key_file)}},
                                 environ={})
    with pytest.raises(ConfigError) as info:
        control_keys(config.kafka)
    assert info.value.key == "kafka.control_signing_key_file"
    assert f"cannot read {key_file} (FileNotFoundError)" in str(info.value)
    key_file.write_text("\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        control_keys(config.kafka)
    assert info.value.key == "kafka.control_signing_key_file"
    assert "holds no key" in str(info.value)
    key_file.write_text("tinykey9\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        control_keys(config.kafka)
    assert "shorter than 16" in str(info.value) and "tinykey9" not in str(info.value)


def test_a_wrongly_typed_key_is_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"kafka": {"control_signing_key": {"k": "secret-0123456789abcdef"}}},
                            environ={})
    assert "secret-0123456789abcdef" not in str(info.value)
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"kafka": {"control_signing_key": 1234567890123456789}}, environ={})
    assert "1234567890123456789" not in str(info.value)


def test_config_check_redacts_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUDI_SINK__KAFKA__CONTROL_SIGNING_KEY", f'["{NEW}", "{OLD}"]')
    path = tmp_path / "sink.yaml"
    path.write_text("name: orders\n", encoding="utf-8")
    assert main(["config", "check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert NEW not in out and OLD not in out
    assert 'control_signing_key: "<redacted>"  # env' in out


# --- what the channel hands to the protocol ------------------------------------------------


class _Counted:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def __call__(self, reason: str) -> None:
        self.reasons.append(reason)


def test_forgeries_never_reach_the_protocol_and_are_counted(caplog: pytest.LogCaptureFixture) -> None:
    keys = _keys(NEW)
    counted = _Counted()
    rejections = RejectionLog(logging.getLogger("test.signing"), counted)
    real = _start(2)
    huge = _start(2**40)
    records = [
        _signed(0, real, keys),
        _Record(1, huge),                                   # unsigned "coordinator", huge epoch
        _signed(2, huge, _keys(FOREIGN)),                   # a key we do not hold
        _Record(3, huge, (keys.sign(real),)),               # a real signature on other bytes
        _Record(4, b"not json", (keys.sign(b"not json"),)),
        _Record(5, _start(7, sink="other")),                # another sink's: not ours to judge
        _Record(6, None),
        _signed(7, _start(3, role=Role.PARTICIPANT), keys),
    ]
    with caplog.at_level(logging.WARNING, "test.signing"):
        envelopes = decode_control_records(records, "orders", keys, rejections)  # type: ignore[arg-type]
    assert [(e.coordinator_epoch, e.sender.role) for e in envelopes] == [
        (2, Role.COORDINATOR), (3, Role.PARTICIPANT)]
    assert counted.reasons == ["unsigned", "unknown_key", "bad_signature", "undecodable"]
    assert "offset 1 ignored (unsigned)" in caplog.text
    assert NEW not in caplog.text


def test_without_keys_every_decodable_record_of_the_sink_is_accepted() -> None:
    counted = _Counted()
    records = [_Record(0, _start(1)), _signed(1, _start(2), _keys(FOREIGN))]
    envelopes = decode_control_records(records, "orders", None,  # type: ignore[arg-type]
                                       RejectionLog(logging.getLogger("test.signing"), counted))
    assert [e.coordinator_epoch for e in envelopes] == [1, 2]
    assert counted.reasons == []


def test_a_channel_exports_every_reason_at_zero_before_the_first_rejection() -> None:
    metrics = Metrics("participant")
    ControlChannel(SinkConfig(), Sender(role=Role.PARTICIPANT, id="p"), None,  # type: ignore[arg-type]
                   read=False, metrics=metrics)
    text = generate_latest(metrics.registry).decode()
    for reason in Rejection:
        assert f'hudi_sink_control_rejected_total{{reason="{reason.value}"}} 0.0' in text


def test_rejections_are_all_counted_but_logged_once_a_minute_per_reason(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(100.0)
    counted = _Counted()
    rejections = RejectionLog(logging.getLogger("test.signing"), counted, every_s=60, clock=clock)
    with caplog.at_level(logging.WARNING, "test.signing"):
        for offset in range(50):
            rejections.rejected(Rejection.UNSIGNED, offset)
        rejections.rejected(Rejection.UNKNOWN_KEY, 50)
        clock.advance(61)
        rejections.rejected(Rejection.UNSIGNED, 51)
    assert len(counted.reasons) == 52
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert "offset 0 ignored (unsigned)" in lines[0]
    assert "offset 50 ignored (unknown_key)" in lines[1]
    assert "offset 51 ignored (unsigned)" in lines[2] and "49 more" in lines[2]
