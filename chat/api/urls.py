from django.urls import path

from . import openai

app_name = "api"

urlpatterns = [
    path("models", openai.models, name="models"),
    path("chat/completions", openai.completions, name="chat_completions"),
]
