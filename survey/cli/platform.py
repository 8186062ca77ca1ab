"""``survey platform``: this machine's platform key and its ``ray start`` line."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from survey.cli.app import FormatOpt, JsonOpt, app, err, out, wants_json
from survey.core.errors import InputError, UsageProblem
from survey.render.escape import json_text, rich_markup, terminal


@app.command("platform")
def platform_cmd(
    address: Annotated[Optional[str], typer.Option(
        help="the head node's address (HOST:6379) for the `ray start` line; default: a placeholder")] = None,
    head: Annotated[bool, typer.Option("--head", help="print the line that starts the head node here")] = False,
    slots: Annotated[int, typer.Option(min=1, help="probes this node runs at once (each also takes a CPU)")] = 1,
    fmt: FormatOpt = None,
    output_json: JsonOpt = False,
) -> None:
    """This machine's platform key, and the `ray start` line that offers it to a fleet survey."""
    output_json = wants_json(fmt, output_json)
    import shlex

    from survey.evidence.identity import local_platform
    from survey.flows import fleet

    if head and address:
        raise UsageProblem("give --head or --address, not both")
    p = local_platform()
    problem = fleet.key_problem(p.key)
    if problem:
        raise InputError(f"this machine's platform key {p.key[:80]!r} {problem}; it cannot be advertised")
    argv = fleet.ray_start_argv(p.key, address=address, head=head, slots=slots)
    if output_json:
        doc = {"key": p.key, "label": p.label, "vendor": p.vendor, "arch": p.arch, "model": p.model,
               **{k: p.detail.get(k) for k in ("driver", "runtime", "errors")},
               "resource": fleet.resource_name(p.key), "resources": {fleet.resource_name(p.key): slots},
               "ray_start": argv, "ray_start_line": shlex.join(argv)}
        sys.stdout.write(json_text(doc, indent=1) + "\n")
    else:
        out.print(terminal(f"platform: {p.key}  ({p.label})"), markup=False, highlight=False)
        out.print(terminal(shlex.join(argv)), markup=False, highlight=False, soft_wrap=True)
    for e in p.detail.get("errors") or []:
        err.print(f"[yellow]note:[/] {rich_markup(str(e))}")
    if not head and not address:
        err.print("replace HEAD_ADDRESS with the head node's address (or pass --address); run the line on this node",
                  highlight=False)
