"""A module that defines no task: a job row naming a function here, as anyone with INSERT
rights on jobq's table could write one, must not get it imported (importing runs its code)."""

from __future__ import annotations


def run() -> str:
    return "ran code the application never defined as a task"
