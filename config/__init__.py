from . import providers as _providers  # noqa: F401 - declares the custom LiteLLM providers
from .celery import app as celery_app

__all__ = ["celery_app"]
