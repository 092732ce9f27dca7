"""The ``errors`` section: what happens to records that do not fit the schema, in hudi-sink's
words and in Kafka Connect's.

Teams moving from a Connect sink bring Connect's error keys (``errors.tolerance: all``,
``errors.deadletterqueue.topic.name``, ``…topic.replication.factor``,
``errors.deadletterqueue.context.headers.enable``, ``errors.log.*``, ``errors.retry.*``) and
tooling that reads Connect's ``__connect.errors.*`` headers; both are taken as they are.
Connect's dotted names are real nested keys here (``errors: {deadletterqueue: {topic: {name:
…}}}``), so the same name works in YAML, a ``.properties`` file
(``errors.deadletterqueue.topic.name=…``) and the environment
(``HUDI_SINK__ERRORS__DEADLETTERQUEUE__TOPIC__NAME``); a YAML file may also write the dotted
name as one key inside ``errors``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hudi_sink.shared.errors import ConfigError

__all__ = ["ErrorsConfig", "DeadLetterQueueConfig", "CONNECT_TOLERANCE", "nest_dotted",
           "DLQ_NAME_KEY", "dlq_clash", "refuse_dlq_clash"]

CONNECT_TOLERANCE = {"none": "fail", "all": "dlq"}
"""Kafka Connect's ``errors.tolerance`` values and the behaviour each names here: ``none``
stops at the first bad record (a Connect task fails), ``all`` skips it to the dead-letter
topic (Connect needs a DLQ topic name for that; here one always exists)."""


DLQ_NAME_KEY = "errors.deadletterqueue.topic.name"


def dlq_clash(dlq_topic: str, others: Mapping[str, str]) -> str | None:
    """Why the dead-letter topic may not be ``dlq_topic``, or None. ``others`` maps each other
    topic the sink reads or writes to what it is. A DLQ that is a data topic is read back and
    its letters fail again (dead-lettered forever); one that is the control or a deletion topic
    mixes letters into messages that mean something else there."""
    role = others.get(dlq_topic)
    if role is None:
        return None
    return (f"the dead-letter topic {dlq_topic!r} is also the sink's {role}: choose a topic "
            "of its own (unset: <name>-dlq)")


def refuse_dlq_clash(config: Any) -> None:
    """:func:`dlq_clash` of a ``SinkConfig`` (typed ``Any``: that module imports this one) as
    a ``ConfigError`` naming :data:`DLQ_NAME_KEY`."""
    roles = {str(topic): "data topic (kafka.topics)" for topic in config.kafka.topics}
    roles[str(config.control_topic)] = "control topic"
    for topic in (config.deletion_topic, config.deletion_retry_topic, config.deletion_dlq_topic):
        roles[str(topic)] = "deletion topic"
    clash = dlq_clash(str(config.dlq_topic), roles)
    if clash is not None:
        raise ConfigError(clash, DLQ_NAME_KEY)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Replication(_Section):
    factor: int | None = Field(None, ge=1)
    """Replicas of the dead-letter topic when the sink creates it; None: as the sink's other
    topics (``kafka.replication_factor``, else the broker's default). Connect's default is 3."""


class _TopicName(_Section):
    name: str | None = Field(None, min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    """The data dead-letter topic; None: ``<name>-dlq``. Empty (Connect's default, which
    there means "no DLQ: drop bad records") is None too: here bad records are never dropped."""
    replication: _Replication = Field(default_factory=_Replication)

    @field_validator("name", mode="before")
    @classmethod
    def _empty_is_default(cls, name: Any) -> Any:
        return None if isinstance(name, str) and not name.strip() else name


class _HeadersEnable(_Section):
    enable: bool = False
    """Add Kafka Connect's ``__connect.errors.*`` headers to each dead letter (beside
    hudi-sink's own ``hudi.sink.*`` headers, which are always there)."""


class _Context(_Section):
    headers: _HeadersEnable = Field(default_factory=_HeadersEnable)


class _Include(_Section):
    messages: bool = False
    """With ``errors.log.enable``: the record's key and value in the line too (cut to 1,000
    characters each). Off by default: records may hold personal data."""


class _ErrorsLog(_Section):
    enable: bool = False
    """Log one line per bad record (topic, partition, offset, error class and message)."""
    include: _Include = Field(default_factory=_Include)


class _DelayMax(_Section):
    ms: int = Field(60000, ge=0)


class _Delay(_Section):
    max: _DelayMax = Field(default_factory=_DelayMax)


class _Retry(_Section):
    timeout: int = Field(0, ge=-1)
    """Kafka Connect's ``errors.retry.timeout`` and ``…retry.delay.max.ms``: accepted so a
    Connect config runs as it is, with no effect. Connect retries a failed conversion; here a
    record is refused by a pure function of its bytes and the schema, so a retry could only
    give the same answer. Kafka and storage failures are retried by ``service.retry_*``."""
    delay: _Delay = Field(default_factory=_Delay)


class DeadLetterQueueConfig(_Section):
    """``errors.deadletterqueue.*``, Connect's names."""

    topic: _TopicName = Field(default_factory=_TopicName)
    context: _Context = Field(default_factory=_Context)


def nest_dotted(data: Mapping[str, Any]) -> dict[str, Any]:
    """``{"deadletterqueue.topic.name": x}`` -> ``{"deadletterqueue": {"topic": {"name": x}}}``
    (a dotted key written inside the section); nested keys of the same path merge."""
    nested: dict[str, Any] = {}
    for key, value in data.items():
        parts = str(key).split(".")
        node = nested
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"{key}: sets both a section and a value")
            node = child
        last = parts[-1]
        if isinstance(value, Mapping) and isinstance(node.get(last), dict):
            node[last] = {**node[last], **nest_dotted(value)}
        elif isinstance(value, Mapping):
            node[last] = nest_dotted(value)
        else:
            node[last] = value
    return nested


class ErrorsConfig(_Section):
    """What happens to records that do not fit the schema."""

    tolerance: Literal["dlq", "fail", "all", "none"] = "dlq"
    """``dlq`` (Connect's ``all``): dead-letter the record and go on; ``fail`` (Connect's
    ``none``): stop the partition before it. Connect's values are read as ours, so the
    resolved config only ever holds ``dlq`` or ``fail``."""
    max_record_bytes: int = Field(10485760, ge=1)
    deadletterqueue: DeadLetterQueueConfig = Field(default_factory=DeadLetterQueueConfig)
    """Connect's ``errors.deadletterqueue.topic.name`` and
    ``errors.deadletterqueue.context.headers.enable``."""
    log: _ErrorsLog = Field(default_factory=_ErrorsLog)
    """Connect's ``errors.log.enable`` and ``errors.log.include.messages``."""
    retry: _Retry = Field(default_factory=_Retry)
    """Connect's ``errors.retry.*``: accepted, no effect (see ``_Retry``)."""

    @model_validator(mode="before")
    @classmethod
    def _dotted_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and any("." in str(key) for key in data):
            return nest_dotted(data)
        return data

    @field_validator("tolerance", mode="before")
    @classmethod
    def _connect_values(cls, value: Any) -> Any:
        if isinstance(value, str):
            return CONNECT_TOLERANCE.get(value.strip().lower(), value)
        return value

    @property
    def dlq_topic_name(self) -> str | None:
        """``errors.deadletterqueue.topic.name`` when set."""
        return self.deadletterqueue.topic.name

    @property
    def dlq_replication_factor(self) -> int | None:
        """``errors.deadletterqueue.topic.replication.factor`` when set."""
        return self.deadletterqueue.topic.replication.factor

    @property
    def letter_logging(self) -> Literal["off", "errors", "records"]:
        """``errors.log.enable`` / ``errors.log.include.messages`` as one setting."""
        if not self.log.enable:
            return "off"
        return "records" if self.log.include.messages else "errors"

    @property
    def connect_headers(self) -> bool:
        """``errors.deadletterqueue.context.headers.enable``."""
        return self.deadletterqueue.context.headers.enable
