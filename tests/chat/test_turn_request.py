"""A program's turn request (chat/worker/request.py): typed for the turn runner, stored as the
same JSON in `Turn.api` as before, so turns already in the database still load."""

from __future__ import annotations

from typing import Any

from chat.worker.request import TurnRequest

TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
# A row as the hub stored it before the request was typed.
STORED = {
    "messages": [{"role": "user", "content": "hi"}],
    "system": "Be brief.",
    "tools": [TOOL],
    "agent": "researcher",
    "client": "openai: token ci",
    "principal": "token:3",
}


def test_a_stored_request_loads_and_is_written_back_the_same() -> None:
    request = TurnRequest.from_json(STORED)
    assert request == TurnRequest(
        messages=[{"role": "user", "content": "hi"}],
        system="Be brief.",
        tools=[TOOL],
        agent="researcher",
        client="openai: token ci",
        principal="token:3",
    )
    assert request.to_json() == STORED
    assert request.tool_names == {"lookup"}


def test_a_chat_turn_has_no_request_and_old_rows_missing_keys_fall_back() -> None:
    assert TurnRequest.from_json({}) is None and TurnRequest.from_json(None) is None
    sparse: dict[str, Any] = {"principal": "token:9", "tools": None, "system": None}
    request = TurnRequest.from_json(sparse)
    assert request is not None
    # No "messages": the chat's own transcript, not an empty conversation.
    assert request.messages is None and request.tools == [] and request.system == ""
    assert request.principal == "token:9" and "messages" not in request.to_json()
    empty = TurnRequest.from_json({"messages": []})
    assert empty is not None and empty.messages == []


def test_client_and_principal_are_bounded_as_stored() -> None:
    stored = TurnRequest(messages=[], client="c" * 500, principal="p" * 500).to_json()
    assert len(stored["client"]) == 200 and len(stored["principal"]) == 200
