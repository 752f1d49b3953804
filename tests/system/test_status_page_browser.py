"""The status page in a real headless browser: Debian's chromium, driven by its chromedriver.

Screenshots are kept in test-artifacts/status-page/ at the repository's top (or in
$JOBQ_TEST_ARTIFACTS/status-page/): the overview, the failed job, and the job after retry.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

import jobq
from tests.support.jobs import Boom, Noop
from tests.support.paths import REPO

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
STARTUP_TIMEOUT = 30.0
PAGE_TIMEOUT = 15.0

ROOT = REPO


def artifacts() -> Path:
    base = Path(os.environ.get("JOBQ_TEST_ARTIFACTS") or ROOT / "test-artifacts")
    path = base / "status-page"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def server(dsn: str, queue: jobq.Queue) -> Iterator[str]:
    """`jobq web` on a free loopback port, on the test's database; yields its address."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBQ_WEB_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "jobq", "web", "--dsn", dsn, "--bind", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        yield serving_address(process)
    finally:
        process.terminate()
        process.wait(timeout=STARTUP_TIMEOUT)


def serving_address(process: subprocess.Popen[str]) -> str:
    """The address from `jobq web: serving on http://...`, read within STARTUP_TIMEOUT."""
    assert process.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + STARTUP_TIMEOUT
    with selectors.DefaultSelector() as selector:
        selector.register(process.stderr, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=deadline - time.monotonic()):
                break
            line = process.stderr.readline()
            if not line:
                break
            seen.append(line)
            if "serving on " in line:
                return line.split("serving on ", 1)[1].strip()
    raise AssertionError(f"jobq web did not start; it said: {''.join(seen)}")


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # No sandbox: the tests may run as root, where chromium's sandbox refuses to start.
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1100,900"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.mark.databases("sqlite")
def test_an_operator_retries_a_failed_job_from_the_browser(
    queue: jobq.Queue, server: str, browser: webdriver.Chrome
) -> None:
    shots = artifacts()
    queue.enqueue_many([Noop() for _ in range(12)])
    queue.process_jobs(9)
    failed = queue.enqueue(
        Boom("payment gateway said 503 <script>alert(1)</script>"),
        retry=jobq.RetryPolicy(max_attempts=1),
    )
    queue.process_jobs(1, type="boom")

    browser.get(server)
    assert browser.find_element(By.TAG_NAME, "h1").text == "Overview"
    assert "boom" in browser.find_element(By.ID, "counts").text
    browser.save_screenshot(str(shots / "overview.png"))

    browser.find_element(By.LINK_TEXT, "Failed").click()
    browser.find_element(By.LINK_TEXT, str(failed)).click()
    assert browser.find_element(By.ID, "status").text == "failed"
    assert "<script>alert(1)</script>" in browser.find_element(By.ID, "last-error").text
    browser.save_screenshot(str(shots / "failed-job.png"))

    browser.find_element(By.ID, "retry").click()
    # Only the page the retry redirects to has a notice: the job page as the browser left it
    # has none, and its elements go stale as it is replaced.
    notice = WebDriverWait(browser, PAGE_TIMEOUT).until(
        lambda driver: driver.find_elements(By.CLASS_NAME, "notice")
    )
    assert "was put back: it is pending" in notice[0].text
    assert browser.find_element(By.ID, "status").text == "pending"
    browser.save_screenshot(str(shots / "retried-job.png"))
    record = queue.get(failed)
    assert record is not None
    assert record.status == "pending"
