"""The operator's console in a real Chromium (see test_status_page_browser.py): the job's
story, the filters, and the actions on many jobs, on every database."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.ui import WebDriverWait

import jobq
from tests.support.jobs import Boom, Record
from tests.system.test_status_page_browser import PAGE_TIMEOUT, artifacts, browser, server

__all__ = ["browser", "server"]  # fixtures, used by name

SCRIPT = "<script>alert('owned')</script>"


def listed(browser: webdriver.Chrome) -> list[int]:
    """The ids the Jobs list shows, in its order."""
    links = browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr a[href]")
    return [int(link.text) for link in links]


def no_script_from_data(browser: webdriver.Chrome) -> None:
    scripts = browser.execute_script(
        "return [...document.scripts].map(s => s.textContent).join(' ')"
    )
    assert "alert" not in scripts


def fill(browser: webdriver.Chrome, **fields: str) -> None:
    """Open More filters, type each field, and submit the filter form."""
    form = browser.find_element(By.ID, "filter")
    form.find_element(By.TAG_NAME, "summary").click()
    for name, text in fields.items():
        field = form.find_element(By.NAME, name)
        field.clear()
        field.send_keys(text)
    form.find_element(By.CSS_SELECTOR, "button").click()
    WebDriverWait(browser, PAGE_TIMEOUT).until(staleness_of(form))


def test_filters_by_payload_field_and_error_text_find_the_right_jobs(
    queue: jobq.Queue, server: str, browser: webdriver.Chrome
) -> None:
    ours = queue.enqueue(Record({"customer": {"id": 42}}))
    queue.enqueue(Record({"customer": {"id": 420}}))
    queue.enqueue(Record({"customer": "42"}))
    gateway = queue.enqueue(Boom(f"gateway said 503 {SCRIPT}"), retry=jobq.RetryPolicy(1))
    queue.enqueue(Boom("gateway said 502"), retry=jobq.RetryPolicy(1))
    assert queue.process_jobs(2, type=Boom.type) == 2

    browser.get(f"{server}jobs")
    fill(browser, field="value.customer.id", equals="42")
    assert listed(browser) == [ours]
    query = parse_qs(urlsplit(browser.current_url).query)
    assert query["field"] == ["value.customer.id"]
    assert query["equals"] == ["42"]
    browser.save_screenshot(str(artifacts() / "jobs-by-payload.png"))

    browser.get(f"{server}jobs?status=failed")
    fill(browser, error="SAID 503 <script>")
    assert listed(browser) == [gateway]
    no_script_from_data(browser)
    assert browser.find_element(By.NAME, "error").get_attribute("value") == "SAID 503 <script>"
    # The bookmark: the same address in a fresh page lists the same jobs.
    address = browser.current_url
    browser.get(address)
    assert listed(browser) == [gateway]
