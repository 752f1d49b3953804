"""The console's looks in a real Chromium (see test_status_page_browser.py): every page on a
laptop, on a phone without sideways scrolling, and in the dark scheme the system asks for.

Its screenshots (console-*.png in the artifacts directory) are those docs/images/ keeps."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

import jobq
from tests.support.jobs import Boom, Noop, Record
from tests.system.test_status_page_browser import artifacts, browser, server

__all__ = ["browser", "server"]  # fixtures, used by name

NO_RETRY = jobq.RetryPolicy(max_attempts=1)
LAPTOP = (1100, 900)
PHONE = (390, 844)
# The page's background in each scheme (base.html's --page).
BACKGROUND = {"light": "rgb(246, 247, 249)", "dark": "rgb(20, 24, 31)"}


class Step(jobq.Job):
    """A step of the seeded workflow."""

    type = "step"

    def handle(self) -> None:
        pass


def seeded(queue: jobq.Queue) -> dict[str, str]:
    """Jobs of every kind: completed, failed with a traceback, a workflow and a batch; each
    page's path."""
    queue.enqueue_many([Record(n) for n in range(30)])
    assert queue.process_jobs(24) == 24
    failed = queue.enqueue(Boom("payment gateway said 503"), retry=NO_RETRY)
    for _ in range(3):
        queue.enqueue(Boom("KeyError: 'region'"), retry=NO_RETRY)
    assert queue.process_jobs(4, type=Boom.type) == 4
    fetch = queue.enqueue(Step())
    parts = queue.enqueue_many([Step(), Step()], after=[fetch])
    queue.enqueue(Step(), after=parts)
    assert queue.process_jobs(1, type=Step.type) == 1  # the fetch completes
    with queue.batch(then=Noop()) as batch:
        batch.enqueue_many([Noop() for _ in range(4)])
    assert queue.process_jobs(2, type=Noop.type) == 2  # two members do
    return {
        "overview": "",
        "jobs": "jobs",
        "failed-job": f"jobs/{failed}",
        "workflow": f"jobs/{parts[0]}",
        "parent": f"jobs/{fetch}",
        "batch": f"jobs?batch={batch.id}",
        "schedules": "schedules",
    }


@pytest.fixture
def screen(browser: webdriver.Chrome) -> Iterator[webdriver.Chrome]:
    """The browser, put back to a laptop's light screen after the test."""
    yield browser
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def look(browser: webdriver.Chrome, size: tuple[int, int], scheme: str) -> None:
    width, height = size
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    features = [{"name": "prefers-color-scheme", "value": scheme}]
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": features})


def shown(browser: webdriver.Chrome, address: str, scheme: str) -> None:
    """Open the page, and check it is drawn in the scheme asked for and fits the width."""
    browser.get(address)
    assert browser.find_element(By.TAG_NAME, "h1").text
    background = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
    assert background == BACKGROUND[scheme], address
    sideways = browser.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert sideways <= 0, f"{address} scrolls sideways by {sideways}px"


@pytest.mark.databases("sqlite")
def test_every_page_fits_a_laptop_and_a_phone_in_light_and_dark(
    queue: jobq.Queue, server: str, screen: webdriver.Chrome
) -> None:
    pages = seeded(queue)
    shots = artifacts()
    for size, device in ((LAPTOP, "laptop"), (PHONE, "phone")):
        for scheme in ("light", "dark"):
            look(screen, size, scheme)
            for name, path in pages.items():
                if name == "parent":
                    continue
                shown(screen, server + path, scheme)
                suffix = "" if (device, scheme) == ("laptop", "light") else f"-{device}-{scheme}"
                screen.save_screenshot(str(shots / f"console-{name}{suffix}.png"))


@pytest.mark.databases("sqlite")
def test_a_workflow_s_boxes_are_links_in_the_browser(
    queue: jobq.Queue, server: str, screen: webdriver.Chrome
) -> None:
    pages = seeded(queue)
    screen.get(server + pages["workflow"])
    boxes = screen.find_elements(By.CSS_SELECTOR, "#workflow svg a")
    assert len(boxes) == 3  # the fetch, this part, the report
    boxes[0].click()
    parent = pages["parent"].removeprefix("jobs/")
    assert screen.find_element(By.TAG_NAME, "h1").text.startswith(f"Job {parent} ")
