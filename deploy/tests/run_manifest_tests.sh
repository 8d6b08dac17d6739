#!/usr/bin/env bash
# Offline checks of deploy/ (no cluster): renders every kustomization and
# validates every object against the Kubernetes OpenAPI schema
# (check-manifests.mjs), checks the dashboards match their generator, and
# runs promtool on the alert rules. Needs node and npm (installs the pinned
# packages of package-lock.json into deploy/tests/node_modules once, from the
# npm registry or its cache), python3 with PyYAML, and promtool (Debian
# package prometheus).
set -euo pipefail
cd "$(dirname "$0")"

# npm ci only when node_modules is missing or older than the lock file.
stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  echo "deploy tests: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

status=0
node check-manifests.mjs || status=1

python3 ../k8s/monitoring/dashboards/generate.py --check && echo "ok   dashboards match generate.py" || status=1

if command -v promtool >/dev/null; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  python3 - "$work" <<'PY' || status=1
import sys, prometheus_test as t
sys.exit(1 if t.promtool_checks(sys.argv[1]) else 0)
PY
else
  echo "FAIL promtool not found (Debian package prometheus)"
  status=1
fi
exit $status
