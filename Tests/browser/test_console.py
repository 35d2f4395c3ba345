"""The generic console at GET / (also /console), in headless Chromium against the real reactord binary:
kinds, action forms and their typed inputs come from /openapi.yaml (made from the registered
reactors); a session's state and pulses show live; its history panel shows a session's action
log, its state at any kept version with the diff from the version before, and forks from one."""
import json

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from conftest import ADMIN_TOKEN


def wait_until(browser, condition, message, timeout=10):
    # The timeline's rows are replaced on each refresh: a row read as it goes is read again.
    return WebDriverWait(browser, timeout, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,)) \
        .until(lambda b: condition(), message)


def state(browser):
    text = browser.find_element(By.ID, "state").text
    return json.loads(text) if text.startswith("{") else None


def open_counter_session(browser, server):
    """Loads the console, whose kinds come from the spec, and opens a counter session in it."""
    browser.get(server.url + "/")
    wait_until(browser, lambda: [o.text for o in Select(browser.find_element(By.ID, "kind")).options] == ["counter"],
               "the kinds come from the spec")
    browser.find_element(By.ID, "open").click()
    wait_until(browser, lambda: (state(browser) or {}).get("count") == 0, "the new session's state shows")


def test_console_sends_typed_actions_and_shows_state_and_pulses(start_reactord, browser):
    server = start_reactord()
    open_counter_session(browser, server)
    forms = [legend.text for legend in browser.find_elements(By.CSS_SELECTOR, "#actions legend")]
    assert forms == ["increase", "decrease", "alert", "doSomeAction"], forms

    browser.find_element(By.ID, "send-increase").click()
    browser.find_element(By.ID, "send-increase").click()
    wait_until(browser, lambda: state(browser)["count"] == 2, "count follows the actions")

    message = browser.find_element(By.CSS_SELECTOR, "#actions input[name=message]")
    message.send_keys("Hello")
    browser.find_element(By.ID, "send-alert").click()
    wait_until(browser, lambda: 'pulse alertMessage: "Hello"' in browser.find_element(By.ID, "log").text,
               "the pulse is logged")
    assert state(browser)["alertMessage"] == "Hello"

    # A required field left empty: the server's 422 names it, and the console shows it.
    message.clear()
    browser.execute_script("document.querySelector('#actions input[name=message]').dataset.required = 'false'")
    browser.find_element(By.ID, "send-alert").click()
    wait_until(browser, lambda: "422" in browser.find_element(By.ID, "log").text and "message" in
               browser.find_element(By.ID, "log").text, "the problem's detail is shown")


def timeline(browser):
    """The timeline's rows as (number, cause, action text, versions)."""
    rows = browser.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")
    return [(row.get_attribute("data-number"), row.get_attribute("data-cause"),
             row.find_element(By.CSS_SELECTOR, "td.action").text, row.find_element(By.CSS_SELECTOR, "td.versions").text)
            for row in rows]


def scrubbed(browser):
    text = browser.find_element(By.ID, "scrubbed-state").text
    return json.loads(text) if text.startswith("{") else None


def diff_lines(browser):
    return [line.text for line in browser.find_elements(By.CSS_SELECTOR, "#diff div")]


def scrub(browser, version):
    """Moves the range input as a user's drag does: its value, then an input event."""
    browser.execute_script("const s = document.getElementById('scrub'); s.value = arguments[0];"
                           "s.dispatchEvent(new Event('input'))", str(version))


def small_pages(browser, limit):
    """Makes the console ask for pages of `limit` (it asks for 1000) and records what it asks:
    a few entries then take several pages, which it must follow through `next`."""
    browser.execute_script("""
        window.asked = [];
        const fetch = window.fetch;
        window.fetch = (url, options) => {
          url = String(url).replace("limit=1000", `limit=${arguments[0]}`);
          window.asked.push(url);
          return fetch(url, options);
        };""", limit)


def asked(browser, fragment):
    return [url for url in browser.execute_script("return window.asked") if fragment in url]


def test_console_history_timeline_scrub_diff_and_fork(start_reactord, browser):
    server = start_reactord()
    open_counter_session(browser, server)
    original = browser.find_element(By.ID, "session").text.removeprefix("session ")
    # The history panel follows the session the console opened: it is the one selected.
    assert Select(browser.find_element(By.ID, "sessions")).first_selected_option.get_attribute("value") == original
    assert original in browser.find_element(By.ID, "history-session").text

    for count in (1, 2, 3):
        browser.find_element(By.ID, "send-increase").click()
        wait_until(browser, lambda: state(browser)["count"] == count, "count follows the actions")
    browser.find_element(By.CSS_SELECTOR, "#actions input[name=message]").send_keys("Hello")
    browser.find_element(By.ID, "send-alert").click()
    wait_until(browser, lambda: 'pulse alertMessage: "Hello"' in browser.find_element(By.ID, "log").text,
               "the pulse is logged")
    # The timeline refreshes by itself after each action the console sends.
    wait_until(browser, lambda: [row[1] for row in timeline(browser)] == ["action"] * 4,
               "the console's actions are in the timeline")

    status, _ = server.request("PUT", "/user", {"id": "u1", "name": "Ada"}, token=ADMIN_TOKEN)
    assert status == 200
    wait_until(browser, lambda: state(browser)["user"] == {"id": "u1", "name": "Ada"}, "the user reaches the session")
    browser.find_element(By.ID, "refresh").click()
    wait_until(browser, lambda: len(timeline(browser)) == 5, "refresh shows the user's change")
    rows = timeline(browser)
    assert [(number, cause) for number, cause, _, _ in rows] == \
        [("1", "action"), ("2", "action"), ("3", "action"), ("4", "action"), ("5", "user")], rows
    assert [json.loads(text) for _, _, text, _ in rows[:4]] == \
        [{"type": "increase"}] * 3 + [{"type": "alert", "message": "Hello"}], rows
    assert rows[4][2] == "user changed", rows
    assert [versions for _, _, _, versions in rows[:3]] == ["v1", "v2", "v3"], rows

    # The scrubber spans 0..current; the refresh leaves it at the newest version.
    current = server.request("GET", f"/sessions/{original}")[1]["version"]
    assert browser.find_element(By.ID, "scrub").get_attribute("max") == str(current)
    wait_until(browser, lambda: (scrubbed(browser) or {}).get("user") == {"id": "u1", "name": "Ada"},
               "the newest state shows")

    scrub(browser, 2)
    wait_until(browser, lambda: (scrubbed(browser) or {}).get("count") == 2, "the state at version 2 shows")
    wait_until(browser, lambda: diff_lines(browser) == ["count: 1 → 2"], "the diff against version 1")
    assert browser.find_element(By.ID, "history-error").text == ""

    # A timeline row jumps to its entry's version: the alert set the message (and the user's
    # row, clicked after, its change).
    browser.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")[4].click()
    wait_until(browser, lambda: 'user: null → {"id":"u1","name":"Ada"}' in diff_lines(browser),
               "the user's entry: the user field set")
    browser.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")[1].click()
    wait_until(browser, lambda: browser.find_element(By.ID, "scrub").get_attribute("value") == "2"
               and diff_lines(browser) == ["count: 1 → 2"], "the second increase's row shows version 2")

    browser.find_element(By.ID, "fork").click()
    wait_until(browser, lambda: browser.find_element(By.ID, "forked").get_attribute("data-session"),
               "the fork's id shows")
    forked = browser.find_element(By.ID, "forked").get_attribute("data-session")
    assert forked != original and forked in browser.find_element(By.ID, "forked").text
    status, body = server.request("GET", f"/sessions/{forked}")
    assert status == 200 and body["state"]["count"] == 2 and body["version"] == 0, body
    # The console follows the fork: its state view, its forms, its history; the original is untouched.
    assert browser.find_element(By.ID, "session").text == f"session {forked}"
    wait_until(browser, lambda: (state(browser) or {}).get("count") == 2, "the console shows the fork's state")
    wait_until(browser, lambda: forked in browser.find_element(By.ID, "history-session").text, "history follows the fork")
    browser.find_element(By.ID, "send-increase").click()
    wait_until(browser, lambda: state(browser)["count"] == 3, "actions go to the fork")
    assert server.request("GET", f"/sessions/{original}")[1]["state"]["count"] == 3
    assert server.request("GET", f"/sessions/{forked}")[1]["state"]["count"] == 3

    # Listing needs the admin token: without it the server's 401 shows; with it, both sessions.
    browser.find_element(By.ID, "list-sessions").click()
    wait_until(browser, lambda: "401" in browser.find_element(By.ID, "history-error").text, "no token, no list")
    browser.find_element(By.ID, "admin-token").send_keys(ADMIN_TOKEN)
    small_pages(browser, 1)
    browser.find_element(By.ID, "list-sessions").click()
    listed = lambda: {o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#sessions option.listed")}
    wait_until(browser, lambda: {original, forked} <= listed(), "the listing shows both sessions, a page each")
    assert browser.find_element(By.ID, "history-error").text == ""
    assert len(asked(browser, "sessions?limit=1")) == 3, asked(browser, "sessions?")

    # Picking the original from the list shows its history again, scrubbed to its newest version.
    Select(browser.find_element(By.ID, "sessions")).select_by_value(original)
    wait_until(browser, lambda: original in browser.find_element(By.ID, "history-session").text
               and len(timeline(browser)) == 5, "the original's timeline")


def test_console_history_shows_why_a_state_is_not_kept(start_reactord, browser):
    server = start_reactord("--history", "2")
    status, created = server.request("POST", "/sessions", {"reactor": "counter"})
    assert status == 201
    session = created["session"]
    for _ in range(5):
        assert server.request("POST", f"/sessions/{session}/actions", {"type": "increase"})[0] == 200
    browser.get(server.url + "/")
    # A pasted id: the history of a session this console did not open, two entries a page.
    wait_until(browser, lambda: browser.execute_script("return document.getElementById('kind').options.length"),
               "the console's script has run")
    small_pages(browser, 2)
    browser.find_element(By.ID, "session-id").send_keys(session)
    browser.find_element(By.ID, "show-session").click()
    wait_until(browser, lambda: [row[0] for row in timeline(browser)] == ["1", "2", "3", "4", "5"],
               "the pasted session's whole timeline, in order")
    assert [url.split("?")[1] for url in asked(browser, "/actions")] == \
        ["limit=2", "limit=2&after=2", "limit=2&after=4"], asked(browser, "/actions")
    wait_until(browser, lambda: (scrubbed(browser) or {}).get("count") == 5, "its newest state")
    scrub(browser, 1)
    wait_until(browser, lambda: "no longer kept" in browser.find_element(By.ID, "history-error").text,
               "the server's detail says why version 1 cannot be shown")
    assert browser.find_element(By.ID, "scrubbed-state").text == ""
    # An unknown id: the server's 404 detail.
    browser.find_element(By.ID, "session-id").clear()
    browser.find_element(By.ID, "session-id").send_keys("no-such-session")
    browser.find_element(By.ID, "show-session").click()
    wait_until(browser, lambda: "404" in browser.find_element(By.ID, "history-error").text, "an unknown session")
