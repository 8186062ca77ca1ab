"""Reports that arrive together, stored together: a group commit for uploads.

A service that takes uploads from many clients at once (``POST /runs``) would otherwise
store each report in a transaction of its own, one after another: each moves the matrix
version, looks its candidate, environment and platform up, works its slot's cells out
again (``survey.verdicts.summary``) and commits, and the next waits for the store's write
lock meanwhile. Most of that is the same work for every report of a group.

:class:`GroupCommit` stores the reports that wait while a write is under way in the next
transaction, together (``survey.evidence.ingest.ingest_many``: one version step, one
look-up per kind of row, the slots' cells in one pass, one commit):

- A caller's :meth:`GroupCommit.store` returns only once its report is committed (or
  raises why it is not): an answer never runs ahead of the store.
- The first caller to find no write under way writes what is waiting, its own report
  included; the others wait for the commit. Nobody waits on a timer: a report that
  arrives alone is written at once, in a group of one (``ingest``, as before).
- A group is at most :data:`MOST` reports; what waits beyond it goes in the next.
- When a group's transaction fails, nothing of it is stored, and each of its reports is
  stored again in a transaction of its own: one report's failure (a report that does
  not match its catalog candidate, a store that refuses it) is that report's answer
  alone, and a report is stored whole or not at all, as before.
- A report twice in one group is stored once; both callers get its run.

The store's own write lock still orders writers across processes (``survey serve
--workers N``: a group per process).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from db.store import Store
from survey.evidence.ingest import Filing, Identified, IngestResult, ingest, ingest_many

MOST = 64  # reports in one transaction, at most


@dataclass(eq=False)
class Waiting:
    """A report waiting for a write, and then its result or what its write raised."""

    ident: Identified
    filing: Filing
    result: IngestResult | None = None
    error: BaseException | None = None
    done: bool = False


class GroupCommit:
    """One per store in a process (see the module's doc); ``source``: what the runs record
    as where they came from (``upload``)."""

    def __init__(self, store: Store, source: str, most: int = MOST):
        self.store = store
        self.source = source
        self.most = most
        self._waiting: list[Waiting] = []
        self._queued = threading.Condition()  # guards _waiting; notified when a report joins it
        self._turn = threading.Lock()  # held by the caller that is writing a group

    def store_report(self, ident: Identified, filing: Filing) -> IngestResult:
        """Store one report, with those waiting beside it; its result once committed."""
        me = Waiting(ident, filing)
        with self._queued:
            self._waiting.append(me)
            self._queued.notify_all()
        while not me.done:
            with self._turn:
                if me.done:
                    break
                with self._queued:
                    group, self._waiting = self._waiting[:self.most], self._waiting[self.most:]
                self.write(group)
        if me.error is not None:
            raise me.error
        assert me.result is not None
        return me.result

    def waiting(self) -> int:
        """How many reports wait for a write (tests and diagnostics)."""
        with self._queued:
            return len(self._waiting)

    def wait_for(self, count: int, timeout: float) -> bool:
        """Block until ``count`` reports wait (tests: to make a group without a timer)."""
        with self._queued:
            return self._queued.wait_for(lambda: len(self._waiting) >= count, timeout)

    def write(self, group: list[Waiting]) -> None:
        """Store ``group`` (at most :attr:`most`): together, or when that fails each alone;
        every one is then done, with its result or its error."""
        try:
            if len(group) > 1 and self._together(group):
                return
            for w in group:  # alone, or again one by one: each its own transaction
                self._alone(w)
        finally:
            for w in group:  # whatever happened, nobody is left waiting
                if not w.done:
                    w.error = w.error or RuntimeError("the report was not written")
                    w.done = True

    def _together(self, group: list[Waiting]) -> bool:
        """The group in one transaction; False (nothing stored) when it failed."""
        try:
            with self.store.session() as s:
                results = ingest_many(s, [(w.ident, w.filing) for w in group], source=self.source,
                                      batch=len(group))
        except Exception:  # noqa: BLE001 - each report is tried alone next, and gets its own answer
            return False
        for w, res in zip(group, results, strict=True):
            w.result, w.done = res, True
        return True

    def _alone(self, w: Waiting) -> None:
        f = w.filing
        try:
            with self.store.session() as s:
                w.result = ingest(s, w.ident, candidate=f.name, label=f.label, kind=f.kind, spec=f.spec,
                                  position=f.position, scope=f.scope, source=self.source)
        except BaseException as e:  # handed to its caller, who raises it
            w.error = e
        w.done = True
