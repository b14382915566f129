from django.urls import path

from . import views

app_name = "chatsearch"

urlpatterns = [
    path("", views.search, name="search"),
]
