# One image for all five aimem services; the command picks the service:
#   docker run aimem python -m aimem_writer   (aimem_ingress, aimem_query, aimem_mcp, aimem_maintainer)
# BASE must be a Debian-like image with python3 (>= 3.11), venv and pip. The tests build with
# --build-arg BASE=localhost/debian-python:bookworm (made with debootstrap, Debian's 3.11).
# Proxies: HTTP_PROXY/HTTPS_PROXY/NO_PROXY are Docker's predefined build args (not kept in the
# image); PIP_INDEX_URL/PIP_EXTRA_INDEX_URL select a mirror. No secret is ever baked in.
ARG BASE=python:3.12-slim

FROM ${BASE} AS build
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_DEFAULT_TIMEOUT=120
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/aimem
# Layer 1, third-party dependencies: depends only on the pyproject.toml files, so editing
# source does not reinstall them.
COPY libs/aimem-common/pyproject.toml /src/libs/aimem-common/
COPY services/writer/pyproject.toml /src/services/writer/
COPY services/ingress/pyproject.toml /src/services/ingress/
COPY services/query/pyproject.toml /src/services/query/
COPY services/mcp-gateway/pyproject.toml /src/services/mcp-gateway/
COPY services/maintainer/pyproject.toml /src/services/maintainer/
COPY cli/pyproject.toml /src/cli/
RUN set -eu; \
    if [ -n "${PIP_INDEX_URL:-}" ]; then export PIP_INDEX_URL; else unset PIP_INDEX_URL; fi; \
    if [ -n "${PIP_EXTRA_INDEX_URL:-}" ]; then export PIP_EXTRA_INDEX_URL; else unset PIP_EXTRA_INDEX_URL; fi; \
    /opt/aimem/bin/python -c 'import glob, tomllib; deps = {d for f in glob.glob("/src/**/pyproject.toml", recursive=True) for d in tomllib.load(open(f, "rb"))["project"].get("dependencies", []) if not d.startswith("aimem-")}; print("\n".join(sorted(deps)))' > /tmp/requirements.txt; \
    /opt/aimem/bin/pip install -r /tmp/requirements.txt "setuptools>=68" wheel
# Layer 2, our packages (pyproject + src only, see .dockerignore; no tests, no data).
COPY libs/aimem-common /src/libs/aimem-common
COPY services /src/services
COPY cli /src/cli
RUN /opt/aimem/bin/pip install --no-deps --no-build-isolation \
      /src/libs/aimem-common /src/services/writer /src/services/ingress /src/services/query \
      /src/services/mcp-gateway /src/services/maintainer /src/cli \
 && /opt/aimem/bin/pip check \
 && rm -rf /src

FROM ${BASE}
LABEL org.opencontainers.image.title="aimem" \
      org.opencontainers.image.description="Long-term memory shared across coding-agent CLIs"
RUN groupadd --system --gid 10001 aimem \
 && useradd --system --uid 10001 --gid aimem --home-dir /data --no-create-home --shell /usr/sbin/nologin aimem \
 && mkdir -p /data && chown aimem:aimem /data
COPY --from=build /opt/aimem /opt/aimem
COPY deploy/docker/healthcheck.py /opt/aimem/healthcheck.py
ENV PATH=/opt/aimem/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    AIMEM_DATA_DIR=/data \
    AIMEM_HOST=0.0.0.0 \
    AIMEM_BUS__NATS_URL=nats://nats:4222 \
    HF_HUB_OFFLINE=1
WORKDIR /data
VOLUME ["/data"]
USER aimem:aimem
EXPOSE 8701 8702 8703 8704 8705
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "/opt/aimem/healthcheck.py"]
CMD ["python", "-m", "aimem_ingress"]
