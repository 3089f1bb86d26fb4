# One image for every Erpilot service; the command picks the service: `erpilot serve <name>`.
FROM python:3.11-slim AS build
COPY --from=ghcr.io/astral-sh/uv:0.13 /uv /usr/local/bin/uv
WORKDIR /app
ENV UV_LINK_MODE=copy UV_COMPILE_BYTECODE=1
COPY pyproject.toml uv.lock ./
COPY libs ./libs
COPY services ./services
COPY src ./src
COPY docs/FAILPOINTS.md ./docs/FAILPOINTS.md
RUN uv sync --frozen --no-dev --no-editable

FROM python:3.11-slim
RUN useradd --system --uid 10001 erpilot
COPY --from=build /app/.venv /app/.venv
ENV PATH="/app/.venv/bin:$PATH" PYTHONUNBUFFERED=1
USER erpilot
WORKDIR /app
ENTRYPOINT ["erpilot"]
CMD ["serve", "gateway"]
