"""`jobq-supervise ctl`: tell a running master to resize one of its pools, or show them.

TTIN and TTOU carry no pool's name; this does, over the master's control socket
(supervisor/control.py). Without --master, it finds the one master its user runs here."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Sequence

import psutil

from .. import options
from ..supervisor.control import MAX_REQUEST, REFUSED, address
from .commands import Parser, parse

TITLE = "jobq-supervise: master"
# A master answers from its loop, which wakes at least once a second.
ANSWER_TIMEOUT = 5.0


def ctl_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="jobq-supervise ctl",
        description="Resize one pool of a running jobq-supervise (ttin: one more worker, ttou: "
        "one fewer), or list its pools with their workers and sizes.",
    )
    parser.add_argument("command", choices=("ttin", "ttou", "pools"))
    parser.add_argument("pool", nargs="?", help="the pool's name: its types as --pool gave them")
    options.add(parser, [options.MASTER])
    parser.set_defaults(options=[options.MASTER])
    return parser


def main(argv: Sequence[str]) -> int:
    parser = ctl_parser()
    args = parse(parser, argv)
    if (args.command == "pools") != (args.pool is None):
        parser.error("give a pool's name after ttin or ttou, and none after pools")
    pid = args.master or only_master(parser)
    line = args.command if args.pool is None else f"{args.command} {args.pool}"
    try:
        answer = ask(pid, line)
    except OSError as error:
        print(f"jobq-supervise ctl: master {pid} did not answer: {error}", file=sys.stderr)
        return 1
    if answer.startswith(REFUSED):
        print(f"jobq-supervise ctl: {answer.removeprefix(REFUSED)}", file=sys.stderr)
        return 1
    print(answer)
    return 0


def only_master(parser: argparse.ArgumentParser) -> int:
    mine = os.getuid()
    found = []
    for process in psutil.process_iter(["pid", "cmdline", "uids"]):
        cmdline = process.info["cmdline"] or []
        uids = process.info["uids"]
        if cmdline[:1] and cmdline[0].startswith(TITLE) and uids and uids.real in (mine, 0):
            found.append(process.info["pid"])
    if len(found) != 1:
        which = f"several ({', '.join(map(str, found))})" if found else "none"
        parser.error(f"{which} of jobq-supervise's masters run here: give --master PID")
    return int(found[0])


def ask(pid: int, line: str) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(ANSWER_TIMEOUT)
        sock.connect(address(pid))
        sock.sendall(line.encode() + b"\n")
        answer = b""
        while chunk := sock.recv(MAX_REQUEST * 16):
            answer += chunk
    return answer.decode().rstrip("\n")
