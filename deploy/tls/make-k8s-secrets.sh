#!/usr/bin/env bash
# Makes the Secrets the kforge manifests mount (deploy/k8s/base), with a CA of
# its own (make-certs.sh, openssl):
#
#   deploy/tls/make-k8s-secrets.sh [DIR] | kubectl apply -f -
#
#   kforge-learner-tls, kforge-rollout-tls, kforge-verifier-tls
#       tls.crt, tls.key, ca.crt: each service's certificate (serverAuth and
#       clientAuth), for its Service names in namespace NAMESPACE (default
#       kforge); the learner's also for localhost, so
#       `kubectl port-forward` plus `--ca_file ca.crt` verifies.
#   kforge-job-tokens
#       tokens: one random bearer token (JobService), also left in
#       DIR/job-token for you (default DIR: ./kforge-secrets, mode 0700).
#
# Prints the Secrets as YAML (kubectl's own rendering, --dry-run=client).
# The same keys are what cert-manager writes (a Certificate per service with
# secretName kforge-<service>-tls and the CA issuer's ca.crt), which then
# renews them; the pods pick renewals up without a restart (README
# "Security"). Run again to add a token: DIR/job-tokens keeps every token
# made, one per line, so the old one keeps working until you delete it
# there and apply again.
set -euo pipefail
dir=${1:-kforge-secrets}
ns=${NAMESPACE:-kforge}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir" && chmod 0700 "$dir"

names() {  # the names a Service's certificate must carry
  echo "$1" "$1.$ns" "$1.$ns.svc" "$1.$ns.svc.cluster.local"
}
for svc in learner rollout verifier; do
  extra=()
  [ "$svc" = learner ] && extra=(localhost 127.0.0.1)
  [ -f "$dir/kforge-$svc.crt" ] || \
    "$here/make-certs.sh" "$dir" "kforge-$svc" $(names "kforge-$svc" | cut -d' ' -f2-) "${extra[@]}" >&2
done
if [ ! -f "$dir/job-token" ] || [ "${NEW_TOKEN:-0}" = 1 ]; then
  openssl rand -hex 32 > "$dir/job-token"
  cat "$dir/job-token" >> "$dir/job-tokens"
  echo "new JobService token in $dir/job-token" >&2
fi
chmod 0600 "$dir"/*.key "$dir/job-token" "$dir/job-tokens"

for svc in learner rollout verifier; do
  kubectl create secret generic "kforge-$svc-tls" --namespace "$ns" --type kubernetes.io/tls \
    --from-file=tls.crt="$dir/kforge-$svc.crt" --from-file=tls.key="$dir/kforge-$svc.key" \
    --from-file=ca.crt="$dir/ca.crt" --dry-run=client -o yaml
  echo ---
done
kubectl create secret generic kforge-job-tokens --namespace "$ns" \
  --from-file=tokens="$dir/job-tokens" --dry-run=client -o yaml
