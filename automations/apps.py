from django.apps import AppConfig


class AutomationsConfig(AppConfig):
    name = "automations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A run follows its turn: the turn's end and its questions to the owner (chat/signals.py).
        # Chat asks about runs' chats: their badge, their automation's budget (automations/marks.py).
        from . import marks, runs  # noqa: F401
