"""CORS seen from a real browser: a page served from another loopback port (another origin)
follows a session with EventSource and POSTs an action as JSON, which needs a preflight.
Allowed origin: both work. Any other origin: the browser blocks both and the session is untouched.
"""
import pathlib

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

SITE = pathlib.Path(__file__).parent / "cross-origin"


def text(browser, element_id):
    return browser.find_element(By.ID, element_id).text


def wait_text(browser, element_id, expected, timeout=10):
    WebDriverWait(browser, timeout, poll_frequency=0.05).until(
        lambda b: text(b, element_id) == expected,
        f"#{element_id} should read {expected!r}")


def open_page(browser, site, server, session):
    browser.get(f"{site.origin}/index.html?api={server.url}&session={session}")


def test_allowed_origin_uses_event_source_and_post_action(start_reactord, static_site, browser):
    site = static_site(SITE)
    # Streams closed after 2 s: the cross-origin EventSource must also reconnect (with
    # Last-Event-ID, which is no CORS-safelisted header) and resume.
    server = start_reactord("--cors-origins", site.origin, "--stream-max-age", "2")
    status, created = server.request("POST", "/sessions", {"reactor": "counter"})
    assert status == 201
    session = created["session"]
    open_page(browser, site, server, session)
    wait_text(browser, "stream", "open")
    wait_text(browser, "post", "200")
    wait_text(browser, "count", "1")     # the POST's state, back through the stream
    status, current = server.request("GET", f"/sessions/{session}")
    assert current["state"]["count"] == 1

    wait_text(browser, "stream", "reconnecting", timeout=6)
    server.request("POST", "/action", {"session": session, "action": {"type": "increase"}})
    wait_text(browser, "stream", "open", timeout=8)
    wait_text(browser, "count", "2")


def test_other_origin_is_blocked(start_reactord, static_site, browser):
    site = static_site(SITE)
    server = start_reactord("--cors-origins", "http://127.0.0.1:1")
    status, created = server.request("POST", "/sessions", {"reactor": "counter"})
    assert status == 201
    open_page(browser, site, server, created["session"])
    wait_text(browser, "stream", "failed")
    wait_text(browser, "post", "blocked: TypeError")
    assert text(browser, "count") == "–"
    # The preflight was refused, so the POST never reached the session.
    status, current = server.request("GET", f"/sessions/{created['session']}")
    assert current["state"]["count"] == 0 and current["version"] == 0
