"""The status page in a real headless browser: Debian's chromium, driven by its chromedriver.

Screenshots are kept in test-artifacts/status-page/ at the repository's top (or in
$JOBQ_TEST_ARTIFACTS/status-page/): the overview, the failed job, and the job after retry.
"""

from __future__ import annotations

import os
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
from tests.support.web import jobq_web

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PAGE_TIMEOUT = 15.0

ROOT = REPO
# A name of another site, resolved by the browser to loopback: a DNS rebinding, played out.
REBOUND = "attacker.example"


def artifacts() -> Path:
    base = Path(os.environ.get("JOBQ_TEST_ARTIFACTS") or ROOT / "test-artifacts")
    path = base / "status-page"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def server(dsn: str, queue: jobq.Queue) -> Iterator[str]:
    """`jobq web` on a free loopback port, on the test's database; yields its address."""
    with jobq_web(dsn, cwd=ROOT) as address:
        yield address


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # No sandbox: the tests may run as root, where chromium's sandbox refuses to start.
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1100,900",
                     f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1"):  # fmt: skip
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
    assert "was put back to pending" in notice[0].text
    assert browser.find_element(By.ID, "status").text == "pending"
    browser.save_screenshot(str(shots / "retried-job.png"))
    record = queue.get(failed)
    assert record is not None
    assert record.status == "pending"


@pytest.mark.databases("sqlite")
def test_a_page_on_a_rebound_name_sees_no_job(
    queue: jobq.Queue, server: str, browser: webdriver.Chrome
) -> None:
    failed = queue.enqueue(Boom("card 4111-1111"), retry=jobq.RetryPolicy(max_attempts=1))
    queue.process_jobs(1, type="boom")

    browser.get(server.replace("127.0.0.1", REBOUND) + f"jobs/{failed}")

    body = browser.find_element(By.TAG_NAME, "body").text
    assert "not served on" in body, body
    assert "4111" not in browser.page_source
    browser.get(f"{server}jobs/{failed}")
    assert "4111" in browser.find_element(By.ID, "last-error").text
