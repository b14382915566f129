from django.apps import AppConfig
from django.core import checks


class ChatConfig(AppConfig):
    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .checks import static_files_built

        checks.register(static_files_built, checks.Tags.staticfiles)
