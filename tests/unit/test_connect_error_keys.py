"""Kafka Connect's error conventions: ``errors.tolerance`` none|all, the dead-letter topic's
name (``errors.deadletterqueue.topic.name``, every way a config can say it) and Connect's
``__connect.errors.*`` context headers beside ours (names as Connect's DeadLetterQueueReporter
writes them)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hudi_sink.cli.main import main
from hudi_sink.services.participant.dead_letters import ConnectContext, DeadLetter, parse_headers
from hudi_sink.services.participant.decoded import Rejected
from hudi_sink.services.participant.dlq_sender import DeadLetterSender
from hudi_sink.shared.config.settings import config_from_mapping, load_config
from hudi_sink.shared.errors import ConfigError

CONNECT_NAMES = [f"__connect.errors.{name}" for name in (
    "topic", "partition", "offset", "connector.name", "task.id", "stage", "class.name",
    "exception.class.name", "exception.message", "exception.stacktrace")]


@pytest.mark.parametrize(("given", "means"), [("none", "fail"), ("all", "dlq"), ("ALL", "dlq"),
                                              ("dlq", "dlq"), ("fail", "fail")])
def test_tolerance_takes_connect_values(given: str, means: str) -> None:
    config = config_from_mapping({"errors": {"tolerance": given}}, environ={})
    assert config.errors.tolerance == means


def test_a_bad_tolerance_names_every_accepted_value() -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"errors": {"tolerance": "ignore"}}, environ={})
    assert caught.value.key == "errors.tolerance"
    for value in ("dlq", "fail", "all", "none"):
        assert value in str(caught.value)


def test_dlq_topic_defaults_to_name_dlq() -> None:
    config = config_from_mapping({"name": "orders"}, environ={})
    assert config.dlq_topic == "orders-dlq"
    assert config.errors.connect_headers is False
    assert config.errors.dlq_replication_factor is None


def test_an_empty_dlq_topic_name_is_the_default_not_no_dlq() -> None:
    """Connect's default "" means "drop bad records"; here they always go to a topic."""
    config = config_from_mapping({"name": "orders", "errors": {
        "tolerance": "all", "deadletterqueue.topic.name": ""}}, environ={})
    assert config.dlq_topic == "orders-dlq"


def test_dlq_replication_factor_takes_connects_key() -> None:
    config = config_from_mapping(
        {"errors": {"deadletterqueue.topic.replication.factor": "3"}}, environ={})
    assert config.errors.dlq_replication_factor == 3
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"errors": {"deadletterqueue.topic.replication.factor": 0}}, environ={})
    assert caught.value.key == "errors.deadletterqueue.topic.replication.factor"


@pytest.mark.parametrize("errors", [
    {"deadletterqueue": {"topic": {"name": "connect-dlq"}, "context": {"headers": {"enable": True}}}},
    {"deadletterqueue.topic.name": "connect-dlq", "deadletterqueue.context.headers.enable": True},
    {"deadletterqueue.topic.name": "connect-dlq", "deadletterqueue": {"context": {"headers": {
        "enable": "true"}}}},
])
def test_dlq_keys_in_yaml_nested_or_dotted(errors: dict[str, Any]) -> None:
    config = config_from_mapping({"name": "orders", "errors": errors}, environ={})
    assert config.dlq_topic == "connect-dlq"
    assert config.errors.connect_headers is True


def test_dlq_keys_from_environment_and_properties(tmp_path: Path) -> None:
    env = {"HUDI_SINK__ERRORS__DEADLETTERQUEUE__TOPIC__NAME": "env-dlq",
           "HUDI_SINK__ERRORS__DEADLETTERQUEUE__CONTEXT__HEADERS__ENABLE": "true",
           "HUDI_SINK__ERRORS__TOLERANCE": "all"}
    config = config_from_mapping({}, environ=env)
    assert (config.dlq_topic, config.errors.connect_headers, config.errors.tolerance) == (
        "env-dlq", True, "dlq")
    props = tmp_path / "sink.properties"
    props.write_text("errors.tolerance=none\nerrors.deadletterqueue.topic.name=props-dlq\n"
                     "errors.deadletterqueue.context.headers.enable=true\n", encoding="utf-8")
    config = load_config(props, environ={})
    assert (config.dlq_topic, config.errors.connect_headers, config.errors.tolerance) == (
        "props-dlq", True, "fail")


def test_a_bad_dlq_topic_name_is_refused_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({"errors": {"deadletterqueue": {"topic": {"name": "a b"}},
                                               "deadletterqueue.context.headers.enabel": True}}))
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    keys = [key for key, _ in caught.value.problems]
    assert "errors.deadletterqueue.topic.name" in keys
    assert "errors.deadletterqueue.context.headers.enabel" in keys


def _letter(error_class: str = "TypeMismatch") -> DeadLetter:
    return DeadLetter.from_rejected(Rejected(error_class, "amount: expected DOUBLE"), "orders", 3,
                                    41, 1_700_000_000_000, b"k", b"{bad",
                                    headers=[("trace-id", b"abc"), ("empty", None)])


def test_connect_headers_follow_ours_with_connects_names() -> None:
    headers = _letter().headers(ConnectContext("orders-sink", "participant-7"))
    names = [name for name, _ in headers]
    assert names[:2] == ["trace-id", "empty"]  # the record's own headers, first
    assert names[2:8] == ["hudi.sink.source.topic", "hudi.sink.source.partition",
                          "hudi.sink.source.offset", "hudi.sink.source.timestamp",
                          "hudi.sink.error.class", "hudi.sink.error.message"]
    assert names[8:] == CONNECT_NAMES
    parsed = parse_headers(headers)
    assert parsed["__connect.errors.topic"] == "orders"
    assert parsed["__connect.errors.partition"] == "3"
    assert parsed["__connect.errors.offset"] == "41"
    assert parsed["__connect.errors.connector.name"] == "orders-sink"
    assert parsed["__connect.errors.task.id"] == "participant-7"
    assert parsed["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert parsed["__connect.errors.exception.class.name"] == "TypeMismatch"
    assert parsed["__connect.errors.exception.message"] == "amount: expected DOUBLE"
    assert parsed["__connect.errors.exception.stacktrace"].startswith("TypeMismatch: ")
    assert parsed["trace-id"] == "abc" and parsed["empty"] == ""
    key_error = parse_headers(_letter("KeyPartitionMismatch").headers(ConnectContext("s", "t")))
    assert key_error["__connect.errors.stage"] == "KEY_CONVERTER"


def test_without_the_flag_no_connect_header() -> None:
    assert not [name for name, _ in _letter().headers() if name.startswith("__connect")]


class _Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, list[tuple[str, bytes]]]] = []

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   headers: Any = None) -> asyncio.Future[object]:
        self.sent.append((topic, list(headers)))
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        future.set_result(object())
        return future


async def test_the_sender_writes_connect_headers_to_the_configured_topic() -> None:
    producer = _Producer()
    sender = DeadLetterSender(producer, "connect-dlq",  # type: ignore[arg-type]
                              connect=ConnectContext("orders", "p-1"))
    pump = asyncio.create_task(sender.run())
    try:
        sender.enqueue(("orders", 3), [_letter()])
        await asyncio.wait_for(sender.wait_acked(("orders", 3)), 5)
    finally:
        pump.cancel()
    [(topic, headers)] = producer.sent
    assert topic == "connect-dlq"
    assert [n for n, _ in headers if n.startswith("__connect")] == CONNECT_NAMES


@pytest.mark.parametrize(("errors", "mode"), [
    ({}, "off"),
    ({"log.enable": True}, "errors"),
    ({"log.enable": "true", "log.include.messages": "true"}, "records"),
    ({"log.include.messages": True}, "off"),  # as in Connect: nothing logged without enable
])
def test_errors_log_keys(errors: dict[str, Any], mode: str) -> None:
    assert config_from_mapping({"errors": errors}, environ={}).errors.letter_logging == mode


def test_errors_retry_keys_are_accepted() -> None:
    config = config_from_mapping({"errors": {"retry.timeout": -1, "retry.delay.max.ms": 1000}},
                                 environ={})
    assert (config.errors.retry.timeout, config.errors.retry.delay.max.ms) == (-1, 1000)


@pytest.mark.parametrize("mode", ["errors", "records"])
async def test_each_new_letter_is_logged_when_asked(
        mode: str, caplog: pytest.LogCaptureFixture) -> None:
    producer = _Producer()
    sender = DeadLetterSender(producer, "dlq", log_letters=mode)  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="hudi_sink.participant.dlq"):
        sender.enqueue(("orders", 3), [_letter()])
        sender.enqueue(("orders", 3), [_letter()])  # the same offset again: not a new letter
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("orders-3 offset 41 to dlq: TypeMismatch: amount: expected DOUBLE")
    assert ("value=b'{bad'" in line) == (mode == "records")


def test_config_check_attributes_dotted_keys_to_the_file(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({"errors": {"tolerance": "all",
                                               "deadletterqueue.topic.name": "connect-dlq"}}))
    assert main(["config", "check", "--config", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["config"]["errors"]["deadletterqueue"]["topic"]["name"] == "connect-dlq"
    assert report["sources"]["errors.deadletterqueue.topic.name"] == "file"
    assert report["sources"]["errors.tolerance"] == "file"
    assert report["topics"][1] == "connect-dlq"
