"""The Nodes and Queues pages in a real Chromium (see test_status_page_browser.py), with a
supervisor running a job: the node shows with its worker and the job, then, killed with
SIGKILL, as silent; the Queues page pauses the type it runs."""

from __future__ import annotations

import signal
from pathlib import Path

import psutil
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.ui import WebDriverWait

import jobq
from tests.support.apps.supervised_app import Hold
from tests.support.supervising import FAST, supervisor
from tests.support.waiting import wait_for
from tests.system.test_nodes import node_of
from tests.system.test_status_page_browser import PAGE_TIMEOUT, artifacts, browser, server

__all__ = ["browser", "server"]  # fixtures, used by name


def node_state(browser: webdriver.Chrome, address: str, pid: int) -> str | None:
    """The state the Nodes page gives the node of master `pid`, loaded afresh."""
    browser.get(address)
    for section in browser.find_elements(By.CSS_SELECTOR, "section.node"):
        if f"pid {pid}:" in section.find_element(By.TAG_NAME, "h2").text:
            return section.get_attribute("data-state")
    return None


@pytest.mark.databases("postgresql")
def test_the_nodes_page_shows_a_running_supervisor_then_as_silent_once_killed(
    dsn: str, queue: jobq.Queue, server: str, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    job_id = queue.enqueue(Hold(str(tmp_path / "journal"), str(release)))
    with supervisor(dsn, "--pool", "hold:1", *FAST) as running:
        wait_for(
            "the node running the job",
            lambda: any(
                w["running"] for w in (node_of(dsn, running.pid) or {"workers": []})["workers"]
            ),
            timeout=60.0,
        )
        assert node_state(browser, f"{server}nodes", running.pid) == "running"
        link = browser.find_element(By.CSS_SELECTOR, f'section.node a[href$="/jobs/{job_id}"]')
        assert link.text == str(job_id)
        browser.save_screenshot(str(artifacts() / "nodes.png"))

        browser.get(f"{server}queues")
        row = browser.find_element(By.CSS_SELECTOR, 'tr[data-type="hold"]')
        button = row.find_element(By.XPATH, ".//button[text()='Pause']")
        button.click()
        WebDriverWait(browser, PAGE_TIMEOUT).until(staleness_of(button))
        assert browser.current_url.endswith("/queues")
        assert "Jobs of type hold are paused" in browser.page_source
        assert queue.paused() == {"hold"}
        browser.save_screenshot(str(artifacts() / "queues.png"))

        psutil.Process(running.pid).send_signal(signal.SIGKILL)
        wait_for(
            "the Nodes page to show the killed node as silent",
            lambda: node_state(browser, f"{server}nodes?silent_after=1", running.pid) == "silent",
            timeout=60.0,
        )
        browser.save_screenshot(str(artifacts() / "nodes-silent.png"))
        release.touch()
