"""What each page shows and what each action does, on the Queue's public API only."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from http import HTTPStatus
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

from jinja2 import Environment
from werkzeug.exceptions import BadRequest, HTTPException, NotFound
from werkzeug.routing import MapAdapter
from werkzeug.utils import redirect
from werkzeug.wrappers import Request, Response

from ..attempt_log import failed_attempt
from ..backends import search
from ..backends.controls import RETRYABLE
from ..job import check_type_name
from ..limits import count_from_text, rate_from_text
from ..queue import Queue
from ..queue.controls import on_retry, why_not_retried
from ..queue.nodes import SILENT_AFTER
from ..records import Horizon, JobRecord, Status
from . import bulk, filters, workflow
from . import queues as queues_page
from .auth import CSRF_FIELD, NOTICE_COOKIE, set_cookie

T = TypeVar("T")

log = logging.getLogger("jobq.web")

# What a page shows for a time or duration that is not set.
NOTHING = "\N{EN DASH}"

# Rows on one page of the jobs list.
PAGE_SIZE = 50
# Seconds between reloads of a running job's page: progress is written at most once a
# second (queue/progress.py), and nobody reads it faster.
REFRESH = 5
# The overview counts the jobs that finished in this many minutes (every unfinished one),
# and charts completions over as many.
RECENT_MINUTES = 60
UNFINISHED = (str(Status.PENDING), str(Status.IN_PROGRESS), str(Status.WAITING))
# The overview's chart windows: (minutes, bars); the bars span whole minutes.
WINDOWS = {"15m": (15, 15), "1h": (60, 60), "24h": (1440, 96), "7d": (10080, 84)}
DEFAULT_WINDOW = "1h"
# Seconds between two refreshes of the overview's figures by live.js.
LIVE_EVERY = 5
LIVE_SCRIPT = (Path(__file__).parent / "live.js").read_text()
# The overview lists at most this many running jobs under their workers (the newest claimed).
RUNNING_SHOWN = 200
# The overview names what holds back the database's cleanup once it has for this long.
HORIZON_SHOWN = 60.0
# The most characters of an error's last line an attempt's row shows before its traceback.
GIST_LIMIT = 100


@dataclass(frozen=True)
class Page:
    """One request, and what its views need to answer it."""

    queue: Queue
    request: Request
    urls: MapAdapter
    templates: Environment
    read_only: bool
    csrf_token: str
    csrf_field: str = CSRF_FIELD
    app: str | None = None  # the module `jobq web --app` imported, if any
    # The notice an action left for this page (auth.py), and how an action leaves one.
    notice: str | None = None
    seal: Callable[[str, str], str] | None = None

    def render(self, template: str, code: int = 200, **context: Any) -> Response:
        html = self.templates.get_template(template).render(
            url=self.urls.build,
            read_only=self.read_only,
            csrf_field=self.csrf_field,
            csrf_token=self.csrf_token,
            statuses=[str(each) for each in Status],
            notice=self.notice,
            **context,
        )
        return Response(html, code, mimetype="text/html")

    def done(
        self, endpoint: str, notice: str, query: Mapping[str, str] | None = None, **values: Any
    ) -> Response:
        """The redirect that ends an action, to a page that says what it did when it was
        taken, in words of its own: the job may have moved on by the time the page is read, a
        retried job run and failed again, and its status says so. `query`: the page's
        filter, which its notice is sealed without (a page's address is its path)."""
        target = self.urls.build(endpoint, values)
        location = f"{target}?{urlencode(query)}" if query else target
        response = redirect(location, 303)
        if self.seal is not None:
            set_cookie(response, self.request, NOTICE_COOKIE, self.seal(target, notice))
        return response

    def error(self, error: HTTPException) -> Response:
        response = self.render(
            "error.html", error.code or 500, title=error.name, message=error.description
        )
        if error.code == HTTPStatus.METHOD_NOT_ALLOWED:
            response.headers["Allow"] = "GET"
        return response

    def failure(self) -> Response:
        return self.render(
            "error.html",
            500,
            title="Database error",
            message="The page could not be read from the database; the server's log says why.",
        )


def overview(page: Page) -> Response:
    return page.render("overview.html", **overview_figures(page))


def overview_live(page: Page) -> Response:
    """The overview's figures alone, which live.js puts in place of the last ones."""
    return page.render("overview_live.html", **overview_figures(page))


def live_script(page: Page) -> Response:
    return Response(LIVE_SCRIPT, mimetype="text/javascript")


def overview_figures(page: Page) -> dict[str, Any]:
    queue = page.queue
    window = page.request.args.get("window") or DEFAULT_WINDOW
    if window not in WINDOWS:
        raise BadRequest(f"window must be one of {', '.join(WINDOWS)}, got {window!r}.")
    minutes, buckets = WINDOWS[window]
    endings = queue.endings_by_type(minutes, buckets)
    table = queue.recent_counts_by_type(RECENT_MINUTES)
    paused = queue.paused()
    return dict(
        window=window,
        windows=list(WINDOWS),
        live=LIVE_EVERY,
        bucket_minutes=minutes // buckets,
        charts=charts(endings, buckets),
        backlog={name: row.get("pending", 0) for name, row in table.items()},
        types=sorted(set(table) | paused),
        table=table,
        oldest=queue.oldest_ready(),
        paused=paused,
        limits=queue.limits(),
        unfinished=list(UNFINISHED),
        finished=[str(each) for each in Status if each not in UNFINISHED],
        workers=by_worker(queue.jobs(Status.IN_PROGRESS, limit=RUNNING_SHOWN)),
        horizon=held_horizon(queue),
    )


def charts(
    endings: dict[str, dict[str, list[int]]], buckets: int
) -> list[tuple[str, dict[str, list[int]], int]]:
    """Each chart's name, its completed and failed counts per span, and its tallest bar:
    every type together first, then each type."""
    total = {"completed": [0] * buckets, "failed": [0] * buckets}
    for row in endings.values():
        for kind, counts in row.items():
            total[kind] = [a + b for a, b in zip(total[kind], counts, strict=True)]
    shown = [("all types", total), *sorted(endings.items())]
    return [(name, row, max(map(sum, zip(*row.values(), strict=True)), default=0))
            for name, row in shown]  # fmt: skip


def held_horizon(queue: Queue) -> Horizon | None:
    """What has held back the database's cleanup for HORIZON_SHOWN or longer, if anything
    (see docs/production.md); None too where the database will not tell (MariaDB without
    PROCESS): the page shows what it can."""
    try:
        horizon = queue.horizon()
    except Exception:
        return None
    held = horizon.age is not None and horizon.age >= HORIZON_SHOWN
    return horizon if held else None


def by_worker(running: list[JobRecord]) -> list[tuple[str, list[JobRecord]]]:
    """Running jobs under the worker that runs them (a --concurrency worker runs many), each
    named by its host, pid and incarnation id, oldest claim first."""
    workers: dict[str, list[JobRecord]] = {}
    for record in sorted(running, key=lambda record: record.id):
        name = f"{record.host or NOTHING}, pid {record.pid or NOTHING}, {record.worker or NOTHING}"
        workers.setdefault(name, []).append(record)
    return sorted(workers.items())


def schedules(page: Page) -> Response:
    # The schedules declared in this process (by the application the page is mounted in, or
    # the one `jobq web --app` imported), and those the database knows of: a schedule the
    # supervisors run shows though this process imported none, or imported it before.
    found = page.queue.schedule_states(stored=True)
    return page.render("schedules.html", schedules=found, app=page.app)


def nodes(page: Page) -> Response:
    """The supervisors' heartbeats; ?silent_after=SECONDS sets when one counts as silent."""
    text = page.request.args.get("silent_after") or str(SILENT_AFTER)
    try:
        silent_after = float(text)
        found = page.queue.nodes(silent_after)
    except ValueError:
        raise BadRequest(
            f"silent_after must be a positive number of seconds, got {text!r}."
        ) from None
    return page.render("nodes.html", nodes=found, silent_after=silent_after)


def jobs(page: Page) -> Response:
    args = page.request.args
    before, batch = args.get("before") or None, args.get("batch") or None
    if batch is not None:
        if not batch.isdigit():
            raise BadRequest(f"batch must be a batch's id, got {batch!r}.")
        shown = page.queue.batch_jobs(int(batch), limit=PAGE_SIZE)
        progress = workflow.progress(page.queue.batch_status(int(batch)))
        return page.render(
            "jobs.html",
            jobs=shown,
            following=None,
            first=None,
            # Its `then` job, for a batch with members: a job that is no batch has none.
            batch=page.queue.get(int(batch)) if progress else None,
            progress=progress,
            **form({}),
            **workflow.SIZES,
        )
    if before is not None and not before.isdigit():
        raise BadRequest(f"before must be a job id, got {before!r}.")
    before_id = None if before is None else int(before)
    wanted, fields = filters.job_filter(args), filters.given(args)
    following = None
    if wanted.narrow:  # one window of ids a page (backends/search.py)
        found = page.queue.search(wanted, limit=PAGE_SIZE, before_id=before_id)
        shown = found.records
        if found.following is not None:
            following = {**fields, "before": found.following}
    else:
        # One row more than shown tells whether there is a next page.
        records = page.queue.jobs(
            wanted.status, wanted.type, limit=PAGE_SIZE + 1, before_id=before_id
        )
        shown = records[:PAGE_SIZE]
        if len(records) > PAGE_SIZE:
            following = {**fields, "before": shown[-1].id}
    return page.render(
        "jobs.html",
        jobs=shown,
        following=following,
        first=before,
        batch=None,
        **form(fields),
    )


def act(page: Page) -> Response:
    """Retry, cancel or delete the jobs ticked on a page, or every job the filter matches
    (scope=all), and say what was done; logged with who did it, where that is known."""
    form_data = page.request.form
    action = form_data.get("action", "")
    if action not in bulk.PAST:
        raise BadRequest(f"action must be one of {', '.join(bulk.PAST)}, got {action!r}.")
    fields = filters.given(form_data)
    tally = bulk.Tally(action)
    if form_data.get("scope") == "all":
        if not fields:
            raise BadRequest("An action on every match needs a filter: choose one first.")
        for ids in bulk.matches(page.queue, filters.job_filter(form_data)):
            bulk.act(page.queue, tally, ids)
    else:
        texts = form_data.getlist("id")
        if not texts or not all(text.isdigit() for text in texts):
            raise BadRequest("Tick the jobs to act on (each an id), or act on every match.")
        bulk.act(page.queue, tally, [int(text) for text in texts])
    notice = tally.notice()
    scope = "every match of " + urlencode(fields) if form_data.get("scope") == "all" else "ticked"
    log.info("The status page's operator %s: %s (%s).", operator(page.request), notice, scope)
    return page.done("jobs", notice, query=fields)


def operator(request: Request) -> str:
    """Who acts, as far as the page knows: the user the host application or basic
    authentication names, or the bearer of the token."""
    if request.remote_user:
        return repr(request.remote_user)
    given = request.authorization
    if given is not None and given.type == "basic" and given.username:
        return repr(given.username)
    return "with the token" if given is not None else "(unknown)"


def form(fields: dict[str, str]) -> dict[str, Any]:
    """What the filter form shows: the fields given, and whether to open the rest."""
    more = any(name not in ("status", "type") for name in fields)
    return {"fields": fields, "more": more, "searched": more, "window": search.SEARCH_WINDOW}


def job(page: Page, job_id: int) -> Response:
    record = existing(page, job_id)
    left = page.queue.parents_left(record.id)
    counts = page.queue.batch_status(record.id)
    return page.render(
        "job.html",
        job=record,
        payload=pretty(record.payload),
        result=shown_value(record.result),
        checkpoint=shown_value(record.checkpoint),
        refresh=REFRESH,
        lease_left=lease_left(record),
        # A parent that ended badly refuses the retry: on_retry names it.
        can_retry=record.status in RETRYABLE and not left.ended_badly,
        can_cancel=record.status in UNFINISHED and record.cancel_requested_at is None,
        on_retry=on_retry(record, left),
        parents=page.queue.parents(record.id),
        children=page.queue.dependents(record.id),
        batch={status: n for status, n in counts.items() if n},
        progress=workflow.progress(counts),
        graph=workflow.graph(page.queue, record),
        error_heading=error_heading(record),
        **workflow.SIZES,
    )


def error_heading(record: JobRecord) -> str:
    """What the row's last error is, in words: the error of which attempt, and for a job that
    completed after it, that an earlier attempt failed (the job itself did not)."""
    attempt = failed_attempt(record.history)
    which = "an attempt" if attempt is None else f"attempt {attempt}"
    if record.status is Status.COMPLETED:
        return f"An earlier attempt failed: {which}" if attempt else "An earlier attempt failed"
    return "Last error" if attempt is None else f"Last error, of {which}"


def retry(page: Page, job_id: int) -> Response:
    retried = page.queue.retry(job_id)
    record = existing(page, job_id)
    if not retried:
        notice = f"Not retried: {why_not_retried(job_id, record, page.queue)}."
    elif record.status is Status.WAITING:  # a dependent: it waits for its parents again
        notice = f"Job {job_id} was put back: it waits for its parents that have not completed."
    else:
        notice = f"Job {job_id} was put back to pending."
    return page.done("job", notice, job_id=job_id)


def cancel(page: Page, job_id: int) -> Response:
    cancelled = page.queue.cancel(job_id)
    record = existing(page, job_id)
    if not cancelled:
        notice = f"Job {job_id} was not cancelled: it is {record.status}."
    elif record.status == Status.CANCELLED:
        notice = f"Job {job_id} was cancelled."
    else:  # it runs: its attempt is stopped first, and the job ends cancelled after it
        notice = (
            f"Job {job_id} is being cancelled: its running attempt is stopped, and the job "
            "ends cancelled."
        )
    return page.done("job", notice, job_id=job_id)


def existing(page: Page, job_id: int) -> JobRecord:
    record = page.queue.get(job_id)
    if record is None:
        raise NotFound(f"There is no job {job_id}.")
    return record


def queues(page: Page) -> Response:
    return page.render(
        "queues.html", rows=queues_page.type_rows(page.queue), window=queues_page.WINDOW
    )


def back(page: Page) -> str:
    """The page a type's control was used on, which its notice is left for."""
    return "queues" if page.request.form.get("back") == "queues" else "overview"


def pause(page: Page) -> Response:
    job_type = form_type(page)
    # The page offers only the types it lists; a name from elsewhere may be misspelt.
    if not page.queue.knows_type(job_type):
        return page.done(back(page), f"No job has type {job_type}: it was not paused.")
    page.queue.pause(job_type)
    return page.done(
        back(page),
        f"Jobs of type {job_type} are paused: workers claim none until they are resumed.",
    )


def resume(page: Page) -> Response:
    job_type = form_type(page)
    page.queue.resume(job_type)
    return page.done(back(page), f"Jobs of type {job_type} are resumed.")


def limit(page: Page) -> Response:
    """An operator's concurrency limit for a type; an empty count drops the override."""
    parse = partial(count_from_text, what="concurrency")
    return override(page, "concurrency", parse, page.queue.set_limit, "concurrency limit")


def rate(page: Page) -> Response:
    """An operator's rate limit for a type, as N/SECONDS; an empty field drops the override."""
    return override(page, "rate", rate_from_text, page.queue.set_rate, "rate limit")


def override(
    page: Page,
    field: str,
    parse: Callable[[str], T],
    apply: Callable[[str, T | None], None],
    what: str,
) -> Response:
    """Set the override the form's `field` gives (empty: drop it), refusing a bad value in
    one line that names the field; `what` names the limit in the notice."""
    job_type = form_type(page)
    text = page.request.form.get(field, "").strip()
    try:
        given = None if not text else parse(text)
    except ValueError as error:
        raise BadRequest(f"{field}: {error}") from None
    apply(job_type, given)
    if given is None:
        return page.done(
            back(page), f"Type {job_type} is back to the {what} its job class declares."
        )
    return page.done(back(page), f"The {what} of type {job_type} is changed on every node.")


def form_type(page: Page) -> str:
    job_type = page.request.form.get("type", "")
    try:
        check_type_name(job_type)
    except ValueError as error:
        raise BadRequest(str(error)) from None
    return job_type


def pretty(payload: str) -> str:
    """A JSON payload indented; any other codec's text as it is."""
    try:
        return json.dumps(json.loads(payload), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        return payload


def shown_value(value: object) -> str | None:
    """A result or checkpoint, as JSON indented where it is JSON (a result another codec
    decoded into something else, as its repr)."""
    if value is None:
        return None
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def lease_left(record: JobRecord) -> float | None:
    """Seconds until a running job's lease ends, by this server's clock."""
    if record.status != Status.IN_PROGRESS or record.lease_until is None:
        return None
    return (record.lease_until - datetime.now(UTC)).total_seconds()


def duration(seconds: float | None) -> str:
    """3 h 2 m, 4 m 10 s, 7 s: the two largest units."""
    if seconds is None:
        return NOTHING
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    while len(parts) > 1 and parts[0][0] == 0:
        parts.pop(0)
    return sign + " ".join(f"{n} {unit}" for n, unit in parts[:2])


def moment(value: datetime | None) -> str:
    return NOTHING if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def gist(error: str) -> str:
    """A traceback's last line, which names the exception and its message, cut short."""
    lines = [line for line in error.splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    return last if len(last) <= GIST_LIMIT else last[: GIST_LIMIT - 1] + "\N{HORIZONTAL ELLIPSIS}"


def shown_status(record: JobRecord) -> str:
    """A job's status as the pages show it: one claimed that waits in its worker's queue
    behind the jobs claimed with it is not running yet, and reads as claimed."""
    return "claimed" if record.claimed_unstarted else str(record.status)


def add_filters(templates: Environment) -> None:
    templates.filters["gist"] = gist
    templates.filters["duration"] = duration
    templates.filters["moment"] = moment
    templates.filters["status"] = shown_status
