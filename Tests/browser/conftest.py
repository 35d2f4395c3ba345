"""Fixtures for the browser tests: the real reactord binary, a static file server on another
loopback port (another origin), and headless Chromium driven by selenium.

The binary comes from `--reactord PATH` or the REACTORD_BIN environment variable (default:
.build/debug/reactord). Screenshots go to test-artifacts/ (or REACTORD_ARTIFACTS).
"""
import functools
import http.server
import json
import os
import pathlib
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

ROOT = pathlib.Path(__file__).resolve().parents[2]
ADMIN_TOKEN = "browser-test-token"


def pytest_addoption(parser):
    parser.addoption("--reactord", default=None, help="path of the reactord binary")


@pytest.fixture(scope="session")
def reactord_bin(request):
    path = request.config.getoption("--reactord") or os.environ.get("REACTORD_BIN") \
        or str(ROOT / ".build" / "debug" / "reactord")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no reactord binary at {path}; build it, then pass --reactord or set REACTORD_BIN")
    return path


@pytest.fixture(scope="session")
def artifacts():
    path = pathlib.Path(os.environ.get("REACTORD_ARTIFACTS", ROOT / "test-artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


class Reactord:
    """One reactord process on a free loopback port; its log is kept for failure reports."""

    def __init__(self, binary, *args):
        self.log = []
        self.process = subprocess.Popen(
            [binary, "--host", "127.0.0.1", "--port", "0", "--admin-token", ADMIN_TOKEN, "--store", "memory", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        port = threading.Event()
        self.port = None

        def read():
            for line in self.process.stdout:
                self.log.append(line.rstrip("\n"))
                match = re.search(r"\bport=(\d+)", line)
                if match and self.port is None:
                    self.port = int(match.group(1))
                    port.set()
        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 20
        while not port.wait(0.1) and self.process.poll() is None and time.monotonic() < deadline:
            pass
        if self.port is None:
            self.stop()
            raise RuntimeError("reactord did not report its port:\n" + "\n".join(self.log))
        self.url = f"http://127.0.0.1:{self.port}"

    def request(self, method, path, body=None, token=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=5) as response:
                text = response.read().decode()
                return response.status, (json.loads(text) if text else None)
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read().decode() or "null")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


@pytest.fixture
def start_reactord(reactord_bin):
    started = []

    def start(*args):
        server = Reactord(reactord_bin, *args)
        started.append(server)
        return server
    yield start
    for server in started:
        server.stop()


class StaticSite:
    """Serves a folder on its own loopback port: another origin than reactord's."""

    def __init__(self, folder):
        handler = functools.partial(QuietHandler, directory=str(folder))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def static_site():
    sites = []

    def start(folder):
        site = StaticSite(folder)
        sites.append(site)
        return site
    yield start
    for site in sites:
        site.stop()


def _chromium_paths():
    browser = os.environ.get("CHROMIUM_BIN") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("CHROMEDRIVER_BIN") or shutil.which("chromedriver")
    if not browser or not driver:
        pytest.fail("chromium and chromedriver are needed (Debian: apt-get install chromium chromium-driver)")
    return browser, driver


@pytest.fixture
def browser(request, artifacts):
    binary, driver_path = _chromium_paths()
    options = Options()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1000,900"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(20)
    yield driver
    # Keep what the page looked like, passed or failed, and its console.
    name = request.node.name
    try:
        driver.save_screenshot(str(artifacts / f"{name}.png"))
        console = "\n".join(f"{e['level']} {e['message']}" for e in driver.get_log("browser"))
        (artifacts / f"{name}.console.log").write_text(console)
    finally:
        driver.quit()
