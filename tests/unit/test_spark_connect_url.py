"""The Spark Connect URL with the token (services/participant/spark_connect_url.py): PySpark
parses it back to exactly one ``authorization: Bearer <token>`` header on a plain channel, and
``spark.connect_token`` is only taken with a Spark Connect master."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from pyspark.sql.connect.client.core import DefaultChannelBuilder

from hudi_sink.services.participant.spark_connect_url import connect_url
from hudi_sink.shared.config.settings import SparkConfig


@pytest.mark.parametrize("master", ["sc://spark:15002", "sc://spark:15002/", "sc://spark:15002/;user_id=sink"])
def test_the_token_becomes_the_bearer_header_on_a_plain_channel(master: str) -> None:
    builder = DefaultChannelBuilder(connect_url(master, "a;b=c%d\n"))  # URL syntax, a Secret's newline
    assert builder.metadata() == [("authorization", "Bearer a;b=c%d")]
    assert not builder.secure  # PySpark's token= would make it TLS, which the server lacks
    assert builder.endpoint == "spark:15002"
    assert builder.userId == ("sink" if "user_id" in master else None)


def test_no_token_leaves_the_master_alone() -> None:
    assert connect_url("sc://spark:15002", None) == "sc://spark:15002"


def test_the_token_is_not_part_of_what_the_master_shows() -> None:
    config = SparkConfig(master="sc://spark:15002", connect_token="t0ken-value")
    assert "t0ken-value" not in repr(config) and config.master == "sc://spark:15002"


@pytest.mark.parametrize(("master", "token", "message"), [
    ("local[2]", "t", "connect_token: only with a Spark Connect master"),
    ("sc://spark:15002", " \n", "connect_token: empty"),
])
def test_a_token_without_spark_connect_or_empty_is_refused(master: str, token: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SparkConfig(master=master, connect_token=token)
