from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import AccountSettings

pytestmark = pytest.mark.django_db
GOOD = {
    "username": "grace",
    "name": "Grace Hopper",
    "password1": "compilers all the way",
    "password2": "compilers all the way",
}


@pytest.fixture
def open_signup(db: Any) -> None:
    AccountSettings.objects.update_or_create(pk=1, defaults={"open_signup": True})


def test_signup_is_closed_by_default(client: Client) -> None:
    assert AccountSettings.load().open_signup is False
    response = client.get("/signup/")
    assert response.status_code == 404 and "Sign-up is closed" in response.content.decode()
    assert client.post("/signup/", GOOD).status_code == 404
    assert not get_user_model().objects.filter(username="grace").exists()
    assert "Create an account" not in client.get("/login/").content.decode()


def test_open_signup_creates_the_account_with_its_name_and_signs_in(client: Client, open_signup: None) -> None:
    assert 'href="/signup/"' in client.get("/login/").content.decode()
    response = client.post("/signup/", GOOD)
    assert response.status_code == 302 and response["Location"] == "/"
    user = get_user_model().objects.get(username="grace")
    assert user.get_full_name() == "Grace Hopper" and user.check_password(GOOD["password1"])
    assert client.get("/").status_code == 200
    assert client.get("/signup/").status_code == 302  # signed in already


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"password1": "password", "password2": "password"}, "This password is too common"),
        ({"password1": "grace", "password2": "grace"}, "too short"),
        ({"password2": "something else entirely"}, "didn’t match"),
        ({"username": "bad name!"}, "Enter a valid username"),
        ({"username": ""}, "This field is required"),
        ({"name": "x" * 400}, "Ensure this value has at most"),
    ],
)
def test_signup_validates(client: Client, open_signup: None, changes: dict[str, str], error: str) -> None:
    response = client.post("/signup/", {**GOOD, **changes})
    assert response.status_code == 400 and error in response.content.decode()
    assert not get_user_model().objects.filter(username=GOOD["username"]).exists()


def test_signup_refuses_a_taken_username(client: Client, open_signup: None, user: Any) -> None:
    response = client.post("/signup/", {**GOOD, "username": user.username})
    assert response.status_code == 400 and "already exists" in response.content.decode()


def test_signup_names_lose_control_characters(client: Client, open_signup: None) -> None:
    assert client.post("/signup/", {**GOOD, "name": "Grace\x00"}).status_code == 400
    client.post("/signup/", {**GOOD, "name": "  Grace\x07\n\tHopper\u202e "})
    assert get_user_model().objects.get(username="grace").first_name == "Grace Hopper"


def test_signup_needs_csrf(open_signup: None) -> None:
    client = Client(enforce_csrf_checks=True)
    assert client.post("/signup/", GOOD).status_code == 403


def test_signup_attempts_are_rate_limited(open_signup: None) -> None:
    # New accounts from one address are capped per hour (refused ones are the sign-in
    # throttle's: tests/accounts/test_throttle.py).
    for n in range(10):
        response = Client(REMOTE_ADDR="203.0.113.5").post("/signup/", {**GOOD, "username": f"user{n}"})
        assert response.status_code == 302
    response = Client(REMOTE_ADDR="203.0.113.5").post("/signup/", GOOD)
    assert response.status_code == 429 and "Too many sign-up attempts" in response.content.decode()
    assert not get_user_model().objects.filter(username="grace").exists()


def test_account_page_saves_the_name(client: Client, user: Any) -> None:
    assert client.get("/account/").status_code == 302
    client.force_login(user)
    response = client.post("/account/", {"name": " Ada \x07 Lovelace "}, follow=True)
    assert "Your name is saved." in response.content.decode()
    user.refresh_from_db()
    assert user.get_full_name() == "Ada Lovelace"
    assert client.post("/account/", {"name": "y" * 400}).status_code == 400


def test_password_change_keeps_the_session(client: Client, user: Any) -> None:
    client.force_login(user)
    wrong = client.post(
        "/account/password/",
        {"old_password": "nope", "new_password1": "a fresh passphrase", "new_password2": "a fresh passphrase"},
    )
    assert "Your old password was entered incorrectly" in wrong.content.decode()
    done = client.post(
        "/account/password/",
        {
            "old_password": "correct horse battery",
            "new_password1": "a fresh passphrase",
            "new_password2": "a fresh passphrase",
        },
    )
    assert done.status_code == 302 and done["Location"] == "/account/password/done/"
    user.refresh_from_db()
    assert user.check_password("a fresh passphrase")
    assert client.get("/account/password/done/").status_code == 200


def test_admin_edits_the_single_settings_row(client: Client, admin_user: Any) -> None:
    client.force_login(admin_user)
    response = client.get("/admin/accounts/accountsettings/")
    assert response.status_code == 302 and response["Location"].endswith("/admin/accounts/accountsettings/1/change/")
    assert client.get("/admin/accounts/accountsettings/add/").status_code == 403
    client.post("/admin/accounts/accountsettings/1/change/", {"open_signup": "on"})
    assert AccountSettings.load().open_signup is True


def test_signup_losing_a_username_race_is_a_form_error(client: Client, open_signup: None, monkeypatch: Any) -> None:
    from accounts import forms

    # Both requests passed validation; the other one saved first.
    monkeypatch.setattr(forms.SignupForm, "clean_username", lambda self: self.cleaned_data["username"])
    monkeypatch.setattr(forms.SignupForm, "validate_unique", lambda self: None)
    get_user_model().objects.create_user("grace", password="x")
    response = client.post("/signup/", GOOD)
    assert response.status_code == 400 and "already exists" in response.content.decode()


def test_the_account_page_lists_only_my_live_tokens(client: Client, user: Any, other_user: Any) -> None:
    from hub.models import ApiToken

    ApiToken.issue(user, "mine")
    ApiToken.issue(other_user, "theirs")
    revoked, _ = ApiToken.issue(user, "retired script")
    client.force_login(user)
    client.post(f"/account/tokens/{revoked.pk}/revoke/")

    page = client.get("/account/").content.decode()

    table = page.split('id="tokens"', 1)[1].split("</table>", 1)[0]
    assert "mine" in table and "theirs" not in table and "retired script" not in table


def test_another_users_token_cannot_be_revoked(client: Client, user: Any, other_user: Any) -> None:
    from hub.models import ApiToken

    theirs, token = ApiToken.issue(other_user, "theirs")
    client.force_login(user)

    assert client.post(f"/account/tokens/{theirs.pk}/revoke/").status_code == 404
    assert ApiToken.authenticate(token) is not None  # still works
