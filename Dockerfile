# hudi-sink container image: the three services (coordinator, participant, deleter), the CLI and
# the Spark Connect server that ships inside pyspark, on Python 3.11 + a Java 17 runtime.
#
#   docker build -t hudi-sink:0.1.0 .
#
# The Helm chart (deploy/k8s/hudi-sink) runs it as uid 10001 with a read-only root filesystem:
# everything the processes write goes to /tmp (an emptyDir) or the table volume.

# --- build: a virtualenv with the package and its pinned dependencies ------------------------
FROM python:3.11.14-slim-bookworm AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
RUN python -m venv /opt/hudi-sink/venv
# Dependencies first (pyspark is a large sdist): this layer is reused while only code changes.
COPY pyproject.toml README.md ./
RUN mkdir -p services shared \
    && touch services/__init__.py shared/__init__.py \
    && /opt/hudi-sink/venv/bin/pip install . \
    && /opt/hudi-sink/venv/bin/pip uninstall --yes hudi-sink
COPY services ./services
COPY shared ./shared
RUN /opt/hudi-sink/venv/bin/pip install --no-deps . \
    && /opt/hudi-sink/venv/bin/hudi-sink --help > /dev/null

# --- runtime ------------------------------------------------------------------------------------
FROM python:3.11.14-slim-bookworm

LABEL org.opencontainers.image.title="hudi-sink" \
      org.opencontainers.image.description="Exactly-once sink from Kafka topics into Apache Hudi tables" \
      org.opencontainers.image.licenses="Apache-2.0"

# Java 17 for the participants' Spark (local mode) and the Spark Connect server; tini as PID 1
# forwards SIGTERM to hudi-sink and reaps the JVM's children.
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        'openjdk-17-jre-headless=17.0.*' \
        'tini=0.19.*' \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 hudi-sink \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --shell /usr/sbin/nologin hudi-sink

COPY --from=build /opt/hudi-sink/venv /opt/hudi-sink/venv
# SPARK_HOME is pyspark's own directory (jars, bin/spark-submit for the Spark Connect server).
RUN ln -s "$(/opt/hudi-sink/venv/bin/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" /opt/spark

ENV PATH="/opt/hudi-sink/venv/bin:${PATH}" \
    SPARK_HOME=/opt/spark \
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
