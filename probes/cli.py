"""Entry points of the probe bundle (``python probe.zip <command> ...``).

    probe    [--timeout S] [--jobs N] [--capture B[:M]] [--output F] ...   the report
    resolve                                                               what is installed
    worker   <kind> <args.json>                                           (internal)
    gelu     [...]                                                        the payload

``probe`` and ``resolve`` say what happened in their output, as one typed JSON
document on stdout (as uv's interpreter query does), never through an exit code
of their own:

    {"result": "report", "report": {...}}                    the probe report
    {"result": "resolved", "resolved": {...}}                what ``resolve`` found
    {"result": "error", "kind": KIND, "message": "...", ...}  what went wrong

where KIND is ``missing_triton`` (no Triton in this Python: ``report`` still says
what was found), ``unsupported_python`` (older than 3.8: ``python`` is its
version; the bootstrap says so before loading anything) or ``internal_error``
(the probe itself failed: ``traceback``). The exit status only says whether a
result was printed: 0 it was; 64 (EX_USAGE) the command line was not understood;
anything else, the probe died (the host reports its stderr).
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import traceback
import zipfile

EXIT_OK = 0
EXIT_USAGE = 64  # EX_USAGE, as the survey command (2 means: this environment cannot run it)

BOOTSTRAP = (
    "import sys\n"
    "if sys.version_info < (3, 8):\n"
    "    import json\n"
    "    m = 'the probe needs Python >= 3.8; this is %s' % sys.version.split()[0]\n"
    "    sys.stderr.write('proton-survey: %s\\n' % m)\n"
    "    sys.stdout.write(json.dumps({'result': 'error', 'kind': 'unsupported_python', 'message': m,\n"
    "                                'python': list(sys.version_info[:2])}) + '\\n')\n"
    "    sys.exit(0)\n"
    "import os, shutil, tempfile\n"
    "d = tempfile.mkdtemp(prefix='proton-survey-bundle-')\n"
    "p = os.path.join(d, 'probe.zip')\n"
    "with open(p, 'wb') as f:\n"
    "    f.write(sys.stdin.buffer.read())\n"
    "sys.path.insert(0, p)\n"
    "try:\n"
    "    from probes import cli\n"
    "    rc = cli.main(sys.argv[1:], bundle=p)\n"
    "finally:\n"
    "    shutil.rmtree(d, True)\n"
    "sys.exit(rc)\n"
)


class Parser(argparse.ArgumentParser):
    """argparse with a usage error of 64 (EX_USAGE): its own 2 would read as "this
    environment cannot run it", which is what 2 means to proton-survey."""

    def error(self, message):
        sys.stderr.write("%s: error: %s (see %s --help)\n" % (self.prog, message, self.prog))
        sys.exit(EXIT_USAGE)


def result(doc, sort_keys=False):
    """Print the command's one typed result (see the module's docstring)."""
    sys.stdout.write(json.dumps(doc, indent=1, sort_keys=sort_keys, ensure_ascii=True) + "\n")
    sys.stdout.flush()
    return EXIT_OK


def error(kind, message, **more):
    doc = {"result": "error", "kind": kind, "message": message}
    doc.update(more)
    return result(doc)


def parse_capture(text):
    backend, _, mode = text.partition(":")
    return backend or None, mode or None


def source_dir_for(bundle, work):
    """A directory holding ``stubs/*.c`` on disk (extracted when running from a zip)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.isdir(os.path.join(here, "stubs")):
        return here, None
    if bundle and zipfile.is_zipfile(bundle):
        out = os.path.join(work, "src")
        prebuilt = None
        with zipfile.ZipFile(bundle) as z:
            for n in z.namelist():
                if n.startswith("probes/stubs/"):
                    z.extract(n, out)
        base = os.path.join(out, "probes")
        pb = os.path.join(base, "stubs", "prebuilt")
        if os.path.isdir(pb):
            prebuilt = pb
        return base, prebuilt
    return here, None


def cmd_probe(argv, bundle):
    p = Parser(prog="probe", description="Measure what Proton can do in this Python environment.")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds for each check (default 60)")
    p.add_argument("--capture-timeout", type=float, default=300.0, help="seconds for each GELU capture")
    p.add_argument("--jobs", type=int, default=None, help="checks run at once (default: the cores available)")
    p.add_argument("--capture", action="append", default=[], metavar="BACKEND[:MODE]",
                   help="also run the GELU capture with this backend and mode")
    p.add_argument("--no-auto-capture", action="store_true",
                   help="do not capture every (backend, mode) found working")
    p.add_argument("--capture-size", type=int, default=1 << 22)
    p.add_argument("--capture-iters", type=int, default=50)
    p.add_argument("--no-options", action="store_true",
                   help="do not measure Proton's options past the mode (context, data, instrumentation mode "
                        "options, its command line) for the backends that start")
    p.add_argument("--no-stubs", action="store_true", help="skip the stub-library reruns")
    p.add_argument("--stub-cache", default="default", metavar="DIR",
                   help="keep stubs compiled here between probes (default: ~/.cache/proton-survey/probe-stubs)")
    p.add_argument("--no-stub-cache", action="store_true", help="compile the stubs anew every time")
    p.add_argument("--artifacts-dir", default=None, help="copy .hatchet captures here")
    p.add_argument("--only", action="append", default=[], metavar="BACKEND[:MODE]",
                   help="check only these (backend, mode) pairs")
    p.add_argument("--repeats", type=int, default=6,
                   help="at most this many attempts of a proton.start check, run while an attempt crashed, hung or "
                        "raised an unrecognised error, or the attempts disagree (default 6); disagreeing attempts "
                        "make the check `unstable`")
    p.add_argument("--min-attempts", type=int, default=2,
                   help="attempts of every proton.start check, whatever the first one said (default 2)")
    p.add_argument("--no-fork", action="store_true",
                   help="start a fresh interpreter for every check (no zygote)")
    p.add_argument("--output", "-o", default=None, help="write the report here instead of stdout")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="stop every check and exit once the process that started the probe is gone (what "
                        "`survey run` asks for; a probe run by hand outlives its shell)")
    p.add_argument("--timeline", action="store_true",
                   help="print when each phase began and ended (seconds since the probe began) to stderr")
    args = p.parse_args(argv)
    try:
        return _probe(args, argv, bundle)
    except Exception as e:  # the probe's own failure: said in its result, with where it happened
        return error("internal_error", "%s: %s" % (type(e).__name__, e),
                     traceback=traceback.format_exc().strip().splitlines()[-12:])


def _probe(args, argv, bundle):
    from . import orchestrator

    if args.exit_with_parent:
        from . import lifeline

        lifeline.watch_parent()

    work = tempfile.mkdtemp(prefix="proton-survey-src-")
    try:
        src, prebuilt = source_dir_for(bundle, work)
        grid = None
        if args.only:
            grid = [parse_capture(x) for x in args.only]
        opts = orchestrator.Options(
            timeout=args.timeout,
            capture_timeout=args.capture_timeout,
            jobs=args.jobs,
            captures=[parse_capture(c) for c in args.capture],
            capture_all=not args.no_auto_capture,
            capture_size=args.capture_size,
            capture_iters=args.capture_iters,
            stubs=not args.no_stubs,
            prebuilt_stubs=prebuilt,
            keep_artifacts_dir=args.artifacts_dir,
            grid=grid,
            fork=not args.no_fork,
            repeats=max(1, args.repeats),
            min_attempts=max(1, args.min_attempts),
            stub_cache=None if args.no_stub_cache else args.stub_cache,
            options=not args.no_options,
        )
        probe = orchestrator.Probe(bundle, src, opts)
        report = probe.run()
        if args.timeline:
            for t, thread, event in probe.timeline:
                sys.stderr.write("%8.3f  %-24s %s\n" % (t, thread, event))
        report["probe"]["argv"] = ["probe"] + list(argv)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc = {"result": "report"}
    if (report["environment"].get("triton") or {}).get("status") != "found":
        message = "no Triton in this Python (%s)" % sys.executable
        sys.stderr.write("proton-survey: %s\n" % message)
        doc = {"result": "error", "kind": "missing_triton", "message": message}
    if args.output:  # the bare report, to ingest elsewhere; the result names the file
        tmp = args.output + ".tmp"
        with open(tmp, "w") as f:
            f.write(json.dumps(report, indent=1, sort_keys=False, ensure_ascii=True) + "\n")
        os.replace(tmp, args.output)
        doc["output"] = args.output
    else:
        doc["report"] = report
    return result(doc)


def main(argv=None, bundle=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        sys.stderr.write(__doc__)
        return EXIT_USAGE
    cmd, rest = argv[0], argv[1:]
    if cmd == "probe":
        return cmd_probe(rest, bundle)
    if cmd == "worker":
        from . import worker

        return worker.main(rest)
    if cmd == "resolve":
        from . import facts

        return result({"result": "resolved", "resolved": facts.resolved()}, sort_keys=True)
    if cmd == "gpuinfo":
        from . import gpuinfo

        return gpuinfo.print_cuda_query()
    if cmd == "zygote":
        from . import zygote

        return zygote.main(rest)
    if cmd == "gelu":
        import runpy

        sys.argv = ["gelu"] + rest
        try:
            runpy.run_module("probes.gelu", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        return 0
    sys.stderr.write("unknown command %r\n%s" % (cmd, __doc__))
    return EXIT_USAGE
