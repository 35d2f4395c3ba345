"""The generic console at GET / (also /console), in headless Chromium against the real reactord binary:
kinds, action forms and their typed inputs come from /openapi.yaml (made from the registered
reactors); a session's state and pulses show live."""
import json

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait


def wait_until(browser, condition, message, timeout=10):
    return WebDriverWait(browser, timeout, poll_frequency=0.05).until(lambda b: condition(), message)


def state(browser):
    text = browser.find_element(By.ID, "state").text
    return json.loads(text) if text.startswith("{") else None


def test_console_sends_typed_actions_and_shows_state_and_pulses(start_reactord, browser):
    server = start_reactord()
    browser.get(server.url + "/")
    wait_until(browser, lambda: [o.text for o in Select(browser.find_element(By.ID, "kind")).options] == ["counter"],
               "the kinds come from the spec")
    browser.find_element(By.ID, "open").click()
    wait_until(browser, lambda: (state(browser) or {}).get("count") == 0, "the new session's state shows")
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
