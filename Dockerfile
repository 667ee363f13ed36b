FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml constraints.txt README.md ./
COPY agentloom ./agentloom
COPY core ./core
COPY agents ./agents
COPY toolservers ./toolservers
COPY tools ./tools
COPY web ./web
COPY runloop ./runloop
COPY sessions ./sessions
COPY models_catalog ./models_catalog
COPY context ./context
COPY memory ./memory
COPY templates ./templates
COPY static ./static
COPY manage.py ./
RUN pip install --no-cache-dir -c constraints.txt . && python -c "import agentloom"
EXPOSE 8000
CMD ["python", "-m", "uvicorn", "agentloom.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--no-proxy-headers", "--lifespan", "on", "--timeout-keep-alive", "30", \
     "--http", "agentloom.http_protocol:BoundedH11Protocol"]
