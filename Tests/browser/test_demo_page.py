"""The counter's demo page at GET /demo, in headless Chromium against the real reactord binary: buttons,
pulses as notices (the same message twice shows twice), the global user changed from outside,
and EventSource resuming with Last-Event-ID after the server closed its stream."""
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from conftest import ADMIN_TOKEN


def text(browser, element_id):
    return browser.find_element(By.ID, element_id).text


def wait_until(browser, condition, message, timeout=10):
    return WebDriverWait(browser, timeout, poll_frequency=0.05).until(lambda b: condition(), message)


def wait_text(browser, element_id, expected, timeout=10):
    wait_until(browser, lambda: text(browser, element_id) == expected,
               f"#{element_id} should read {expected!r}", timeout)


def notices(browser, message):
    return [n for n in browser.find_elements(By.CSS_SELECTOR, "#notices .notice") if n.text == message]


def open_demo(browser, server):
    browser.get(server.url + "/demo")
    wait_text(browser, "connection", "open")
    wait_text(browser, "count", "0")
    session = text(browser, "session")
    assert len(session) == 22, session
    return session


def test_buttons_pulses_and_the_global_user(start_reactord, browser):
    server = start_reactord()
    session = open_demo(browser, server)

    for _ in range(3):
        browser.find_element(By.ID, "increase").click()
    wait_text(browser, "count", "3")
    browser.find_element(By.ID, "decrease").click()
    wait_text(browser, "count", "2")

    # The same message twice is two pulses, so two notices.
    field = browser.find_element(By.ID, "message")
    field.clear()
    field.send_keys("Twice")
    browser.find_element(By.ID, "alert").click()
    wait_until(browser, lambda: len(notices(browser, "Twice")) == 1, "first notice")
    browser.find_element(By.ID, "alert").click()
    wait_until(browser, lambda: len(notices(browser, "Twice")) == 2, "second notice of the same message")

    # A change of the global user from outside reaches the page.
    status, _ = server.request("PUT", "/user", {"id": "u1", "name": "Ada"}, token=ADMIN_TOKEN)
    assert status == 200
    wait_text(browser, "user", "Ada")

    status, current = server.request("GET", f"/sessions/{session}")
    assert status == 200 and current["state"]["count"] == 2
    assert text(browser, "last-event") == str(current["version"])

    status, _ = server.request("DELETE", "/user", token=ADMIN_TOKEN)
    assert status == 204
    wait_text(browser, "user", "nobody")

    # Deleting the session ends the stream with `event: end`; the page stops, no reconnect.
    status, _ = server.request("DELETE", f"/sessions/{session}")
    assert status == 204
    wait_text(browser, "connection", "ended (deleted)")


def test_event_source_resumes_with_last_event_id(start_reactord, browser):
    # The server closes every stream after 2 s without `event: end`; EventSource reconnects
    # after the stream's `retry: 3000` and sends Last-Event-ID.
    server = start_reactord("--stream-max-age", "2")
    session = open_demo(browser, server)
    browser.execute_script(
        "window.opens = 0; window.reactordEvents.addEventListener('open', () => window.opens++);")

    wait_text(browser, "connection", "reconnecting", timeout=6)
    # While the page is disconnected: a state change and a pulse. Pulses are replayed only on
    # a resume that history covers, so the notice can only come from a Last-Event-ID resume.
    status, _ = server.request("POST", "/action", {"session": session, "action": {"type": "increase"}})
    assert status == 200
    status, after = server.request(
        "POST", "/action", {"session": session, "action": {"type": "alert", "message": "while away"}})
    assert status == 200
    assert text(browser, "count") == "0" and not notices(browser, "while away")

    wait_until(browser, lambda: browser.execute_script("return window.opens") >= 1, "a reconnect", timeout=8)
    wait_text(browser, "count", "1")
    wait_until(browser, lambda: len(notices(browser, "while away")) == 1, "the missed pulse, replayed")
    wait_text(browser, "last-event", str(after["version"]))
