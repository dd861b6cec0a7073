# duomq images. Two targets, one build:
#   docker build -t duomq:0.1.0 .                       the broker and the CLI (default)
#   docker build --target spark -t duomq-spark:0.1.0 .  the same plus Java and PySpark,
#                                                        for Spark jobs pinned to slave reads
# Every dependency ships as a wheel; duomq's own C loops (format/_native.c)
# are compiled in the build stages (gcc from Debian there), or come in the
# wheel scripts/image.sh built on the host when offline. The final stages hold
# a virtualenv, no pip cache and no build tools, and run as an unprivileged
# user (uid 10001).
#
# Offline (`make image`, scripts/image.sh): no registry and no package index
# is reachable, so the build is given
#   PYTHON_IMAGE  a Debian 12 base with python3.11 made locally (debootstrap,
#                 `podman import`); for the spark target one that also has Java
#   WHEELS        a directory of every wheel the image needs, duomq's own
#                 (built on the host, with its C loops) among them, mounted
#                 into the build (podman build --volume), so pip never asks
#                 an index
# and runs with --network none. Without them (Docker and the internet) the
# stages pull python:3.11-slim, install from PyPI and, for spark, Java from
# Debian, exactly as before.
ARG PYTHON_IMAGE=python:3.11.10-slim-bookworm

# ---- build-wheel: duomq's own wheel, with its C loops (format/_native.c) ----
# offline, the one scripts/image.sh built on the host (the local base has no
# compiler and the build no network); else built here, with Debian's gcc
FROM ${PYTHON_IMAGE} AS build-wheel
ARG WHEELS=
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY . .
RUN mkdir /wheel \
 && if ls "$WHEELS"/duomq-*.whl >/dev/null 2>&1; then \
      cp "$WHEELS"/duomq-*.whl /wheel/; \
    else \
      { command -v gcc >/dev/null || { apt-get update \
        && apt-get install -y --no-install-recommends gcc libc6-dev; }; } \
      && python -m venv /tmp/pip \
      && /tmp/pip/bin/pip wheel ${WHEELS:+--no-index --find-links "$WHEELS"} --no-deps -w /wheel .; \
    fi

# ---- build: the dependencies into /opt/duomq (duomq itself comes last) -----
# The final stages copy this virtualenv, then install duomq's wheel into it
# in a layer of its own: a change of duomq's source rebuilds (and an
# upgrade pulls) that small layer only, not the dependencies' hundreds of MB.
FROM ${PYTHON_IMAGE} AS build
ARG WHEELS=
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml .
RUN python -m venv /opt/duomq \
 && python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
 && /opt/duomq/bin/pip install ${WHEELS:+--no-index --find-links "$WHEELS"} -r /tmp/requirements.txt

FROM ${PYTHON_IMAGE} AS build-spark
ARG WHEELS=
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml .
RUN python -m venv /opt/duomq \
 && python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['spark']))" > /tmp/requirements.txt \
 && /opt/duomq/bin/pip install ${WHEELS:+--no-index --find-links "$WHEELS"} -r /tmp/requirements.txt

# ---- spark: Spark jobs (spark-submit in local mode) -------------------------
FROM ${PYTHON_IMAGE} AS spark
# Java from Debian unless the base has it (the offline base does)
RUN if ! command -v java >/dev/null; then \
      apt-get update \
      && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
 && java -version \
 && useradd --uid 10001 --create-home --shell /usr/sbin/nologin duomq
COPY --from=build-spark /opt/duomq /opt/duomq
COPY --from=build-wheel /wheel /tmp/wheel
RUN PIP_NO_CACHE_DIR=1 /opt/duomq/bin/pip install -q --no-index --no-deps \
      --disable-pip-version-check /tmp/wheel/duomq-*.whl \
 && rm -rf /tmp/wheel \
 && /opt/duomq/bin/python -c "import duomq.client.spark" \
 && /opt/duomq/bin/python -m duomq --version | tee /dev/stderr | grep -q "C loops"
COPY examples /opt/duomq-examples
ENV PATH=/opt/duomq/bin:$PATH PYSPARK_PYTHON=/opt/duomq/bin/python \
    SPARK_LOCAL_IP=127.0.0.1 PYTHONPATH=/opt/duomq-examples PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /home/duomq
ENTRYPOINT ["python", "-m", "pipeline.minutes"]

# ---- broker: the default target ---------------------------------------------
FROM ${PYTHON_IMAGE} AS broker
RUN useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin duomq \
 && mkdir -p /var/lib/duomq /etc/duomq \
 && chown 10001:10001 /var/lib/duomq
COPY --from=build /opt/duomq /opt/duomq
COPY --from=build-wheel /wheel /tmp/wheel
RUN PIP_NO_CACHE_DIR=1 /opt/duomq/bin/pip install -q --no-index --no-deps \
      --disable-pip-version-check /tmp/wheel/duomq-*.whl \
 && rm -rf /tmp/wheel \
 && /opt/duomq/bin/python -m duomq --version | tee /dev/stderr | grep -q "C loops"
ENV PATH=/opt/duomq/bin:$PATH PYTHONUNBUFFERED=1 \
    DUOMQ_DATA_DIR=/var/lib/duomq DUOMQ_LISTEN_HOST=0.0.0.0
USER 10001:10001
WORKDIR /var/lib/duomq
VOLUME ["/var/lib/duomq"]
EXPOSE 10911 10912
HEALTHCHECK --interval=10s --timeout=5s --retries=3 CMD ["duomq", "health", "--live"]
ENTRYPOINT ["duomq"]
CMD ["broker"]
