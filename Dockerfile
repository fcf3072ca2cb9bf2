# syntax=docker/dockerfile:1
# Build stage: a virtualenv with jobmatch and its runtime dependencies only.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/venv
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY app ./app
COPY migrations ./migrations
# The same pinned versions as `make run` and `make test`.
RUN /opt/venv/bin/pip install --constraint constraints.txt .

# Runtime stage: the virtualenv (which carries the migrations as app.migrations), an
# unprivileged user.
FROM python:3.11-slim-bookworm
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    JOBMATCH_DATABASE_URL=sqlite:////data/jobmatch.db
RUN useradd --system --uid 10001 --home-dir /app jobmatch \
    && mkdir -p /data /app && chown jobmatch /data
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
USER jobmatch
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"]
CMD ["jobmatch", "serve", "--host", "0.0.0.0", "--port", "8000"]
