"""A job's parents and children drawn on its page, and a batch's progress and `then` job."""

from __future__ import annotations

import re

import pytest
from werkzeug.test import Client

import jobq
from jobq.web import Credentials, make_app
from jobq.web.workflow import SHOWN
from tests.support.jobs import Noop

SCRIPT = "<script>alert('owned')</script>"


class Marked(jobq.Job):
    type = SCRIPT

    def handle(self) -> None:
        pass


@pytest.fixture
def client(queue: jobq.Queue) -> Client:
    return Client(make_app(queue, credentials=Credentials()))


def page(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_data(as_text=True)


def drawn(html: str) -> list[int]:
    """The jobs the workflow graph links, in the order drawn: parents, the job, children."""
    figure = re.search(r'<figure class="workflow" id="workflow">(.*?)</figure>', html, re.S)
    assert figure, html
    return [int(n) for n in re.findall(r'<a href="/jobs/(\d+)"', figure.group(1))]


@pytest.mark.databases("sqlite", "postgresql", "mariadb")
def test_a_job_in_a_workflow_draws_its_parents_and_children_as_links(
    queue: jobq.Queue, client: Client
) -> None:
    first, second = queue.enqueue(Noop()), queue.enqueue(Noop())
    middle = queue.enqueue(Noop(), after=[first, second])
    last = queue.enqueue(Noop(), after=[middle])
    alone = queue.enqueue(Noop())

    html = page(client, f"/jobs/{middle}")
    assert sorted(drawn(html)[:2]) == [first, second]
    assert drawn(html)[2:] == [middle, last]
    assert f'<a href="/jobs/{middle}" aria-current="page">' in html
    assert "after 2 job(s) · before 1 job(s)" in html
    assert drawn(page(client, f"/jobs/{last}")) == [middle, last]
    assert 'id="workflow"' not in page(client, f"/jobs/{alone}"), "no graph outside a workflow"


@pytest.mark.databases("sqlite")
def test_a_wide_fan_out_draws_some_children_and_counts_the_rest(
    queue: jobq.Queue, client: Client
) -> None:
    root = queue.enqueue(Noop())
    queue.enqueue_many([Noop() for _ in range(SHOWN + 3)], after=[root])
    html = page(client, f"/jobs/{root}")
    assert len(drawn(html)) == 1 + SHOWN
    assert f"before {SHOWN + 3} job(s) (3 not drawn)" in html


@pytest.mark.databases("sqlite", "postgresql", "mariadb")
def test_a_batch_member_s_graph_marks_the_then_job_and_the_batch_page_shows_progress(
    queue: jobq.Queue, client: Client
) -> None:
    with queue.batch(then=Noop()) as batch:
        members = batch.enqueue_many([Noop(), Noop(), Noop()])
    assert queue.cancel(members[0])

    member = page(client, f"/jobs/{members[1]}")
    assert drawn(member) == [members[1], batch.id]
    assert f"{batch.id} · noop (then)" in member

    listed = page(client, f"/jobs?batch={batch.id}")
    head = re.search(r'<section id="batch-head">(.*?)</section>', listed, re.S)
    assert head, listed
    assert f'then: <a href="/jobs/{batch.id}">job {batch.id}</a>' in head.group(1)
    assert 'id="then-status">waiting</span>' in head.group(1)
    assert "1 of 3 members ended" in head.group(1)
    assert "<title>1 cancelled</title>" in head.group(1)
    assert "<title>2 pending</title>" in head.group(1)
    then = page(client, f"/jobs/{batch.id}")
    assert "1 of 3 members ended" in then


@pytest.mark.databases("sqlite")
def test_markup_in_a_type_shows_as_text_in_the_graph_and_the_batch_head(
    queue: jobq.Queue, client: Client
) -> None:
    with queue.batch(then=Marked()) as batch:
        member = batch.enqueue(Marked())
    child = queue.enqueue(Marked(), after=[member])
    for path in (f"/jobs/{member}", f"/jobs/{child}", f"/jobs?batch={batch.id}"):
        html = page(client, path)
        assert SCRIPT not in html, path
        assert "&lt;script&gt;" in html, path


@pytest.mark.databases("sqlite")
def test_a_batch_list_of_a_job_that_is_no_batch_says_so(queue: jobq.Queue, client: Client) -> None:
    job = queue.enqueue(Noop())
    listed = page(client, f"/jobs?batch={job}")
    assert "No jobs match." in listed
    assert 'id="batch-head"' not in listed
    assert "Batch 999" not in page(client, "/jobs?batch=999")
