"""What the master shares with the parts it delegates to (the pool, its helper processes,
the probes). They hold this, never the master: none of them calls back into its loop."""

from __future__ import annotations

import selectors
from collections.abc import Callable
from dataclasses import dataclass

from .config import SupervisorConfig
from .metrics import Metrics
from .states import Phase


@dataclass
class Shared:
    config: SupervisorConfig
    # The master's loop waits on it: whatever registers here is read from that loop.
    selector: selectors.BaseSelector
    metrics: Metrics
    # Run first in every child the master forks, to close what it inherited of the master's.
    let_go: Callable[[], None]
    phase: Phase = Phase.STARTING
