from django.urls import path, re_path

from . import openai

app_name = "api"

urlpatterns = [
    path("models", openai.models, name="models"),
    path("chat/completions", openai.completions, name="chat_completions"),
    # Anything else under /v1/ answers in OpenAI's error shape too, not with the site's 404 page.
    re_path(r"^.*$", openai.not_found),
]
