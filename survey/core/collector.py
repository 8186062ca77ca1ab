"""The garbage collector's thresholds in proton-survey's processes.

Reading a report makes tens of thousands of short-lived objects (its JSON, its
model), and storing a batch of reports keeps thousands of ORM objects alive until the
commit. With CPython's default thresholds, (700, 10, 10), a young collection runs
every 700 net allocations, and whatever is alive then is walked again by the older
generations' collections. On the scale benchmark's reports that was about a third of
reading a report (2.4 ms) and a fifth of storing it in a batch (3.5 ms)
(bench/README.md). With a young threshold of 20,000 a report's objects mostly die
before a collection sees them; cycles are still collected, with at most some
20,000 young container objects (a few MB) between collections.
"""

from __future__ import annotations

import gc

THRESHOLDS = (20_000, 20, 20)


def tune() -> None:
    """Set :data:`THRESHOLDS` for this process (the CLI's and each server worker's)."""
    gc.set_threshold(*THRESHOLDS)
