"""The Files toolset: reading, ranges, search, citations, and owners (through the executor and
the HTTP execute API)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from chat.models import Chat, Message, Turn
from hub.models import ApiToken
from toolsets import executor
from toolsets.base import qualified_name
from toolsets.sources import SourceBook

from . import samples

pytestmark = pytest.mark.django_db(transaction=True)


def run(user: Any, tool: str, arguments: dict[str, Any], turn: Turn | None = None) -> executor.Execution:
    return async_to_sync(executor.execute)(
        qualified_name("files", tool),
        arguments,
        user_id=user.pk,
        tool_call_id="call_1",
        turn_id=turn.pk if turn else None,
        chat_id=turn.chat_id if turn else None,  # as the chat's toolbox passes it
        sources=SourceBook(),
    )


def test_read_file_by_page_with_a_citation_to_that_page(user: Any, attach_file: Any) -> None:
    pdf = attach_file(user, "contract.pdf", samples.pdf(["Intro text.", "Termination needs 30 days notice."]))
    done = run(user, "read_file", {"file_id": pdf.pk, "page": 2})
    assert done.ok, done.error
    assert done.result["text"] == "Termination needs 30 days notice."
    assert done.result["page"] == 2 and done.result["pages"] == 2
    source = done.sources[0]
    assert source["title"] == "contract.pdf, page 2" and source["kind"] == "File"
    assert source["url"].startswith(f"/files/{pdf.pk}/?from=") and source["url"].endswith("#passage")
    assert done.tool is not None and done.tool.summarize is not None
    assert done.tool.summarize(done.result) == "contract.pdf: page 2 of 2, characters 13–46 of 46"
    assert '"sources": [{"n": 1' in done.model_content(16_000)


def test_read_file_by_character_range_says_what_follows(user: Any, attach_file: Any) -> None:
    note = attach_file(user, "long.txt", ("word " * 5000).encode())
    first = run(user, "read_file", {"file_id": note.pk, "length": 100}).result
    assert first["start"] == 0 and first["end"] == 100 and first["next_start"] == 100
    assert "read again with start=100" in first["more"]
    later = run(user, "read_file", {"file_id": note.pk, "start": 24_900, "length": 50_000}).result
    assert later["end"] == 25_000 and "more" not in later
    past = run(user, "read_file", {"file_id": note.pk, "start": 99_999})
    assert past.error is not None and "has 25,000 characters" in past.error.message
    bad_page = run(user, "read_file", {"file_id": note.pk, "page": 3})
    assert bad_page.error is not None and "has 1 page" in bad_page.error.message


def test_read_file_reports_reading_and_failed_files(user: Any) -> None:
    from django.core.files.base import ContentFile

    from toolsets.files.models import Attachment

    # Stored without a task to read it: it stays "reading".
    pending = Attachment(owner=user, name="a.txt", size=2, kind="text", content_type="text/plain")
    pending.file.save("a.txt", ContentFile(b"hi"))
    done = run(user, "read_file", {"file_id": pending.pk})
    assert done.error is not None and "still being read" in done.error.message
    pending.status, pending.error = "failed", "The file is not valid UTF-8 text."
    pending.save()
    done = run(user, "read_file", {"file_id": pending.pk})
    assert done.error is not None and "could not be read: The file is not valid UTF-8" in done.error.message


def test_images_read_as_their_facts(user: Any, attach_file: Any) -> None:
    image = attach_file(user, "blue.png", samples.image(size=(320, 200), colour=(30, 60, 210)))
    result = run(user, "read_file", {"file_id": image.pk}).result
    assert result["image"]["width"] == 320 and result["image"]["colour_name"] == "blue"
    assert result["text"].startswith("A 320×200 PNG image")


def test_csv_reads_with_columns_and_rows(user: Any, attach_file: Any) -> None:
    table = attach_file(user, "sales.csv", b"region,amount\nNorth,10\nSouth,20\n")
    result = run(user, "read_file", {"file_id": table.pk}).result
    assert result["type"] == "CSV" and result["columns"] == ["region", "amount"] and result["rows"] == 2


def test_list_files_of_this_chat_or_all(user: Any, attach_file: Any) -> None:
    first, second = Chat.objects.create(owner=user), Chat.objects.create(owner=user)
    a = attach_file(user, "a.txt", b"alpha", chat=first)
    b = attach_file(user, "b.txt", b"beta", chat=second)
    turn = Turn.objects.create(chat=first)
    in_chat = run(user, "list_files", {}, turn).result
    assert [f["file_id"] for f in in_chat["files"]] == [a.pk] and in_chat["scope"] == "chat"
    everything = run(user, "list_files", {"scope": "all"}, turn).result
    assert {f["file_id"] for f in everything["files"]} == {a.pk, b.pk}
    # No turn (the HTTP API): "this chat" is every file.
    assert run(user, "list_files", {}).result["scope"] == "all"


def test_search_finds_passages_by_words_with_page_citations(user: Any, attach_file: Any) -> None:
    contract = attach_file(
        user,
        "contract.pdf",
        samples.pdf(["The parties agree.", "Either party may end this by termination with notice."]),
    )
    attach_file(user, "other.txt", b"Nothing relevant here.")
    done = run(user, "search_files", {"query": "Termination notice"})
    assert done.ok, done.error
    hits = done.result["passages"]
    assert len(hits) == 1 and hits[0]["file_id"] == contract.pk and hits[0]["page"] == 2
    assert "termination with notice" in hits[0]["passage"]
    assert done.sources[0]["title"] == "contract.pdf, page 2"
    assert done.sources[0]["url"].startswith(f"/files/{contract.pk}/?from=")
    assert run(user, "search_files", {"query": "zebra"}).result["count"] == 0
    blank = run(user, "search_files", {"query": "  ?! "})
    assert blank.error is not None and "give one or more words" in blank.error.message


def test_search_treats_the_query_as_words_not_a_pattern(user: Any, attach_file: Any) -> None:
    attach_file(user, "a.txt", b"price is (a+b)* here")
    assert run(user, "search_files", {"query": "(price|here)*+?["}).result["count"] == 1


def test_another_users_files_do_not_exist_for_the_tools(user: Any, other_user: Any, attach_file: Any) -> None:
    secret = attach_file(user, "secret.txt", b"The launch code is tulip.")
    done = run(other_user, "read_file", {"file_id": secret.pk})
    assert done.error is not None and f"no file with id {secret.pk}" in done.error.message
    for guess in (secret.pk + 1, 2**62, 0):
        assert run(other_user, "read_file", {"file_id": guess}).error is not None
    assert run(other_user, "search_files", {"query": "launch code tulip"}).result["count"] == 0
    assert run(other_user, "list_files", {"scope": "all"}).result["count"] == 0
    # Their own turn in the victim's chat is not possible either: the chat is looked up by owner.
    victims_turn = Turn.objects.create(chat=secret.chat)
    assert run(other_user, "list_files", {"scope": "chat"}, victims_turn).result["count"] == 0


def test_the_execute_api_reads_only_the_callers_files(user: Any, other_user: Any, attach_file: Any) -> None:
    secret = attach_file(user, "secret.txt", b"The launch code is tulip.")
    _, token = ApiToken.issue(other_user, "script")
    response = Client().post(
        "/toolsets/files/execute/read_file",
        data=json.dumps({"params": {"file_id": secret.pk}}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 502 and "no file with id" in response.json()["error"]["message"]
    search = Client().post(
        "/toolsets/files/execute/search_files",
        data=json.dumps({"params": {"query": "tulip"}}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert search.status_code == 200 and search.json()["result"]["count"] == 0
    _, own = ApiToken.issue(user, "mine")
    mine = Client().post(
        "/toolsets/files/execute/read_file",
        data=json.dumps({"params": {"file_id": secret.pk}}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {own}",
    )
    assert mine.status_code == 200 and "tulip" in mine.json()["result"]["text"]


def test_the_transcript_names_files_and_shows_images_to_a_vision_model(user: Any, attach_file: Any) -> None:
    from chat.worker import turn_store
    from toolsets.files.transcript import model_sees_images

    chat = Chat.objects.create(owner=user)
    report = attach_file(user, "report.pdf", samples.pdf(["Hi"]), chat=chat)
    image = attach_file(user, "red.png", samples.image(), chat=chat, send=False)
    from toolsets.files import attach

    attach.link([image], report.message)
    seen = turn_store.transcript(chat.pk, vision=True)
    content = seen[-1]["content"]
    assert isinstance(content, list) and content[1]["type"] == "image_url"
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert f"“report.pdf” (file_id {report.pk}, PDF, 1 page)" in content[0]["text"]
    blind = turn_store.transcript(chat.pk, vision=False)[-1]["content"]
    assert isinstance(blind, str) and "this model cannot see images" in blind and "dominant colour is red" in blind
    assert model_sees_images("demo/tessera") and not model_sees_images("openai/gpt-3.5-turbo")
    turn = Turn.objects.create(chat=chat)
    Message.objects.filter(pk=report.message_id).update(turn=turn)
    messages, notice = turn_store.turn_transcript(chat.pk, turn.pk, vision=False)
    assert "cannot see images: “red.png”" in notice
    assert messages == turn_store.transcript(chat.pk, turn.pk, vision=False)
    assert turn_store.turn_transcript(chat.pk, turn.pk, vision=True)[1] == ""
    # Only the question's own images: a later question without any gets no notice.
    later = Turn.objects.create(chat=chat, parent=turn)
    Message.objects.create(chat=chat, turn=later, role="user", content="And now?")
    assert turn_store.turn_transcript(chat.pk, later.pk, vision=False)[1] == ""
