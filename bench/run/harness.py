#!/usr/bin/python3
"""bench/run/harness.py: the one place that starts, stops and checks the
nginx instances and backends of the benches and the stress checks.

Used as a library by bench/run/bench.py (bench, demo, serve and the
browser check's fleet), bench/lock/run and bench/cold/run, and through
its command line by the shell scripts: t/stress/lib.sh, bench/overhead/run
and t/browser/status-page.

An nginx instance lives in a prefix directory: PREFIX/conf/nginx.conf,
PREFIX/logs/error.log, PREFIX/logs/nginx.pid (its configuration says
`pid logs/nginx.pid;`).  It runs either as a daemon (the command line) or
in the foreground as a child of the caller (Procs: bench.py records the
PIDs for its shell's trap).  Stopping sends TERM to the master and, after
5 s, KILL to it and to the workers it had: a worker stuck on a zone mutex
never exits by itself, and a check must not leave it behind.

    harness.py start PREFIX [--port N [--path /status]] [--nginx BIN]
        starts the daemon, waits (10 s) until the port accepts or the
        path answers below 500; exit 1 with error.log's tail otherwise
    harness.py stop PREFIX...      TERM, then KILL after 5 s
    harness.py kill PREFIX...      KILL at once (a crash)
    harness.py errors PREFIX [--allow ERE] [--also ERE]
        exit 1 and the first lines when error.log holds a line at level
        error or above (or matching --also), but for lines matching --allow

Standard library only.
"""

import argparse
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import time

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable
NGINX = os.environ.get("NGINX_BIN") or "/usr/sbin/nginx"
STOP_S = 5                      # TERM to KILL
ERROR_LEVELS = r"\[(emerg|alert|crit|error)\]"


# ---------------------------------------------------------------------------
# Processes

def pid_alive(pid):
    """True while pid runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return False
    return s[s.rindex(")") + 2] != "Z"


def children(pid):
    """The pids of pid's live children (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rindex(")") + 2:].split()
        if int(rest[1]) == pid and rest[0] != "Z":
            out.append(int(d))
    return out


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


class Procs:
    """Processes started in the foreground, each with its log; recorded
    in a PID file too (for a shell's trap) and stopped by PID."""

    def __init__(self, pidfile=None):
        self.procs = []
        self.pidfile = pidfile

    def start(self, argv, log):
        f = open(log, "ab")
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                 stderr=subprocess.STDOUT)
        finally:
            f.close()
        p.argv0 = os.path.basename(argv[1] if argv[0] == PY else argv[0])
        p.log = log
        self.procs.append(p)
        self.record(p)
        return p

    def record(self, p):
        if self.pidfile:
            with open(self.pidfile, "a") as pf:
                pf.write("%d\n" % p.pid)

    def stop(self, procs=None):
        """TERM to each, KILL to those still running after 5 s."""
        procs = list(self.procs if procs is None else procs)
        for p in procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + STOP_S
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = [p for p in self.procs if p not in procs]
        if self.pidfile and not self.procs:
            open(self.pidfile, "w").close()


# ---------------------------------------------------------------------------
# Ports

def port_free(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_ready(port, path=None, alive=None, timeout=10):
    """Waits until 127.0.0.1:port accepts a connection or, with a path,
    answers GET path below 500.  alive(): False when the process meant
    to answer has gone, to fail at once.  RuntimeError after timeout s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if alive and not alive():
            raise RuntimeError("exited before 127.0.0.1:%d answered" % port)
        try:
            if path is None:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                return
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            c.close()
            if r.status < 500:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("127.0.0.1:%d did not answer in %d s"
                       % (port, timeout))


# ---------------------------------------------------------------------------
# nginx instances

class Nginx:
    """One nginx instance in its prefix directory (see the top)."""

    def __init__(self, prefix, nginx=NGINX, name=None):
        self.prefix = os.path.abspath(prefix)
        self.nginx = nginx
        self.name = name or os.path.basename(self.prefix)
        self.proc = None                # when a child in the foreground

    @property
    def conf(self):
        return os.path.join(self.prefix, "conf", "nginx.conf")

    @property
    def error_log(self):
        return os.path.join(self.prefix, "logs", "error.log")

    def argv(self, *more):
        return [self.nginx, "-p", self.prefix + "/", "-e", "logs/error.log",
                "-c", "conf/nginx.conf"] + list(more)

    def write(self, conf, test=True):
        """Writes conf/nginx.conf; with test, nginx -t must accept it
        (RuntimeError with nginx's message otherwise)."""
        for d in ("conf", "logs"):
            os.makedirs(os.path.join(self.prefix, d), exist_ok=True)
        with open(self.conf, "w") as f:
            f.write(conf)
        if test:
            r = subprocess.run(self.argv("-t", "-q"), capture_output=True,
                               text=True, timeout=60)
            if r.returncode:
                raise RuntimeError("%s: nginx -t: %s"
                                   % (self.name, r.stderr.strip()))

    def start(self, port=None, path=None, procs=None, timeout=10):
        """Starts nginx: as a daemon, or with procs in the foreground as
        a child recorded there; then waits for port (and path), see
        wait_ready().  RuntimeError, with error.log's tail, when nginx
        does not start or answer."""
        os.makedirs(os.path.join(self.prefix, "logs"), exist_ok=True)
        try:
            if procs is not None:
                self.proc = procs.start(self.argv("-g", "daemon off;"),
                                        os.path.join(self.prefix, "logs",
                                                     "stderr.log"))
                alive = lambda: self.proc.poll() is None  # noqa: E731
            else:
                r = subprocess.run(self.argv(), stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True,
                                   timeout=60)
                if r.returncode:
                    raise RuntimeError(r.stderr.strip())
                alive = None
            if port is not None:
                wait_ready(port, path, alive, timeout)
        except RuntimeError as e:
            raise RuntimeError("%s: nginx did not start: %s\n%s"
                               % (self.name, e, tail(self.error_log, 5)))

    def master(self):
        """The master's pid (the only process without one); None when it
        is not running."""
        if self.proc is not None:
            return self.proc.pid if self.proc.poll() is None else None
        try:
            with open(os.path.join(self.prefix, "logs", "nginx.pid")) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return None
        return pid if pid_alive(pid) and "nginx" in cmdline(pid) else None

    def workers(self):
        """The pids of the worker processes that serve requests (not an
        older generation's that are shutting down)."""
        m = self.master()
        if m is None:
            return []
        return sorted(p for p in children(m)
                      if cmdline(p).startswith("nginx: worker process")
                      and "shutting down" not in cmdline(p))

    def wait_workers(self, n, old=(), timeout=15):
        """Waits until n workers serve and none of old is left; their
        pids.  RuntimeError after timeout s or when nginx exited."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self.master()
            if m is None:
                raise RuntimeError("%s: nginx exited, see %s"
                                   % (self.name, self.error_log))
            w = self.workers()
            if len(w) == n and not set(children(m)) & set(old):
                return w
            time.sleep(0.05)
        raise RuntimeError("%s: %d workers not ready in %d s"
                           % (self.name, n, timeout))

    def reload(self, conf=None, workers=None):
        """SIGHUP, after writing and testing conf when given; with
        workers, waits until that many new workers serve and the old ones
        have gone, and returns their pids."""
        if conf is not None:
            self.write(conf)
        m = self.master()
        old = children(m)
        os.kill(m, signal.SIGHUP)
        if workers is not None:
            return self.wait_workers(workers, old)

    def stop(self, sig=signal.SIGTERM, say=print):
        """Ends the master and its workers: sig, then KILL after 5 s to
        what is left (said); KILL at once with sig=SIGKILL.  The pids
        killed."""
        m = self.master()
        if m is None:
            return []
        procs = [m] + [k for k in children(m)
                       if cmdline(k).startswith("nginx:")]
        try:
            os.kill(m, sig)
        except ProcessLookupError:      # it has just exited
            pass
        deadline = time.monotonic() + (0 if sig == signal.SIGKILL
                                       else STOP_S)
        while time.monotonic() < deadline and pid_alive(m):
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(0.05)
        killed = [p for p in procs if pid_alive(p)]
        for p in killed:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
            if sig != signal.SIGKILL:
                say("%s: nginx process %d did not stop in %d s, killed"
                    % (self.name, p, STOP_S))
        if self.proc is not None:
            self.proc.wait()
        return killed

    def errors(self, allow=None, also=None):
        """The lines of error.log at level error or above (or matching
        the regular expression also), but those matching allow."""
        return error_lines([self.error_log], allow, also)


def error_lines(paths, allow=None, also=None):
    """The lines of the error logs at level error or above (or matching
    also), but those matching allow: a run must have none, a failure the
    figures alone would hide.  nginx's lines hold no request body."""
    want = re.compile(ERROR_LEVELS + ("|" + also if also else ""))
    skip = re.compile(allow) if allow else None
    bad = []
    for path in paths:
        try:
            with open(path, errors="replace") as f:
                bad += [line for line in f if want.search(line)
                        and not (skip and skip.search(line))]
        except OSError:
            pass
    return bad


# ---------------------------------------------------------------------------
# Command line, for the shell scripts

def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("start", help="start the daemon of PREFIX")
    sp.add_argument("prefix")
    sp.add_argument("--port", type=int)
    sp.add_argument("--path")
    sp.add_argument("--timeout", type=int, default=10)
    for cmd in ("stop", "kill"):
        sp = sub.add_parser(cmd, help="%s the nginx of each PREFIX" % cmd)
        sp.add_argument("prefix", nargs="+")
    sp = sub.add_parser("errors", help="error.log's lines at level error "
                        "or above")
    sp.add_argument("prefix")
    sp.add_argument("--allow", help="lines matching this ERE are expected")
    sp.add_argument("--also", help="lines matching this ERE count too")
    for sp in sub.choices.values():
        sp.add_argument("--nginx", default=NGINX)
    a = ap.parse_args()

    if a.cmd == "start":
        try:
            Nginx(a.prefix, a.nginx).start(a.port, a.path,
                                           timeout=a.timeout)
        except RuntimeError as e:
            print(e, file=sys.stderr)
            return 1
    elif a.cmd in ("stop", "kill"):
        sig = signal.SIGTERM if a.cmd == "stop" else signal.SIGKILL
        for p in a.prefix:
            Nginx(p, a.nginx).stop(sig)
    else:
        bad = Nginx(a.prefix, a.nginx).errors(a.allow, a.also)
        if bad:
            print("error.log: %d line(s), first ones:" % len(bad))
            for line in bad[:5]:
                print("    " + line.rstrip("\n")[:300])
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
