# syntax=docker/dockerfile:1
# The lorentztron service: dependencies installed into a virtualenv in a build stage, copied
# into a slim runtime stage that runs as an unprivileged user. The numba kernels are compiled
# during the build (the same warm-up the service runs at start-up) into a cache directory the
# user can write, so a container starts without compiling unless its CPU differs from the
# build machine's, in which case the start-up warm-up compiles them once more.
# No secret is baked in: keys and URLs come from LORENTZTRON_* variables at run time.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY core ./core
COPY service ./service
COPY clients/python/lorentztron_client ./clients/python/lorentztron_client
RUN /opt/venv/bin/pip install --no-cache-dir .

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="lorentztron" \
      org.opencontainers.image.description="Online-learning models over HTTP" \
      org.opencontainers.image.licenses="MIT"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    NUMBA_CACHE_DIR=/var/cache/lorentztron/numba \
    LORENTZTRON_HOST=0.0.0.0 \
    LORENTZTRON_PORT=8000 \
    LORENTZTRON_SNAPSHOT_DIR=/var/lib/lorentztron/snapshots
RUN groupadd --system --gid 10001 lorentztron \
    && useradd --system --uid 10001 --gid lorentztron --no-create-home \
        --home-dir /var/lib/lorentztron --shell /usr/sbin/nologin lorentztron \
    && install -d -o lorentztron -g lorentztron -m 0750 \
        /var/lib/lorentztron /var/lib/lorentztron/snapshots \
        /var/cache/lorentztron /var/cache/lorentztron/numba
COPY --from=build /opt/venv /opt/venv
USER 10001:10001
WORKDIR /var/lib/lorentztron
# compile the per-request kernels now (cached in NUMBA_CACHE_DIR, owned by the user)
RUN python -c "from service.main import warm_up; warm_up()"
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('LORENTZTRON_PORT', '8000'), timeout=2)"]
STOPSIGNAL SIGTERM
CMD ["lorentztron", "serve"]
