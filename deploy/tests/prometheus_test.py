#!/usr/bin/env python3
"""Every PromQL expression kforge ships returns data from a real Prometheus.

Starts `kforge local` (learner, verifier, rollout worker on loopback) and a
Prometheus server (Debian's `prometheus`) scraping the three /metrics
endpoints every second, with the same `namespace` and `pod` labels the
Prometheus Operator's PodMonitor adds in a cluster. Then it drives the
services so the event-driven series exist: verifies candidates on the
verifier (a correct one twice: a cache hit; one that loops: a sandbox kill;
one with a try/except fallback: a hacking flag), makes sure a training job
runs (submits deploy/examples/job-tiny.json on the tiny model unless one is
there) and, once the learner has trained a step, cancels it (a finished
job).

It then evaluates, through the HTTP API:
  - every target expression of every dashboard in
    deploy/k8s/monitoring/dashboards/*.json, which must return a non-empty
    result ($__rate_interval is 1m here, $namespace matches all);
  - every alert of deploy/k8s/monitoring/prometheus-rule.yaml: an alert's
    expression is normally empty (it fires on a threshold), so it is split
    at its top-level comparison and set operators (> == and unless ...) and
    each vector operand must return data. An operand that selects a label
    value this run cannot produce (state="failed") passes when the same
    expression without label matchers returns data, i.e. the metric family
    exists, and says so;
  - Prometheus itself loads the rules (rule_files) and every rule must
    evaluate without error.
Expressions over DCGM exporter metrics (DCGM_*) are exempt: no GPU exporter
runs here. `promtool check rules` and `promtool test rules`
(deploy/tests/alerts-test.yaml) run on the rules too.

Every process it starts is stopped on exit (also on SIGTERM/SIGINT); every
wait is bounded; the whole run stays under --budget seconds (default 540,
below ctest's 600). Prints each expression that failed and why.

Usage: prometheus_test.py [--bin BUILD/bin] [--keep]
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

HERE = os.path.dirname(os.path.realpath(__file__))
DEPLOY = os.path.dirname(HERE)
REPO = os.path.dirname(DEPLOY)
MONITORING = os.path.join(DEPLOY, "k8s", "monitoring")

START = time.monotonic()
children = []  # Popen objects, each the leader of its own process group


def log(msg):
    print(f"[{time.monotonic() - START:6.1f}s] {msg}", flush=True)


def stop_children():
    for p in reversed(children):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 20
    for p in reversed(children):
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        # Whatever is left of the group (kforge local's services included).
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    children.clear()


def on_signal(signum, frame):
    log(f"signal {signum}: stopping")
    stop_children()
    sys.exit(128 + signum)


def start(cmd, logfile, **kw):
    out = open(logfile, "w")
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True, **kw)
    children.append(p)
    return p


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_for(what, predicate, timeout, interval=1.0, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: process exited with {proc.returncode}")
        try:
            value = predicate()
            if value:
                return value
        except Exception:  # not up yet
            pass
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


class Prometheus:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def query(self, expr):
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            body = json.loads(http_get(url, timeout=30))
        except urllib.error.HTTPError as e:
            body = json.loads(e.read().decode() or "{}")
        if body.get("status") != "success":
            raise ValueError(f"{body.get('errorType', 'error')}: {body.get('error', body)}")
        data = body["data"]
        if data["resultType"] in ("scalar", "string"):
            return [data["result"]]
        return data["result"]

    def rules(self):
        return json.loads(http_get(f"{self.base}/api/v1/rules"))["data"]["groups"]


# --- PromQL operands -------------------------------------------------------
COMPARISON = re.compile(r"==|!=|>=|<=|>|<")
SET_OPS = re.compile(r"(and|or|unless)\b")
MODIFIER = re.compile(r"\s*(bool\b)?\s*((on|ignoring)\s*\([^)]*\))?\s*((group_left|group_right)\s*(\([^)]*\))?)?")
NUMBER = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$")


def split_top_level(expr):
    """Splits at comparison and set operators outside (), {}, [] and quotes."""
    parts, depth, quote, i, last = [], 0, None, 0, 0
    while i < len(expr):
        c = expr[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'`":
            quote = c
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif depth == 0:
            m = COMPARISON.match(expr, i)
            w = SET_OPS.match(expr, i) if (i == 0 or not (expr[i - 1].isalnum() or expr[i - 1] == "_")) else None
            if m or w:
                parts.append(expr[last:i])
                i = (m or w).end()
                i = MODIFIER.match(expr, i).end()
                last = i
                continue
        i += 1
    parts.append(expr[last:])
    return [p.strip() for p in parts if p.strip()]


def wrapped_in_parens(s):
    if not (s.startswith("(") and s.endswith(")")):
        return False
    depth = 0
    for i, c in enumerate(s):
        depth += c == "("
        depth -= c == ")"
        if depth == 0 and i < len(s) - 1:
            return False
    return True


def operands(expr):
    out = []
    for part in split_top_level(expr):
        if NUMBER.match(part):
            continue
        if wrapped_in_parens(part):
            inner = part[1:-1].strip()
            out.extend(operands(inner) if len(split_top_level(inner)) > 1 else [inner])
        else:
            out.append(part)
    return out


def substitute(expr):
    return (expr.replace("$__rate_interval", "1m").replace("${__rate_interval}", "1m")
            .replace("$__interval", "15s").replace("$__range", "5m")
            .replace('"$namespace"', '".*"').replace('"${namespace}"', '".*"'))


# --- the checks -----------------------------------------------------------
def load_expressions():
    """[(where, expr, kind)] kind: 'dashboard' or 'alert'."""
    exprs = []
    for path in sorted(glob.glob(os.path.join(MONITORING, "dashboards", "*.json"))):
        board = json.load(open(path))
        panels = list(board.get("panels", []))
        while panels:
            p = panels.pop(0)
            panels.extend(p.get("panels", []))
            for t in p.get("targets", []):
                if t.get("expr"):
                    exprs.append((f"{os.path.basename(path)}: {p.get('title')} [{t.get('refId')}]",
                                  t["expr"], "dashboard"))
    for rule in rule_list():
        kind = "alert" if "alert" in rule else "record"
        exprs.append((f"prometheus-rule.yaml: {rule.get('alert') or rule.get('record')}", rule["expr"], kind))
    return exprs


def rule_groups():
    doc = yaml.safe_load(open(os.path.join(MONITORING, "prometheus-rule.yaml")))
    assert doc["kind"] == "PrometheusRule", "prometheus-rule.yaml is not a PrometheusRule"
    return doc["spec"]["groups"]


def rule_list():
    return [r for g in rule_groups() for r in g["rules"]]


def check_expression(prom, where, expr, kind):
    """Returns None when it passes, else the reason."""
    expr = substitute(expr)
    if "DCGM_" in expr:
        return "exempt"
    queries = [expr] if kind != "alert" else operands(expr)
    if not queries:
        return "no vector operand found"
    for q in queries:
        try:
            result = prom.query(q)
        except Exception as e:
            return f"query error: {e}\n      in: {q}"
        if result:
            continue
        if kind == "alert":
            relaxed = re.sub(r"\{[^{}]*\}", "", q)
            try:
                if relaxed != q and prom.query(relaxed):
                    log(f"  note  {where}: '{q}' is empty in this run (label value not produced), "
                        f"the family exists: '{relaxed}' returns data")
                    continue
            except Exception:
                pass
        return f"empty result\n      for: {q}"
    return None


def missing_metrics(prom, expr):
    names = set(re.findall(r"\b(kforge_[a-z0-9_]+?)(?:_bucket|_sum|_count)?\b(?=\s*[{\[)])", expr))
    missing = []
    for n in sorted(names):
        try:
            if not prom.query(f'count({{__name__=~"{n}|{n}_bucket|{n}_count"}})'):
                missing.append(n)
        except Exception:
            pass
    return missing


def promtool_checks(workdir):
    failures = []
    promtool = shutil.which("promtool")
    if not promtool:
        return ["promtool not found (Debian package prometheus)"]
    rules_file = os.path.join(workdir, "rules.yml")
    with open(rules_file, "w") as f:
        yaml.safe_dump({"groups": rule_groups()}, f, sort_keys=False)
    r = subprocess.run([promtool, "check", "rules", rules_file], capture_output=True, text=True, timeout=60)
    log(f"promtool check rules: exit {r.returncode}: {(r.stdout + r.stderr).strip().splitlines()[-1:]}")
    if r.returncode:
        failures.append(f"promtool check rules:\n{r.stdout}{r.stderr}")
    unit = os.path.join(HERE, "alerts-test.yaml")
    if os.path.exists(unit):
        bare = [{**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]}
                for g in rule_groups()]
        with open(os.path.join(workdir, "alert-rules.yml"), "w") as f:
            yaml.safe_dump({"groups": bare}, f, sort_keys=False)
        shutil.copy(unit, os.path.join(workdir, "alerts-test.yaml"))
        r = subprocess.run([promtool, "test", "rules", "alerts-test.yaml"], cwd=workdir,
                           capture_output=True, text=True, timeout=120)
        log(f"promtool test rules alerts-test.yaml: exit {r.returncode}")
        if r.returncode:
            failures.append(f"promtool test rules:\n{r.stdout}{r.stderr}")
    return failures


def read_ports(path):
    j = json.load(open(path))
    return j.get("grpc_port", j.get("grpcPort")), j.get("metrics_port", j.get("metricsPort"))


def kforge(bin_dir, args, timeout=120):
    return subprocess.run([os.path.join(bin_dir, "kforge")] + args, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def drive_verifier(bin_dir, verifier, workdir):
    """Returns what went wrong."""
    failures = []
    tasks = os.path.join(os.path.dirname(bin_dir), "share", "kforge", "tasks", "kforge-mini")
    relu = os.path.join(tasks, "level1", "1_ReLU.py")
    cands = os.path.join(REPO, "tests", "data", "verifier", "cpu")
    runs = [
        ("relu_clamp.py", "{}", "a verdict"),
        ("relu_clamp.py", "{}", "a cache hit"),
        ("infinite_loop.py", '{"limits": {"correctness_timeout_s": 3}}', "a sandbox kill (timeout)"),
        ("try_except_fallback.py", "{}", "a hacking flag"),
    ]
    for i, (cand, options, why) in enumerate(runs):
        options_file = os.path.join(workdir, f"verifier-options-{i}.json")
        with open(options_file, "w") as f:
            f.write(options)
        try:
            r = kforge(bin_dir, ["verify", "--server", verifier, "--task", relu, "--candidate",
                                 os.path.join(cands, cand), "--options", options_file,
                                 "--require_triton=false", "--json"], timeout=180)
            log(f"verify {cand} ({why}): exit {r.returncode}")
            # 0: correct, 1: a verdict that is not; anything else did not verify.
            if r.returncode not in (0, 1):
                failures.append(f"kforge verify {cand} ({why}): exit {r.returncode}: {r.stderr.strip()[-400:]}")
        except subprocess.TimeoutExpired:
            failures.append(f"kforge verify {cand} ({why}): timed out after 180 s")
    return failures


def jobs(bin_dir, learner):
    r = kforge(bin_dir, ["jobs", "--server", learner, "--json"], timeout=30)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout or "{}").get("jobs", [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("KFORGE_BIN_DIR", os.path.join(REPO, "build", "bin")))
    ap.add_argument("--budget", type=float, default=float(os.environ.get("KFORGE_DEPLOY_TEST_BUDGET_S", 540)))
    ap.add_argument("--training-wait", type=float,
                    default=float(os.environ.get("KFORGE_DEPLOY_TRAINING_WAIT_S", 300)))
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    bin_dir = os.path.abspath(args.bin)
    deadline = START + args.budget
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            print(f"FAIL: {tool} not found: install the Debian package prometheus")
            return 1
    if not os.path.exists(os.path.join(bin_dir, "kforge")):
        print(f"FAIL: {bin_dir}/kforge not found: build first (scripts/build.sh)")
        return 1
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    work = tempfile.mkdtemp(prefix="kforge-deploy-prom-")
    failures = []
    try:
        failures += promtool_checks(work)
        run_dir = os.path.join(work, "run")
        # --serve: the mesh without kforge local's own job; this test submits a tiny one.
        local = start([os.path.join(bin_dir, "kforge"), "local", "--serve", "--run_dir", run_dir,
                       "--learner_port", "0"],
                      os.path.join(work, "kforge-local.log"), cwd=work)
        names = {"learner": "kforge-learner-0", "verifier-0": "kforge-verifier-0", "rollout-0": "kforge-rollout-0"}
        ports = wait_for("kforge local's .ports files",
                         lambda: {n: read_ports(os.path.join(run_dir, f"{n}.ports")) for n in names},
                         timeout=min(240, deadline - time.monotonic()), proc=local)
        for n, (_, mport) in ports.items():
            wait_for(f"{n} /metrics", lambda: "kforge_ready" in http_get(f"http://127.0.0.1:{mport}/metrics"),
                     timeout=60, proc=local)
        log("kforge local is up: " + ", ".join(f"{n} grpc {g} metrics {m}" for n, (g, m) in ports.items()))

        rules_file = os.path.join(work, "rules.yml")
        pport = free_port()
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [rules_file],
            "scrape_configs": [{
                "job_name": "kforge",
                "static_configs": [
                    {"targets": [f"127.0.0.1:{m}"], "labels": {"namespace": "kforge", "pod": names[n]}}
                    for n, (_, m) in ports.items()
                ],
            }],
        }
        with open(os.path.join(work, "prometheus.yml"), "w") as f:
            yaml.safe_dump(config, f)
        prom_proc = start(["prometheus", f"--config.file={work}/prometheus.yml",
                           f"--storage.tsdb.path={work}/tsdb", f"--web.listen-address=127.0.0.1:{pport}",
                           "--storage.tsdb.retention.time=1d", "--log.level=warn"],
                          os.path.join(work, "prometheus.log"), cwd=work)
        prom = Prometheus(pport)
        wait_for("Prometheus ready", lambda: "Ready" in http_get(f"{prom.base}/-/ready"), timeout=60, proc=prom_proc)
        wait_for("three healthy scrape targets",
                 lambda: len(prom.query('up{job="kforge"} == 1')) == 3, timeout=60, proc=prom_proc)
        log(f"Prometheus on 127.0.0.1:{pport} scrapes all three")

        learner = f"127.0.0.1:{ports['learner'][0]}"
        failures += drive_verifier(bin_dir, f"127.0.0.1:{ports['verifier-0'][0]}", work)

        ours = None
        try:
            active = [j for j in jobs(bin_dir, learner) if j.get("state") in ("JOB_QUEUED", "JOB_RUNNING")]
            if not active:
                spec = json.load(open(os.path.join(DEPLOY, "examples", "job-tiny.json")))
                spec["model_path"] = os.path.join(run_dir, "tiny-model")
                # Multi-turn, so the per-turn series the training dashboard
                # draws (kforge_learner_*_turn*) exist.
                spec["multi_turn"] = {"max_turns": 2}
                spec_file = os.path.join(work, "job-tiny.json")
                json.dump(spec, open(spec_file, "w"))
                r = kforge(bin_dir, ["submit", "--server", learner, spec_file], timeout=60)
                log(f"submitted deploy/examples/job-tiny.json: {r.stdout.strip().splitlines()[:1]} {r.stderr.strip()[-300:]}")
                active = [j for j in jobs(bin_dir, learner) if j.get("state") in ("JOB_QUEUED", "JOB_RUNNING")]
            ours = active[0]["id"] if active else None
        except Exception as e:
            failures.append(f"could not list or submit jobs: {e}")

        # Training series appear after the learner's first step.
        try:
            wait_for("the learner's first training step (kforge_learner_steps_total > 0)",
                     lambda: prom.query("sum(kforge_learner_steps_total) > 0"),
                     timeout=max(1, min(args.training_wait, deadline - time.monotonic() - 90)), interval=3,
                     proc=local)
            log("the learner trained a step")
        except RuntimeError as e:
            log(f"{e}: training expressions will fail")
        if ours:
            r = kforge(bin_dir, ["cancel", "--server", learner, ours], timeout=60)
            log(f"cancelled {ours} (a finished job): exit {r.returncode}")

        # Rates need two samples inside their window; poll until every
        # expression has data or the time is up.
        exprs = load_expressions()
        log(f"{len(exprs)} expressions from the dashboards and the PrometheusRule")
        poll_until = min(deadline - 30, time.monotonic() + 60)
        while True:
            results = {(w, e): check_expression(prom, w, e, k) for w, e, k in exprs}
            pending = [key for key, r in results.items() if r not in (None, "exempt")]
            if not pending or time.monotonic() > poll_until:
                break
            time.sleep(3)
        passed = exempt = 0
        for (where, expr), r in results.items():
            if r is None:
                passed += 1
            elif r == "exempt":
                exempt += 1
                log(f"  exempt {where}: DCGM exporter metrics (no GPU exporter runs here)")
            else:
                missing = missing_metrics(prom, expr)
                extra = f"\n      metrics with no series: {', '.join(missing)}" if missing else ""
                failures.append(f"{where}: {r}{extra}")
        log(f"expressions: {passed} returned data, {exempt} exempt, {len(results) - passed - exempt} failed")

        # Prometheus loaded and evaluated every rule without error.
        groups = prom.rules()
        loaded = [r for g in groups for r in g["rules"]]
        if len(loaded) != len(rule_list()):
            failures.append(f"Prometheus loaded {len(loaded)} rules, the PrometheusRule has {len(rule_list())}")
        for r in loaded:
            if r.get("health") != "ok":
                failures.append(f"rule {r['name']}: health {r.get('health')}: {r.get('lastError')}")
        firing = [r["name"] for r in loaded if r.get("state") == "firing"]
        log(f"Prometheus evaluates {len(loaded)} rules without error; firing now: {firing or 'none'}")
    except Exception as e:
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        stop_children()
        if failures:
            for name in ("kforge-local.log", "prometheus.log"):
                p = os.path.join(work, name)
                if os.path.exists(p):
                    tail = open(p, errors="replace").read()[-1500:]
                    print(f"--- tail of {name} ---\n{tail}")
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"\nFAILED ({len(failures)}):")
        for f in failures:
            print(f"  - {f}")
        return 1
    print("\nall PromQL expressions returned data; rules load and pass promtool")
    return 0


if __name__ == "__main__":
    sys.exit(main())
