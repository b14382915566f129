from __future__ import annotations

import pytest

from demo import memory


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        ("Remember that I prefer answers in German", "The user prefers answers in German"),
        ("please remember my dog is called Rex.", "The user's dog is called Rex"),
        ("Can you remember that I study physics?", "The user studies physics"),
        ("Remember I'm vegetarian", "The user is vegetarian"),
    ],
)
def test_remember_requests_save_a_third_person_fact(message: str, fact: str) -> None:
    (intent,) = memory.intents(message)

    assert (intent.toolset, intent.tool, intent.arguments) == ("memory", "save_memory", {"text": fact})


def test_a_question_lists_and_other_sentences_are_left_alone() -> None:
    assert [i.tool for i in memory.intents("What do you remember about me?")] == ["list_memories"]
    assert memory.intents("I remember that day well") == []
    assert memory.intents("what time is it?") == []


def test_the_answers() -> None:
    saved = memory.RENDERERS["save_memory"]({"saved": True, "text": "Likes *tea*"}, {})
    listed = memory.RENDERERS["list_memories"]({"memories": [{"text": "Likes tea"}]}, {})

    assert saved is not None and saved.startswith("Got it, I will remember that: *Likes tea*.")
    assert listed == "Here is what I remember about you:\n\n- Likes tea"
    assert memory.RENDERERS["list_memories"]({"memories": []}, {}) == "I do not remember anything about you yet."
