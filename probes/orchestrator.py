"""Plan the checks, run them in parallel, assemble one report.

Checks that cannot disturb each other (triton import, registry, knobs, CLI
choices, library look-ups) share one process; every ``proton.start`` gets its
own. Independent processes run in parallel, bounded by the cores available.
"""

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from . import PROBE_VERSION, SCHEMA_VERSION, classify, facts, gpuinfo, libraries, records, runner, stubs
from . import outcomes as O

INSPECT_SECTIONS = ("triton", "registry", "knobs", "cli", "libraries")
# Outcomes that may be a property of the moment rather than of the build: repeated.
REPEATED = (O.CRASH, O.TIMEOUT, O.ERROR)
STUBBABLE = {s for s, _ in stubs.STUBS}
# Per backend: the library a stub stands in for, and the knob that overrides its
# directory (when the release reads it; else LD_LIBRARY_PATH is used).
BACKEND_STUB = {
    "roctracer": ("libroctracer64.so", "TRITON_ROCTRACER_LIB_PATH"),
    "rocprofiler": ("librocprofiler-sdk.so", "TRITON_ROCPROFILER_SDK_LIB_PATH"),
}
STUB_ZYGOTE_LABEL = "a zygote with the stub loader environment"


def needs_another(attempts):
    """Whether a check's attempts so far call for one more: one crashed, hung or
    raised an unrecognised error, or they disagree."""
    outcomes = {a["cls"]["outcome"] for a in attempts}
    return bool(outcomes & set(REPEATED)) or len(outcomes) > 1


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def read_results(path):
    """Records a worker wrote, tolerating a torn last line."""
    records = []
    try:
        with open(path, "rb") as f:
            for raw in f:
                try:
                    records.append(json.loads(raw.decode("utf-8", "replace")))
                except ValueError:
                    pass
    except OSError:
        pass
    return records


class ZygoteClient(object):
    """Talks to a fork server (zygote.py). Each zygote runs under one environment,
    the very environment of every check forked from it: the clean one, or a stub
    rerun's (its loader path is read when a process starts, so it cannot be
    changed after the fork)."""

    def __init__(self, probe, label="the zygote"):
        self.probe = probe
        self.label = label
        self.slots = {}
        self.cond = threading.Condition()
        self.wlock = threading.Lock()
        self.ids = 0
        self.ready = None
        self.error = None
        self.proc = None
        self.out = self.err = None
        self.deadline = 0.0
        self.timeout = 0.0
        self.settled = False
        self.closed = False
        self.import_s = None
        self.reader = None  # type: threading.Thread | None

    def start(self, env, timeout):
        """Spawn, then wait until it has imported triton.profiler (or failed)."""
        return self.spawn(env, timeout) and self.wait_ready()

    def spawn(self, env, timeout):
        """Start the zygote without waiting for its import; ``wait_ready`` waits
        (at most ``timeout`` seconds from now)."""
        self.deadline = time.time() + timeout
        self.timeout = timeout
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        d = self.probe._next("zygote")
        self.out = open(os.path.join(d, "stdout"), "wb")
        self.err = open(os.path.join(d, "stderr"), "wb")
        self.probe.counter.add()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, self.probe.bundle, "zygote", str(req_r), str(resp_w)],
                env=env, cwd=d, stdin=subprocess.DEVNULL, stdout=self.out, stderr=self.err,
                pass_fds=(req_r, resp_w), start_new_session=True,
            )
        except OSError as e:
            for fd in (req_r, req_w, resp_r, resp_w):
                os.close(fd)
            with self.cond:
                self.error = "%s: %s" % (type(e).__name__, e)
                self.ready = False
                self.settled = True
            self.close()
            return False
        os.close(req_r)
        os.close(resp_w)
        self.req = os.fdopen(req_w, "w", buffering=1)
        self.resp = os.fdopen(resp_r, "r")
        self.reader = threading.Thread(target=self._reader, daemon=True)
        self.reader.start()
        return True

    def wait_ready(self):
        """True once the zygote is ready to fork; False (for good) when it failed
        or did not become ready before its deadline. Safe from any thread."""
        with self.cond:
            if not self.settled:
                self.cond.wait_for(lambda: self.ready is not None,
                                   timeout=max(0.0, self.deadline - time.time()))
                if not self.ready:
                    self.ready = False
                    self.error = self.error or "%s did not become ready within %ss" % (self.label, self.timeout)
                self.settled = True
                failed = not self.ready
            else:
                return bool(self.ready)
        if failed:
            self.close()
        return not failed

    def _reader(self):
        for line in self.resp:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self.cond:
                if "ready" in msg:
                    if self.ready is None:
                        self.ready = bool(msg["ready"])
                        self.error = msg.get("error")
                        self.import_s = msg.get("import_s")
                        self.probe.mark("%s: ready=%s (import %ss)" % (self.label, self.ready, msg.get("import_s")))
                else:
                    self.slots.setdefault(msg["id"], {}).update(msg)
                self.cond.notify_all()
        with self.cond:
            if self.ready is None:
                self.ready = False
                self.error = self.error or "the zygote exited before it was ready"
            self.dead = True
            self.cond.notify_all()

    def run(self, args_path, d, env, timeout, kind="start"):
        with self.wlock:
            self.ids += 1
            rid = self.ids
            self.req.write(json.dumps({"id": rid, "kind": kind, "args": args_path, "dir": d, "env": env}) + "\n")
            self.req.flush()
        t0 = time.time()
        timed_out = False
        with self.cond:
            ok = self.cond.wait_for(lambda: "exit_code" in self.slots.get(rid, {}) or getattr(self, "dead", False),
                                    timeout=timeout)
            slot = self.slots.get(rid, {})
        if not ok or "exit_code" not in slot:
            timed_out = not getattr(self, "dead", False)
            pid = slot.get("pid")
            if pid:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
            with self.cond:
                self.cond.wait_for(lambda: "exit_code" in self.slots.get(rid, {}), timeout=10)
                slot = self.slots.get(rid, {})
        if slot.get("pid"):
            try:  # reap whatever the check left in its group
                os.killpg(slot["pid"], signal.SIGKILL)
            except OSError:
                pass
        return {
            "argv": ["(forked from %s)" % self.label, "worker", kind, args_path],
            "exit_code": slot.get("exit_code"),
            "timed_out": timed_out,
            "duration_s": round(time.time() - t0, 4),
            "stdout_tail": _file_tail(os.path.join(d, "stdout")),
            "stderr_tail": _file_tail(os.path.join(d, "stderr")),
            "forked": True,
        }

    def finish(self):
        """No more requests: the zygote exits once its children have."""
        try:
            self.req.close()
        except Exception:
            pass

    def close(self):
        with self.cond:
            if self.closed:
                return
            self.closed = True
        self.finish()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
        if self.reader is not None:
            self.reader.join(timeout=10)
            if not self.reader.is_alive():
                self.resp.close()
        for f in (self.out, self.err):
            if f is not None:
                f.close()

    def discard(self):
        """A zygote no check was forked from: killed (with anything of its session)
        rather than waited for, then closed."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        self.close()


def _file_tail(path):
    try:
        with open(path, "rb") as f:
            data, _ = runner._read_tail(f)
    except OSError:
        return ""
    return runner.tail(data)


class Options(object):
    def __init__(self, timeout=60.0, jobs=None, captures=(), capture_all=True, capture_size=1 << 22,
                 capture_iters=50, stubs=True, prebuilt_stubs=None, keep_artifacts_dir=None,
                 grid=None, env_variants=True, capture_timeout=300.0, fork=True, repeats=6, stub_cache="default",
                 min_attempts=2, options=True):
        # Measure Proton's options past the mode (probes/options.py) where a backend starts.
        self.options = options
        # Where compiled stubs are kept between probes: "default" (stubs.default_cache_dir),
        # a directory, or None (compile every time).
        self.stub_cache = stub_cache
        # Every proton.start check runs min_attempts times, and up to repeats in all
        # while its attempts fail in a way that may be of the moment or disagree.
        self.repeats = max(1, int(repeats))
        self.min_attempts = max(1, min(int(min_attempts), self.repeats))
        self.timeout = float(timeout)
        self.capture_timeout = float(capture_timeout)
        self.fork = fork
        self.jobs = jobs or facts.cpu_count()
        self.captures = list(captures)
        self.capture_all = capture_all
        self.capture_size = capture_size
        self.capture_iters = capture_iters
        self.stubs = stubs
        self.prebuilt_stubs = prebuilt_stubs
        self.keep_artifacts_dir = keep_artifacts_dir
        self.grid = grid
        self.env_variants = env_variants


class Probe(object):
    def __init__(self, bundle, source_dir, options):
        self.bundle = bundle  # path of the zip (or directory) that children run
        self.source_dir = source_dir  # where the stub C sources are on disk
        self.opts = options
        self.counter = runner.Counter()
        self.work = tempfile.mkdtemp(prefix="proton-survey-probe-")
        self.environ = dict(os.environ)
        self.seq = 0
        self.lock = threading.Lock()
        self.zygote = None
        self.stub_zygotes = {}  # type: dict
        self.spec_zygotes = {}  # type: dict  # started early, not (yet) used by a rerun
        self.zlock = threading.Lock()
        self.forks = 0
        self.t_start = time.time()
        self.timeline = []  # type: list

    def mark(self, event):
        """One point of the phase timeline (``probe --timeline``): seconds since the
        probe began, and what happened. Kept out of the report."""
        self.timeline.append((round(time.time() - self.t_start, 4), threading.current_thread().name, event))

    # ------------------------------------------------------------------ helpers
    def _next(self, prefix):
        with self.lock:
            self.seq += 1
            d = os.path.join(self.work, "%s-%03d" % (prefix, self.seq))
        os.makedirs(d)
        return d

    def clean_env(self):
        env = {k: v for k, v in self.environ.items() if not facts.is_controlled(k)}
        return env

    def run_worker(self, kind, args, env, timeout):
        d = self._next(kind)
        args = dict(args)
        args["result"] = os.path.join(d, "result.jsonl")
        args_path = os.path.join(d, "args.json")
        with open(args_path, "w") as f:
            json.dump(args, f)
        argv = [sys.executable, self.bundle, "worker", kind, args_path]
        proc = runner.run(argv, env, timeout, cwd=d, counter=self.counter)
        return proc, read_results(args["result"]), d

    # ------------------------------------------------------------------ checks
    def inspect(self, sections, lib_specs, fork=False):
        """The inspect worker: forked from the zygote (with ``fork``, when it is
        ready: it already did the import the worker begins with, under the same
        clean environment), else a fresh interpreter."""
        args = {"sections": list(sections), "libraries": lib_specs}
        env = self.clean_env()
        if fork and self.zygote is not None and self.zygote.wait_ready():
            self.mark("inspect worker: start (forked)")
            d = self._next("inspect")
            args["result"] = os.path.join(d, "result.jsonl")
            args["zygote_import_s"] = self.zygote.import_s
            args_path = os.path.join(d, "args.json")
            with open(args_path, "w") as f:
                json.dump(args, f)
            proc = self.zygote.run(args_path, d, env, self.opts.timeout, kind="inspect")
            records = read_results(args["result"])
        else:
            self.mark("inspect worker: start")
            proc, records, _ = self.run_worker("inspect", args, env, self.opts.timeout)
        self.mark("inspect worker: done")
        done = {}
        begun = []
        for r in records:
            if "begin" in r:
                begun.append(r["begin"])
            if "section" in r:
                done[r["section"]] = r["data"]
        return proc, done, begun

    def check_env(self, env_kind, stub=None):
        """The environment of a check, and what the stub plan changed in it."""
        env = self.clean_env() if env_kind == "clean" else dict(self.environ)
        overrides = {}
        if stub is not None:
            for var, value in stub["env"].items():
                if var == "LD_LIBRARY_PATH":
                    old = env.get("LD_LIBRARY_PATH")
                    value = value + (":" + old if old else "")
                env[var] = value
                overrides[var] = value
        return env, overrides

    def start_check(self, backend, mode, env_kind, stub=None):
        """One ``proton.start(backend, mode)`` check, run ``Options.min_attempts``
        times (default 2: each attempt forks from a zygote, so this is cheap), then
        again, up to ``Options.repeats`` attempts in all, while any attempt crashed,
        hung or raised an unrecognised error, or the attempts disagree: such an
        outcome may be a property of the moment, not of the build, and a single
        lucky attempt must not pass for a clean answer. Attempts that disagree make
        the check ``unstable``, with every attempt and the per-outcome counts kept."""
        env, overrides = self.check_env(env_kind, stub)
        t0 = time.time()
        # Clean checks fork from the zygote with their very environment; stub reruns
        # from one started with theirs. Inherited-environment checks never fork.
        forkable = (None if env_kind != "clean" else "stub" if stub is not None else "clean")
        what = "check %s:%s %s%s" % (backend, mode, env_kind, " stub" if stub is not None else "")
        self.mark(what + ": start")
        attempts = []  # type: list
        while len(attempts) < self.opts.repeats and (len(attempts) < self.opts.min_attempts
                                                      or needs_another(attempts)):
            attempts.append(self._attempt(backend, mode, env, forkable))
        first = attempts[0]
        proc, result, phase, cls = first["proc"], first["result"], first["phase"], first["cls"]
        outcome = cls["outcome"]
        counts = None  # type: dict | None
        summary = None
        if len(attempts) > 1:
            counts = {}
            for a in attempts:
                counts[a["cls"]["outcome"]] = counts.get(a["cls"]["outcome"], 0) + 1
            summary = [a["record"] for a in attempts]
            if len(counts) > 1:
                outcome = O.UNSTABLE
        self.mark(what + ": done (%s, %d attempts)" % (outcome, len(attempts)))
        call = "proton.start(%r, backend=%r%s)" % ("proton", backend, "" if mode is None else ", mode=%r" % mode)
        entry = records.make(
            "mode_result",
            backend=backend,
            mode=mode,
            env=env_kind,
            call=call,
            argv=proc["argv"],
            stub=stub is not None,
            outcome=outcome,
            rule=cls["rule"],
            library=cls["library"],
            signal=cls["signal"],
            exc_type=(result or {}).get("exc_type"),
            message=proc.get("spawn_error") or (result or {}).get("message"),
            exit_code=proc["exit_code"],
            timed_out=proc["timed_out"],
            hung_at_exit=bool(proc["timed_out"] and result is not None),
            duration_s=round(time.time() - t0, 4),
            last_phase=phase,
            stderr_tail=proc["stderr_tail"],
            stdout_tail=proc["stdout_tail"],
            traceback_tail=(result or {}).get("traceback_tail"),
            overrides=overrides,
            stubs_mapped=(result or {}).get("stubs_mapped") or [],
            stub_for=stub["library"] if stub is not None else None,
            finalize_error=(result or {}).get("finalize_error", {}).get("message")
            if (result or {}).get("finalize_error") else None,
            attempts=summary,
            outcome_counts=counts,
        )
        return entry

    def _attempt(self, backend, mode, env, forkable):
        t0 = time.time()
        proc, results = self._run_start({"backend": backend, "mode": mode}, env, forkable)
        result = None
        phase = None
        for r in results:
            if "phase" in r:
                phase = r["phase"]
            if "status" in r:
                result = r
        gpu = self.facts.get("gpu", {})
        nvidia = bool(gpu.get("nvidia_devices"))
        timed_out = proc["timed_out"] and result is None
        # Killed by us after it reported: the signal is ours, the outcome is its result's.
        code = None if (proc["timed_out"] and result is not None) else proc["exit_code"]
        cls = classify.classify_start(result, code, timed_out, nvidia)
        record = records.make(
            "attempt",
            outcome=cls["outcome"],
            rule=cls["rule"],
            signal=cls["signal"],
            exc_type=(result or {}).get("exc_type"),
            message=proc.get("spawn_error") or (result or {}).get("message"),
            exit_code=proc["exit_code"],
            timed_out=proc["timed_out"],
            duration_s=round(time.time() - t0, 4),
        )
        return {"proc": proc, "result": result, "phase": phase, "cls": cls, "record": record}

    def _zygote_for(self, forkable, env, wait=True):
        """The zygote to fork this check from, or None for a fresh interpreter.
        Without ``wait``, only make sure it has been spawned."""
        if forkable is None or self.zygote is None or not self.zygote.wait_ready():
            return None
        if forkable == "clean":
            return self.zygote
        key = tuple(sorted(env.items()))
        with self.zlock:
            z = self.stub_zygotes.get(key)
            if z is None:
                z = self.spec_zygotes.pop(key, None)
                if z is not None:
                    self.stub_zygotes[key] = z
                    self.mark("stub zygote: speculative one used")
                else:
                    z = ZygoteClient(self, STUB_ZYGOTE_LABEL)
                    self.stub_zygotes[key] = z
                    self.mark("stub zygote: spawn")
                    z.spawn(dict(env), self.opts.timeout)
        if not wait or not z.wait_ready():
            return None
        return z

    def _run_start(self, args, env, forkable=None):
        d = self._next("start")
        args = dict(args)
        # The session writes into the check's own directory and nowhere else.
        args["name"] = os.path.join(d, "proton")
        args["result"] = os.path.join(d, "result.jsonl")
        args_path = os.path.join(d, "args.json")
        with open(args_path, "w") as f:
            json.dump(args, f)
        zygote = self._zygote_for(forkable, env)
        if zygote is not None:
            proc = zygote.run(args_path, d, env, self.opts.timeout)
            with self.lock:
                self.forks += 1
        else:
            argv = [sys.executable, self.bundle, "worker", "start", args_path]
            proc = runner.run(argv, env, self.opts.timeout, cwd=d, counter=self.counter)
        return proc, read_results(args["result"])

    def stub_plan(self, entry, knob_vars):
        """The stub rerun for a live check that failed on a stubbable library."""
        if entry["outcome"] != O.LIBRARY_MISSING or entry["library"] not in STUBBABLE:
            return None
        plan = self._stub_env(entry["backend"], self.stubs, knob_vars)
        if plan is None:
            return None
        plan["library"] = entry["library"]
        return plan

    def _stub_env(self, backend, stubs_section, knob_vars):
        """What a stub rerun of ``backend`` changes in the clean environment (and
        how each library is reached), given the stubs and the knobs the release
        reads; None without stubs. The speculative zygotes use it too, so theirs
        is the very environment a rerun would get."""
        sdir = stubs_section.get("dir")
        if not sdir:
            return None
        env = {}
        backend_lib, knob = BACKEND_STUB.get(backend, (None, None))
        ld_dirs = []
        how = {}
        if backend_lib and knob and knob in knob_vars:
            override_dir = os.path.join(sdir, "override-" + backend)
            if not os.path.isdir(override_dir):
                # Built aside and renamed into place, whole: a thread that finds
                # the directory finds the library in it.
                tmp = tempfile.mkdtemp(prefix=".override-", dir=sdir)
                shutil.copy2(os.path.join(sdir, backend_lib), os.path.join(tmp, backend_lib))
                try:
                    os.rename(tmp, override_dir)
                except OSError:
                    shutil.rmtree(tmp, ignore_errors=True)
            env[knob] = override_dir
            how[backend_lib] = knob
        # Everything else (HIP, and the backend library on releases without a knob)
        # is found through the loader path.
        ld_dirs.append(sdir)
        env["LD_LIBRARY_PATH"] = ":".join(ld_dirs)
        for lib in stubs_section.get("libraries", []):
            how.setdefault(lib, "LD_LIBRARY_PATH")
        return {"env": env, "how": how}

    def _speculate(self, stubs_section):
        """Start the stub zygotes before the checks say which reruns there will be.

        Which backends will need a rerun, and which knobs the release reads (the
        inspect worker says, later), are guessed here - from the ROCm fact and the
        text of triton/knobs.py - but only to choose what to start early: each
        zygote's environment is computed exactly as a rerun's (``_stub_env``), and
        a rerun uses one only when its own environment, computed from the real
        outcomes and knobs, is the same (``_zygote_for``). The others are killed
        unused (``discard_speculative``)."""
        if self.zygote is None or not stubs_section.get("dir"):
            return
        if self.facts.get("rocm", {}).get("status") == O.FOUND:
            return  # ROCm libraries may well load: reruns are unlikely
        grid = self.opts.grid or O.mode_grid()
        backends = [b for b in BACKEND_STUB if any(g[0] == b for g in grid)]
        if not backends:
            return
        text = ""
        pkg = self.facts.get("triton", {}).get("package_dir")
        if pkg:
            try:
                with open(os.path.join(pkg, "knobs.py"), "rb") as f:
                    text = f.read(1 << 20).decode("utf-8", "replace")
            except OSError:
                pass
        guessed = {knob for _, knob in BACKEND_STUB.values() if knob in text}
        for backend in backends:
            plan = self._stub_env(backend, stubs_section, guessed)
            if plan is None:
                continue
            env = self.check_env("clean", plan)[0]
            key = tuple(sorted(env.items()))
            with self.zlock:
                if key in self.stub_zygotes or key in self.spec_zygotes:
                    continue
                z = ZygoteClient(self, STUB_ZYGOTE_LABEL)
                self.spec_zygotes[key] = z
                self.mark("stub zygote: spawn (speculative, %s)" % backend)
                z.spawn(dict(env), self.opts.timeout)

    def discard_speculative(self):
        with self.zlock:
            unused = list(self.spec_zygotes.values())
            self.spec_zygotes.clear()
        for z in unused:
            self.mark("stub zygote: discarded unused")
            z.discard()

    # ------------------------------------------------------------------ main
    def run(self):
        started = now()
        t0 = time.time()
        self.mark("facts: start")
        self.facts = facts.gather(self.environ)
        self.mark("facts: done")
        tri = self.facts.get("triton", {})
        if tri.get("status") == O.FOUND and self.opts.fork and hasattr(os, "fork"):
            # First, so its import overlaps everything up to the first check.
            self.zygote = ZygoteClient(self)
            self.mark("zygote: spawn")
            self.zygote.spawn(self.clean_env(), self.opts.timeout)
        platform_record = records.make("platform", **gpuinfo.detect(self.facts.get("gpu", {}), self._cuda_query))
        self.mark("platform: done")
        report = {
            "schema_version": SCHEMA_VERSION,
            "probe": {
                "version": PROBE_VERSION,
                "started_at": started,
                "timeout_s": self.opts.timeout,
                "jobs": self.opts.jobs,
                "repeats": self.opts.repeats,
            },
            "platform": platform_record,
            "environment": self.facts,
            "registry": None,
            "modes": [],
            "libraries": [],
            "captures": [],
            "options": [],
            "stubs": None,
            "sections": {},
        }
        if tri.get("status") != O.FOUND:
            report["registry"] = {"status": "absent", "profilers": None, "cli_backends": None}
            report["stubs"] = {"status": "absent", "reason": "no Triton in this environment", "libraries": []}
            report["probe"]["isolation"] = "no checks run: no Triton in this environment"
            return self._finish(report, t0)

        stub_box = {}  # type: dict
        stub_thread = None
        if self.opts.stubs:
            stub_thread = threading.Thread(target=self._prepare_stubs, args=(stub_box,))
            stub_thread.start()
        else:
            stub_box["stubs"] = {"status": "absent", "reason": "disabled (--no-stubs)", "libraries": [], "dir": None}

        lib_names = []
        libproton = tri.get("libproton")
        if libproton:
            try:
                lib_names = libraries.names_in_libproton(libproton)
            except OSError as e:
                report["sections"]["libproton_strings"] = {"status": "failed", "error": str(e)}
        lib_specs = [{"name": n, "override": libraries.OVERRIDES.get(n)} for n in lib_names]
        self.mark("libproton strings: done")

        inherited = [v for v in self.facts["variables"] if v["controlled"]]
        grid = self.opts.grid or O.mode_grid()
        pool = ThreadPoolExecutor(max_workers=max(1, self.opts.jobs))

        # torch is imported (after triton.profiler, last) only where it is installed.
        self.sections = INSPECT_SECTIONS + (("torch",) if self.facts["torch"].get("status") == O.FOUND else ())
        # The inspect worker runs beside the checks, not in one of their slots: it
        # overlaps the zygote's import, which the first checks wait for.
        inspect_pool = ThreadPoolExecutor(max_workers=1)
        inspect_f = inspect_pool.submit(self.inspect, self.sections, lib_specs, True)
        live = {}
        # Backends with a stub rerun first, so their reruns start early; the report
        # keeps the grid's order.
        for backend, mode in sorted(grid, key=lambda pair: pair[0] not in BACKEND_STUB):
            live[pool.submit(self.start_check, backend, mode, "clean")] = ("live", backend, mode)
        if inherited and self.opts.env_variants:
            for backend, mode in grid:
                live[pool.submit(self.start_check, backend, mode, "inherited")] = ("inherited", backend, mode)

        entries = []
        awaiting_stub = []
        knob_vars = None
        inspect_data = None
        pending = set(live) | {inspect_f}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                if f is inspect_f:
                    inspect_data = f.result()
                    knobs_sec = inspect_data[1].get("knobs") or {}
                    knob_vars = {k.get("variable") for k in knobs_sec.get("knobs", [])}
                    continue
                entry = f.result()
                entries.append(entry)
                if entry["env"] == "clean" and not entry["stub"]:
                    awaiting_stub.append(entry)
            if knob_vars is not None and awaiting_stub:
                if stub_thread is not None and stub_thread.is_alive():
                    self.mark("stub reruns: waiting for the stubs")
                    stub_thread.join()
                    self.mark("stub reruns: stubs ready")
                self.stubs = stub_box["stubs"]
                for entry in awaiting_stub:
                    plan = self.stub_plan(entry, knob_vars)
                    if plan is not None:
                        # Its zygote imports while the checks queued before it run.
                        self._zygote_for("stub", self.check_env("clean", plan)[0], wait=False)
                        fut = pool.submit(self.start_check, entry["backend"], entry["mode"], "clean", plan)
                        pending.add(fut)
                awaiting_stub = []
        self.mark("checks: all done")
        inspect_pool.shutdown()
        if stub_thread is not None:
            stub_thread.join()
        self.discard_speculative()
        report["probe"]["isolation"] = self._isolation()
        zygotes = [z for z in [self.zygote] + list(self.stub_zygotes.values()) if z is not None]
        for z in zygotes:  # all told to finish first, so they wind down together
            z.finish()
        for z in zygotes:
            z.close()
        self.mark("zygotes: closed")
        self.stubs = stub_box["stubs"]
        report["stubs"] = {k: v for k, v in self.stubs.items() if k != "dir"}

        # Captures: every (backend, mode) found working, plus those asked for.
        wanted = []
        if self.opts.capture_all:
            for entry in entries:
                if entry["outcome"] == O.OK and not entry["stub"] and entry["env"] == "clean":
                    wanted.append((entry["backend"], entry["mode"]))
        for b, m in self.opts.captures:
            if (b, m) not in wanted:
                wanted.append((b, m))
        futs = []
        if wanted:
            from . import capture

            futs = [pool.submit(capture.run_capture, self, b, m) for b, m in wanted]
        if self.opts.options and self.opts.capture_all:
            # Options past the mode, for the backends that started (probes/options.py),
            # measured like the automatic captures (and off with them); their captures
            # queue behind the ones above, in the same pool.
            from . import options

            report["options"] = options.run(self, pool, entries)
        report["captures"] = [f.result() for f in futs]
        pool.shutdown()

        order = {pair: i for i, pair in enumerate(grid)}
        entries.sort(key=lambda e: (e["env"] != "clean", e["stub"], order.get((e["backend"], e["mode"]), 99)))
        report["modes"] = entries
        self._assemble_inspect(report, inspect_data, lib_specs)
        return self._finish(report, t0)

    def _isolation(self):
        isolation = "a fresh interpreter per check"
        if self.zygote is None:
            return isolation + " (fork disabled)"
        if not self.zygote.wait_ready():
            return isolation + " (zygote unavailable: %s)" % self.zygote.error
        isolation = ("clean checks forked from a zygote that imported triton.profiler once "
                     "(own process, session and files each)")
        if self.stub_zygotes:
            isolation += "; stub reruns forked likewise from a zygote started with their loader environment"
            failed = [z.error for z in self.stub_zygotes.values() if not z.wait_ready()]
            if failed:
                isolation += " (where one was unavailable, in fresh interpreters: %s)" % "; ".join(failed)
            return isolation + "; inherited-environment checks in fresh interpreters"
        return isolation + "; stub and inherited-environment checks in fresh interpreters"

    def _cuda_query(self):
        """gpuinfo.cuda_query() in a child process: cuInit may hang or crash."""
        proc = runner.run([sys.executable, self.bundle, "gpuinfo"], self.clean_env(), min(60.0, self.opts.timeout),
                          counter=self.counter, keep_stdout=True)
        try:
            return json.loads(proc["stdout"].decode("utf-8", "replace"))
        except ValueError:
            why = "timed out" if proc["timed_out"] else "exit %s" % proc["exit_code"]
            return {"devices": [], "cuda_driver_api": None,
                    "error": "the query process printed no answer (%s): %s" % (why, proc["stderr_tail"][-300:])}

    def _prepare_stubs(self, box):
        self.mark("stubs: prepare")
        try:
            cache = self.opts.stub_cache
            if cache == "default":
                cache = stubs.default_cache_dir(self.environ)
            box["stubs"] = stubs.prepare(
                os.path.join(self.source_dir, "stubs"), self.opts.prebuilt_stubs, self.work, self.environ, cache
            )
        except Exception as e:  # never lose the report to the stub build
            box["stubs"] = {"status": "failed", "reason": "%s: %s" % (type(e).__name__, e), "libraries": [],
                            "dir": None}
        self.mark("stubs: %s (%s)" % (box["stubs"].get("status"), box["stubs"].get("how")))
        try:
            self._speculate(box["stubs"])
        except Exception as e:  # only ever a head start: the reruns start their own
            self.mark("stub zygotes: no speculation (%s: %s)" % (type(e).__name__, e))

    def _assemble_inspect(self, report, inspect_data, lib_specs):
        proc, done, begun = inspect_data
        # A section the worker began but never finished is where it died; rerun the
        # ones it never reached in a fresh worker, once.
        missing = [s for s in self.sections if s not in done]
        died_in = [s for s in begun if s not in done]
        sections = {}
        for s in self.sections:
            if s in done:
                sections[s] = {"status": done[s].get("status"), "duration_s": done[s].get("duration_s")}
        for s in died_in:
            cls = classify.classify_start(None, proc["exit_code"], proc["timed_out"], False)
            sections[s] = {
                "status": "failed",
                "outcome": cls["outcome"],
                "signal": cls["signal"],
                "exit_code": proc["exit_code"],
                "stderr_tail": proc["stderr_tail"],
            }
            done[s] = {"status": "failed", "error": "the inspect worker died in this section (%s)" % cls["outcome"]}
        retry = [s for s in missing if s not in died_in]
        if retry:
            # Sections after the triton import need it; if the import itself is what
            # died, only the library look-ups (which do not) are worth a retry.
            if "triton" in died_in:
                retry = [s for s in retry if s == "libraries"]
                need = retry
            else:
                need = ["triton"] + [s for s in retry if s != "triton"]
        if retry:
            proc2, done2, _ = self.inspect(need, lib_specs)
            for s in retry:
                if s in done2:
                    done[s] = done2[s]
                    sections[s] = {"status": done2[s].get("status"), "retried": True}
                else:
                    sections[s] = {"status": "failed", "retried": True, "exit_code": proc2["exit_code"],
                                   "timed_out": proc2["timed_out"], "stderr_tail": proc2["stderr_tail"]}
                    done[s] = {"status": "failed", "error": "the inspect worker did not complete this section"}
        for s in self.sections:
            if s not in done:
                done[s] = {"status": "failed", "error": "not run: the triton section did not complete"}
                sections.setdefault(s, {"status": "failed", "error": done[s]["error"]})
        report["sections"].update(sections)
        report["sections"]["inspect_process"] = {
            "exit_code": proc["exit_code"], "timed_out": proc["timed_out"], "duration_s": proc["duration_s"],
            "stderr_tail": proc["stderr_tail"],
        }

        tri = done.get("triton", {})
        reg = done.get("registry", {})
        cli = done.get("cli", {})
        knobs = done.get("knobs", {})
        report["registry"] = {
            "status": reg.get("status"),
            "profilers": reg.get("profilers"),
            "note": reg.get("note") or reg.get("message") or reg.get("error"),
            "cli_backends": cli.get("backends"),
            "cli": cli,
            "knobs": knobs.get("knobs", []),
            "triton_import": tri,
        }
        if "torch" in done:
            report["environment"]["torch"]["imported"] = done["torch"]
        knob_vars = {k.get("variable") for k in knobs.get("knobs", [])}
        report["libraries"] = self._libraries(done.get("libraries", {}), lib_specs, knob_vars)

    def _libraries(self, lib_section, lib_specs, knob_vars):
        results = {r["name"]: r for r in lib_section.get("results", [])}
        tri = self.facts.get("triton", {})
        dirs = libraries.search_dirs(self.environ, self.facts.get("rocm", {}), facts.site_dirs(),
                                     tri.get("package_dir"))
        ld = libraries.ldconfig_entries()
        rows = []
        for spec in lib_specs:
            name = spec["name"]
            r = results.get(name, {})
            found = libraries.candidates(name, dirs, ld)
            loads = r.get("loads")
            row = {
                "name": name,
                "backends": list(libraries.KNOWN.get(name, ())),
                "dlopen": r.get("dlopen"),
                "via": r.get("via"),
                "loads": loads,
                "loaded_path": r.get("loaded_path"),
                "error": r.get("error") if loads is not None else (lib_section.get("error") or "not tested"),
                "candidates": found,
                "versioned_only": bool(found) and all(c["file"] != name for c in found),
                "ld_cache_read": ld is not None,
                "fix": libraries.describe_fix(name, loads, found, knob_vars) if loads is False else None,
            }
            rows.append(row)
        return rows

    def _finish(self, report, t0):
        self.mark("finish")
        report["probe"]["finished_at"] = now()
        report["probe"]["duration_s"] = round(time.time() - t0, 4)
        report["probe"]["interpreters_started"] = self.counter.n
        report["probe"]["forked_checks"] = self.forks
        shutil.rmtree(self.work, ignore_errors=True)
        return report
