# Jeeves: one image for web, workers, beat and flower (the compose file picks the command).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True

WORKDIR /app

# The CPU build of torch first, so requirements.txt's torch==2.13.0 does not pull a CUDA build.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install --index-url "${TORCH_INDEX_URL}" torch==2.13.0

COPY requirements.txt .
RUN pip install -r requirements.txt

# .dockerignore keeps .env, .jeeves/ (local secrets, data), .git and .venv out of the build context.
COPY . .
# Static files only. A throwaway key and a DATABASE_URL nothing connects to put the settings outside the
# embedded mode, so no secret key, webhook secret, app id or encryption key is made up and baked in:
# every container gets them from the environment (.env), the same for all (jeeves/startup.py refuses without).
RUN DJANGO_SECRET_KEY=build-only DATABASE_URL=postgresql://build@localhost/none python manage.py collectstatic --noinput -v 0

RUN useradd --create-home --uid 10001 jeeves && mkdir -p /app/.jeeves && chown -R jeeves /app/.jeeves
USER jeeves

EXPOSE 8000
CMD ["gunicorn", "jeeves.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
