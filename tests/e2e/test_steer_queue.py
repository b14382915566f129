"""Writing while an answer runs (chat/pending.py): Send queues (visible, editable, cancelable,
run in order when the answer completes), Steer hands the text to the running agent at its next
step; live, in a second tab and after a reload. And the block being streamed shows formatted
before the answer ends (chat/open_block.py)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from chat.models import LLMModel, Message, PendingMessage, Turn

from .axe import axe_violations, blocking, describe
from .conftest import browser_page, normalized_messages, send, shot, wait_socket, wait_turn_done

pytestmark = pytest.mark.e2e

RUNNING = "[id^='turn-state-'][data-turn-status='running']"


@pytest.fixture(autouse=True)
def _paced_demo(e2e_user: Any) -> None:
    # A pace a person could type against (the test stack's default is 100 tokens/s): the long
    # answer takes ~10 s, time to queue, cancel and steer on a loaded machine.
    LLMModel.objects.filter(model="demo/tessera").update(extra_params={"tokens_per_second": 30})


# Records every moment the Stop button disagrees with the page's turns: shown with nothing
# running, or hidden while a turn runs or waits (it once appeared only after a reload).
WATCH_STOP = r"""() => {
  window.__stopWrong = [];
  const look = () => {
    const states = "[id^='turn-state-'][data-turn-status='running'], [id^='turn-state-'][data-turn-status='queued']";
    const active = document.querySelector(states);
    const stop = document.getElementById('stop-btn');
    const shown = !!stop && getComputedStyle(stop).display !== 'none';
    if (!!active !== shown) window.__stopWrong.push({active: !!active, shown: shown});
  };
  // After the page's own handlers for the same change (htmx's swap events) have run.
  const options = {subtree: true, childList: true, attributes: true};
  new MutationObserver(() => setTimeout(look, 100)).observe(document.body, options);
}"""


def _start_slow_chat(page: Page) -> str:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, "[demo:slow] Tell me about websockets.")
    page.wait_for_url("**/chats/*/")
    page.evaluate(WATCH_STOP)
    wait_socket(page)
    page.wait_for_selector(RUNNING, timeout=15_000)
    page.wait_for_selector(".md-tail p", timeout=15_000)
    return page.url


def test_queue_two_cancel_one_and_steer_the_running_answer(browser: Browser, stack: Any, axe_signed_in: Page) -> None:
    page = axe_signed_in  # signed in, with the CSP bypassed so axe can be injected
    # Slower than the module's pace: everything up to the cancel below must happen while the first
    # answer still streams, and on a loaded CI machine that took more than the ~10 s of 30 tokens/s.
    LLMModel.objects.filter(model="demo/tessera").update(extra_params={"tokens_per_second": 15})
    url = _start_slow_chat(page)
    with browser_page(browser, stack.url) as other:
        other.goto(url)
        other.evaluate(WATCH_STOP)
        wait_socket(other)

        # Steer first: the answer is one long step, so the agent reads it when that step ends.
        page.fill("#composer-input", "Guidance: mention penguins")
        page.get_by_test_id("steer-button").click()
        steer = page.locator("[data-testid=pending-item][data-kind=steer]")
        expect(steer).to_contain_text("mention penguins")
        expect(page.locator("#composer-input")).to_have_value("")
        expect(other.locator("[data-testid=pending-item][data-kind=steer]")).to_contain_text("mention penguins")
        # Stop stays, live, in both tabs: the answer still runs.
        expect(page.get_by_test_id("stop-button")).to_be_visible()
        expect(other.get_by_test_id("stop-button")).to_be_visible()

        # Send while it runs: queued (this used to be dropped without a word), in order.
        queued = page.locator("[data-testid=pending-item][data-kind=queued]")
        send(page, "Queued one")
        send(page, "Queued two")  # typed at once, while the first is on its way
        expect(queued).to_have_count(2)
        expect(queued.nth(0)).to_contain_text("Queued one")
        expect(queued.nth(0)).to_contain_text("runs next")
        # The other tab shows the same waiting messages, pushed over its socket. (The web
        # process's pushes and the worker's, when it takes the steer, may arrive in any order:
        # the newest rendering wins.)
        other_queued = other.locator("[data-testid=pending-item][data-kind=queued]")
        expect(other_queued).to_have_count(2)
        expect(other_queued.nth(1)).to_contain_text("Queued two")

        queued.nth(1).get_by_test_id("pending-cancel").click()
        expect(queued).to_have_count(1)
        expect(other.locator("[data-testid=pending-item][data-kind=queued]")).to_have_count(1)
        # Checked once the cancel is done (axe takes seconds on a loaded machine): a steer and a
        # queued message still wait.
        violations = blocking(axe_violations(page))
        shot(page, "steer-queue-waiting")

        # The answer ends, the agent reads the guidance and goes on; then the queued one runs.
        steered = page.get_by_test_id("steered")
        expect(steered).to_contain_text("mention penguins", timeout=60_000)
        expect(page.locator(".turn").first).to_contain_text("Following your guidance: mention penguins", timeout=60_000)
        steered.scroll_into_view_if_needed()
        shot(page, "steer-read-by-the-agent")
        # Stop follows the turns live through the steer and the queued message's own answer.
        assert page.evaluate("window.__stopWrong") == [] and other.evaluate("window.__stopWrong") == []
        expect(page.locator(".turn")).to_have_count(2, timeout=30_000)
        expect(page.locator(".msg-user").last).to_contain_text("Queued one")
        wait_turn_done(page, timeout=60_000)
        expect(page.locator("[data-testid=pending-item]")).to_have_count(0)
        shot(page, "steer-queue-done")

        # The second tab saw it all live: the steer where it was read, and the new exchange.
        expect(other.get_by_test_id("steered")).to_contain_text("mention penguins")
        expect(other.locator(".turn")).to_have_count(2, timeout=15_000)
        wait_turn_done(other, timeout=60_000)
        expect(other.locator("[data-testid=pending-item]")).to_have_count(0)
        expect(page.get_by_test_id("stop-button")).to_be_hidden()
        assert page.evaluate("window.__stopWrong") == [] and other.evaluate("window.__stopWrong") == []

    live = normalized_messages(page)
    page.reload()
    wait_socket(page)
    assert normalized_messages(page) == live
    expect(page.get_by_test_id("steered")).to_contain_text("mention penguins")

    # Every user message is stored, in order; nothing is left waiting.
    first, second = Turn.objects.order_by("id")
    users = list(Message.objects.filter(role="user").order_by("id").values_list("turn_id", "content"))
    assert users == [
        (first.pk, "[demo:slow] Tell me about websockets."),
        (first.pk, "Guidance: mention penguins"),
        (second.pk, "Queued one"),
    ]
    assert first.status == second.status == Turn.Status.COMPLETED
    assert not PendingMessage.objects.exists()
    assert violations == [], describe(violations, "chat with waiting messages")


def test_after_stop_queued_messages_wait_and_can_be_sent(page: Page) -> None:
    _start_slow_chat(page)
    send(page, "Queued after stop")
    queued = page.locator("[data-testid=pending-item][data-kind=queued]")
    expect(queued).to_have_count(1)
    page.get_by_test_id("stop-button").click()
    wait_turn_done(page)
    # Stopped: the queue stays, paused, and says so; nothing else runs.
    expect(queued).to_contain_text("paused")
    expect(page.locator(".turn")).to_have_count(1)
    # Edit it, then send it now.
    queued.get_by_test_id("pending-edit").click()
    queued.get_by_test_id("pending-edit-input").fill("Queued, edited")
    queued.get_by_test_id("pending-save").click()
    expect(queued).to_contain_text("Queued, edited")
    queued.get_by_test_id("pending-send").click()
    expect(page.locator(".turn")).to_have_count(2, timeout=15_000)
    expect(page.locator(".msg-user").last).to_contain_text("Queued, edited")
    wait_turn_done(page)
    expect(queued).to_have_count(0)


TRACK_FORMATTED = r"""() => {
  window.__formatted = {strong: false, li: false, code: false};
  const look = () => {
    const running = document.querySelector("[id^='turn-state-'][data-turn-status='running']");
    if (!running) return;
    for (const tail of document.querySelectorAll('.md-tail')) {
      if (tail.querySelector('strong')) window.__formatted.strong = true;
      if (tail.querySelector('li')) window.__formatted.li = true;
      if (tail.querySelector('pre code')) window.__formatted.code = true;
      if (/\*\*\w[^*]*\*\*/.test(tail.textContent)) window.__formatted.rawBold = true;
    }
  };
  new MutationObserver(look).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def test_a_streamed_answer_shows_bold_lists_and_code_formatted_before_it_ends(page: Page) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, "[demo:slow] show me some code")
    page.wait_for_url("**/chats/*/")
    # A new page: watch it from the start of the answer.
    page.evaluate(TRACK_FORMATTED)
    wait_socket(page)
    page.wait_for_selector(".md-tail li", timeout=20_000)
    shot(page, "streaming-formatted-list")
    wait_turn_done(page)
    seen = page.evaluate("window.__formatted")
    assert seen["strong"] and seen["li"] and seen["code"], seen
    assert not seen.get("rawBold"), "a closed **bold** showed raw in the growing block"
    live = normalized_messages(page)
    page.reload()
    wait_socket(page)
    assert normalized_messages(page) == live


def _chip(page: Page, name: str) -> Any:
    return page.locator('[data-testid="attach-chip"]', has_text=name)


def test_queued_and_steered_messages_carry_their_files(axe_signed_in: Page, tmp_path: Any) -> None:
    page = axe_signed_in
    _start_slow_chat(page)
    notes = tmp_path / "notes.md"
    notes.write_text("# Launch\n\nThe launch moved to Friday.\n")
    plan = tmp_path / "plan.txt"
    plan.write_text("Step one: penguins.\n")

    # Steer with a file: it waits in the steer's item, then goes to the running answer.
    page.set_input_files('[data-testid="attach-input"]', [str(plan)])
    expect(_chip(page, "plan.txt")).to_have_class("file-chip is-ready", timeout=20_000)
    page.fill("#composer-input", "Guidance: use the plan")
    page.get_by_test_id("steer-button").click()
    steer = page.locator("[data-testid=pending-item][data-kind=steer]")
    expect(steer.get_by_test_id("message-file")).to_contain_text("plan.txt")
    expect(page.get_by_test_id("attach-chip")).to_have_count(0)  # went with it

    # Queue a message with a file while the answer runs: shown in the queued item.
    page.set_input_files('[data-testid="attach-input"]', [str(notes)])
    expect(_chip(page, "notes.md")).to_have_class("file-chip is-ready", timeout=20_000)
    send(page, "Queued with notes")
    queued = page.locator("[data-testid=pending-item][data-kind=queued]")
    expect(queued.get_by_test_id("message-file")).to_contain_text("notes.md")
    expect(page.get_by_test_id("attach-chip")).to_have_count(0)
    violations = blocking(axe_violations(page))
    shot(page, "queued-with-files")

    # The steer is read (shown as written), then the queued message runs with its file.
    expect(page.get_by_test_id("steered")).to_contain_text("use the plan", timeout=30_000)
    expect(page.get_by_test_id("steered")).not_to_contain_text("Attached files")
    expect(page.locator(".turn")).to_have_count(2, timeout=30_000)
    last_question = page.locator(".msg-user").last
    expect(last_question).to_contain_text("Queued with notes")
    expect(last_question.get_by_test_id("message-file")).to_contain_text("notes.md")
    wait_turn_done(page)
    shot(page, "queued-files-delivered")

    first, second = Turn.objects.order_by("id")
    steered = Message.objects.get(turn=first, metadata__steered=True)
    assert steered.content == "Guidance: use the plan" and [f.name for f in steered.files.all()] == ["plan.txt"]
    question = Message.objects.get(turn=second, role="user")
    assert [f.name for f in question.files.all()] == ["notes.md"]
    assert violations == [], describe(violations, "waiting messages with files")
