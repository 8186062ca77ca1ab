"""Reporters of the survey flow's events (``survey.flows.survey``).

- :class:`Terminal`: on a terminal a live Rich progress display, one row per
  candidate; in a log (not a terminal) one whole line per step, never cut. A fleet's
  display is always live. Given a quiet console it is the quiet reporter.
- :class:`JsonLines`: one JSON object per event on a stream (``--json-lines``), for a
  program to read.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import IO, Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from survey.flows import survey as flow
from survey.render.escape import rich_markup as escape
from survey.render.escape import terminal

COLORS = {"probed": "green", "unchanged": "cyan", "unobtainable": "yellow", "failed": "red", "not run": "magenta"}


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else ""


class Terminal:
    """Events as ``survey run`` has always printed them, on ``err``."""

    def __init__(self, err: Console):
        self.err = err
        self.live: Progress | None = None
        self.fleet = False
        self.tasks: dict[str, Any] = {}

    @contextlib.contextmanager
    def display(self, fleet: bool) -> Iterator[None]:
        self.fleet = fleet
        if fleet:
            self.live = Progress(SpinnerColumn(), TextColumn("[bold]{task.fields[name]}"), BarColumn(bar_width=20),
                                 TextColumn("{task.description}"), TimeElapsedColumn(), console=self.err,
                                 transient=False)
        elif self.err.is_terminal:
            self.live = Progress(SpinnerColumn(), TextColumn("[bold]{task.fields[name]:<28}"),
                                 BarColumn(bar_width=None), TextColumn("{task.description}"), TimeElapsedColumn(),
                                 console=self.err, transient=False)
        try:
            with self.live if self.live is not None else contextlib.nullcontext():
                yield
        finally:
            self.live = None

    def __call__(self, event: flow.Event) -> None:
        err = self.err
        if isinstance(event, flow.Rows) and self.live is not None:
            width = max((len(n) for n in event.names), default=0) if event.fleet else 0
            for n in event.names:
                self.tasks[n] = self.live.add_task("waiting", total=1, name=escape(n.ljust(width)))
        elif isinstance(event, flow.Skipped) and event.status == "skipped":
            err.print(terminal(f"{event.name}: skipped ({event.message})"), markup=False, highlight=False)
        elif isinstance(event, flow.Skipped):
            err.print(f"{escape(event.name)}: [magenta]{event.status}[/]: {escape(event.message)}")
        elif isinstance(event, flow.Said) and event.warning:
            err.print(f"[yellow]warning:[/] {escape(event.message)}")
        elif isinstance(event, flow.Said):
            err.print(escape(event.message), highlight=False)
        elif isinstance(event, flow.Step):
            if self.live is not None:
                self.live.update(self.tasks[event.name], description=escape(event.message[:100] if self.fleet
                                                                            else event.message))
            else:
                err.print(terminal(f"{event.name}: {event.message}"), markup=False, highlight=False)
        elif isinstance(event, flow.Done):
            self._done(event.outcome)
        elif isinstance(event, flow.Measured):
            err.print(f"[yellow]note:[/] nodes offering {escape(event.advertised)} measured "
                      f"{escape(event.measured)}; reports are filed under the platform they measured")
        elif isinstance(event, flow.Summary):
            err.print("survey: " + (", ".join(f"{n} {k}" for k, n in sorted(event.counts.items()))
                                    or "nothing to survey") + f"  (store: {event.store})", markup=False,
                      highlight=False)
        elif isinstance(event, flow.Interrupted):
            err.print(f"interrupted: {event.kept} stored; run again to resume", markup=False, highlight=False)

    def _done(self, o: Any) -> None:
        c = COLORS.get(o.status, "white")
        first = _first_line(o.message)
        run_ref = f" run #{o.run_id}" if o.run_id else ""
        if self.fleet and self.live is not None:
            self.live.update(self.tasks[o.row], completed=1,
                             description=f"[{c}]{o.status}[/]{run_ref} {escape(first[:140])}")
        elif self.live is not None:
            self.live.update(self.tasks[o.name], completed=1, description=f"[{c}]{o.status}[/]{run_ref} "
                                                                           f"{escape(first[:90])}")
        else:
            self.err.print(f"{escape(o.name)}: [{c}]{o.status}[/]{run_ref} {escape(first)}", highlight=False)


class JsonLines:
    """Each event as one JSON object on ``stream``, flushed: ``{"event": "plan", ...}``."""

    def __init__(self, stream: IO[str]):
        self.stream = stream

    @contextlib.contextmanager
    def display(self, fleet: bool) -> Iterator[None]:
        yield

    def __call__(self, event: flow.Event) -> None:
        doc = as_json(event)
        if doc is not None:
            self.stream.write(json.dumps(doc, ensure_ascii=False) + "\n")
            self.stream.flush()


def as_json(event: flow.Event) -> dict[str, Any] | None:
    """One event as JSON (None: nothing a reader needs, e.g. the rows of the display)."""
    if isinstance(event, flow.Planned):
        return {"event": "plan", "fleet": event.fleet,
                "candidates": [{"name": n, "why": str(w)} for n, w in event.candidates]}
    if isinstance(event, flow.Skipped):
        return {"event": "skipped", "name": event.name, "status": event.status, "message": event.message}
    if isinstance(event, flow.Said):
        return {"event": "warning" if event.warning else "said", "message": event.message}
    if isinstance(event, flow.Step):
        return {"event": "step", "name": event.name, "message": event.message}
    if isinstance(event, flow.Done):
        o = event.outcome
        doc = {"event": "done", "name": o.name, "status": o.status, "run_id": o.run_id, "message": o.message}
        if hasattr(o, "platform"):  # a fleet's: where it ran
            doc.update(row=o.row, platform=o.platform, measured=o.measured, node=o.node)
        return doc
    if isinstance(event, flow.Measured):
        return {"event": "measured_elsewhere", "advertised": event.advertised, "measured": event.measured}
    if isinstance(event, flow.Summary):
        return {"event": "summary", "counts": dict(sorted(event.counts.items())), "store": event.store,
                "changed": event.changed}
    if isinstance(event, flow.Interrupted):
        return {"event": "interrupted", "kept": event.kept}
    return None
