"""The operator's console in a real Chromium (see test_status_page_browser.py): the job's
story, the filters, and the actions on many jobs, on every database."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.ui import WebDriverWait

import jobq
from tests.support.jobs import Boom, Record
from tests.support.paths import REPO
from tests.support.web import jobq_web
from tests.system.test_status_page_browser import PAGE_TIMEOUT, artifacts, browser, server

__all__ = ["browser", "server"]  # fixtures, used by name

SCRIPT = "<script>alert('owned')</script>"
NO_RETRY = jobq.RetryPolicy(max_attempts=1)
# A bulk action on 5,000 jobs is one request that acts on each.
BULK_TIMEOUT = 120.0
# The overview refreshes every 5 s (views.LIVE_EVERY): a few rounds.
LIVE_TIMEOUT = 30.0


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


# Failing 5,000 jobs one attempt at a time takes a minute or more on a loaded machine.
@pytest.mark.timeout(400)
@pytest.mark.databases("sqlite")
def test_retry_all_that_match_retries_5000_failed_jobs_and_nothing_else(
    queue: jobq.Queue, server: str, browser: webdriver.Chrome
) -> None:
    bad = queue.enqueue_many([Boom(f"KeyError: 'region' {n}") for n in range(5000)], retry=NO_RETRY)
    fine = queue.enqueue_many([Boom("timeout") for _ in range(50)], retry=NO_RETRY)
    assert queue.process_jobs(len(bad) + len(fine), type=Boom.type) == len(bad) + len(fine)

    browser.get(f"{server}jobs?status=failed")
    fill(browser, error="'region'")
    browser.save_screenshot(str(artifacts() / "jobs-filtered-for-bulk.png"))
    form = browser.find_element(By.ID, "act-all")
    browser.set_page_load_timeout(BULK_TIMEOUT)
    browser.find_element(By.ID, "all-retry").click()
    WebDriverWait(browser, BULK_TIMEOUT).until(staleness_of(form))

    notice = browser.find_element(By.CLASS_NAME, "notice").text
    assert notice == "Retried 5,000 jobs."
    browser.save_screenshot(str(artifacts() / "bulk-retried.png"))
    assert queue.counts(Boom.type) == {"pending": 5000, "failed": 50}
    assert {job.id for job in queue.jobs(jobq.Status.FAILED, limit=100)} == set(fine)


@pytest.mark.databases("sqlite")
def test_a_read_only_page_offers_no_action_and_refuses_every_post(
    dsn: str, queue: jobq.Queue, browser: webdriver.Chrome
) -> None:
    job_id = queue.enqueue(Boom("x"), retry=NO_RETRY)
    assert queue.process_jobs(1, type=Boom.type) == 1
    with jobq_web(dsn, "--read-only", cwd=REPO) as address:
        for path in ("", "jobs", "jobs?status=failed&error=x", f"jobs/{job_id}", "schedules"):
            browser.get(address + path)
            assert browser.find_elements(By.CSS_SELECTOR, "form[method=post]") == [], path
        for path in (f"jobs/{job_id}/retry", f"jobs/{job_id}/cancel", "jobs/act", "pause",
                     "resume", "limit", "rate"):  # fmt: skip
            form = {"action": "retry", "scope": "all", "status": "failed", "type": "boom"}
            refused = httpx.post(address + path, data=form)
            assert refused.status_code == 405, path
    assert queue.get(job_id).status is jobq.Status.FAILED  # type: ignore[union-attr]


@pytest.mark.databases("sqlite")
def test_the_overview_moves_without_a_reload_while_jobs_complete(
    queue: jobq.Queue, server: str, browser: webdriver.Chrome
) -> None:
    queue.enqueue(Record(0))
    assert queue.process_jobs(1) == 1
    browser.get(server)
    caption = browser.find_element(By.CSS_SELECTOR, "#chart-0 figcaption").text
    assert caption.startswith("all types: 1 completed")
    browser.execute_script("window.loadedOnce = true")

    queue.enqueue_many([Record(n) for n in range(4)])
    assert queue.process_jobs(4) == 4

    def moved(driver: webdriver.Chrome) -> bool:
        text = driver.find_element(By.CSS_SELECTOR, "#chart-0 figcaption").text
        return text.startswith("all types: 5 completed")

    WebDriverWait(browser, LIVE_TIMEOUT).until(moved)
    assert browser.execute_script("return window.loadedOnce") is True, "no reload"
    browser.save_screenshot(str(artifacts() / "overview-live.png"))
