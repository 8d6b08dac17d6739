// Offline checks of deploy/k8s, no cluster needed:
//  1. every kustomization (base, overlays, monitoring) renders with the
//     subset renderer (kustomize-subset.mjs); where `kubectl kustomize`
//     (kustomize v5) is installed, it renders too and must give the same
//     objects;
//  2. every rendered object, and every standalone manifest, validates
//     against the Kubernetes OpenAPI schema (kubernetes-models) or, for the
//     Prometheus Operator's PodMonitor / PrometheusRule, against the CRD
//     schema (@kubernetes-models/prometheus-operator);
//  3. the things an operator relies on hold in every overlay: references
//     resolve (ConfigMaps, claims, service accounts, Service and PDB
//     selectors, probe ports), the verifier pod is hardened, its
//     NetworkPolicy only lets it reach the learner and DNS, every container
//     has probes and resources, every image was mapped by `images`;
//  4. the Dockerfiles' targets run the binary, uid and ports the pods expect.
// Usage: node check-manifests.mjs [DEPLOY_DIR]
import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import yaml from "js-yaml";
import { render, loadYamlDocuments } from "./kustomize-subset.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const deployDir = path.resolve(process.argv[2] || path.join(here, ".."));
const k8sDir = path.join(deployDir, "k8s");

const KUSTOMIZATIONS = ["base", "overlays/cpu", "overlays/gpu", "overlays/gvisor", "monitoring"];
// Overlays an operator applies: they must be complete deployments.
const DEPLOYABLE = ["overlays/cpu", "overlays/gpu", "overlays/gvisor"];
const STANDALONE = ["overlays/gvisor/runtimeclass.yaml", "overlays/gpu/model-loader.yaml"];

let failures = 0;
const fail = (where, message) => {
  failures++;
  console.log(`FAIL ${where}: ${message}`);
};
const ok = (message) => console.log(`ok   ${message}`);

// --- schema validation ---------------------------------------------------
async function modelClass(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (group === "monitoring.coreos.com") {
    return (await import(`@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`))[kind];
  }
  const mod = group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
  return (await import(mod))[kind];
}

async function validate(where, o) {
  let Model;
  try {
    Model = await modelClass(o.apiVersion, o.kind);
  } catch (e) {
    return fail(where, `no schema for ${o.apiVersion} ${o.kind}`);
  }
  // The compiled schema validators accept fields they do not know; a
  // misspelt key (livenessprobe) must not pass silently. Run the validator
  // on a proxy that records which keys it looked at: a key it never read,
  // in an object whose keys it never listed (maps such as labels are
  // listed), is not in the schema.
  const t = track(o);
  try {
    Model.prototype.validate.call(t.proxy);
  } catch (e) {
    return fail(where, `${o.kind}/${o.metadata?.name}: schema: ${e.message}`);
  }
  const unknown = t.unknown();
  if (unknown.length) fail(where, `${o.kind}/${o.metadata?.name}: fields not in the schema: ${unknown.join(", ")}`);
}

function track(root) {
  const read = new WeakMap();
  const listed = new WeakSet();
  const proxies = new WeakMap();
  const wrap = (o) => {
    if (o === null || typeof o !== "object") return o;
    if (!proxies.has(o)) {
      proxies.set(o, new Proxy(o, {
        get(target, k, receiver) {
          if (typeof k === "string") {
            if (!read.has(target)) read.set(target, new Set());
            read.get(target).add(k);
          }
          return wrap(Reflect.get(target, k, receiver));
        },
        ownKeys(target) {
          listed.add(target);
          return Reflect.ownKeys(target);
        },
      }));
    }
    return proxies.get(o);
  };
  const unknown = (o, at = "") => {
    if (o === null || typeof o !== "object") return [];
    const out = [];
    for (const k of Object.keys(o)) {
      if (!Array.isArray(o) && !listed.has(o) && !read.get(o)?.has(k)) out.push(`${at}/${k}`);
      else out.push(...unknown(o[k], `${at}/${k}`));
    }
    return out;
  };
  return { proxy: wrap(root), unknown: () => unknown(root) };
}

// --- kubectl comparison ---------------------------------------------------
function kubectlKustomize() {
  try {
    const v = execFileSync("kubectl", ["version", "--client", "-o", "json"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
    const kv = JSON.parse(v).kustomizeVersion || "";
    const major = Number((kv.match(/^v(\d+)/) || [])[1]);
    return major >= 5 ? kv : null;
  } catch {
    return null;
  }
}

const key = (o) => `${o.apiVersion} ${o.kind} ${o.metadata?.namespace ?? ""}/${o.metadata?.name}`;
const canonical = (v) =>
  Array.isArray(v) ? v.map(canonical)
    : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical(v[k])]))
      : v;

function compareWithKubectl(name, ours) {
  const out = execFileSync("kubectl", ["kustomize", path.join(k8sDir, name)], { encoding: "utf8", maxBuffer: 64 << 20 });
  const theirs = yaml.loadAll(out).filter(Boolean);
  const a = new Map(ours.map((o) => [key(o), JSON.stringify(canonical(o))]));
  const b = new Map(theirs.map((o) => [key(o), JSON.stringify(canonical(o))]));
  let same = a.size === b.size;
  for (const [k, v] of a) {
    if (!b.has(k)) { fail(name, `kubectl kustomize has no ${k}`); same = false; }
    else if (b.get(k) !== v) { fail(name, `kubectl kustomize renders ${k} differently`); same = false; }
  }
  for (const k of b.keys()) if (!a.has(k)) { fail(name, `only kubectl kustomize renders ${k}`); same = false; }
  if (same) ok(`${name}: identical to kubectl kustomize (${a.size} objects)`);
}

// --- what the operator relies on -------------------------------------------
const WORKLOADS = new Set(["Deployment", "StatefulSet"]);
const matches = (selector, labels) =>
  Object.entries(selector || {}).every(([k, v]) => (labels || {})[k] === v);

// Every deployable overlay runs the mesh over mutual TLS with JobService
// tokens: each server names a certificate, key and CA inside a Secret volume
// of its pod (mounted whole, so renewals reach it), verifies its peers, and
// the learner wants tokens from a Secret too. The Secrets themselves are
// made outside the manifests (deploy/tls/make-k8s-secrets.sh or
// cert-manager), so only their mounts are checked here.
function checkSecurity(where, c, pod, cfg, ports) {
  const server = cfg.server || {};
  const tls = server.tls || {};
  const secretMounts = (c.volumeMounts || []).filter((m) => {
    const v = (pod.volumes || []).find((v) => v.name === m.name);
    return v?.secret && !m.subPath;
  });
  const inSecret = (f) => typeof f === "string" && secretMounts.some((m) => f.startsWith(m.mountPath.replace(/\/?$/, "/")));
  for (const key of ["cert_file", "key_file", "ca_file"]) {
    if (!inSecret(tls[key])) fail(where, `server.tls.${key} ${tls[key]} is not in a Secret volume mounted whole`);
  }
  if (!["optional", "require"].includes(tls.client_certs ?? "optional")) fail(where, "server.tls.client_certs must verify mesh peers");
  if (server.probe_port !== ports.get("probe")) fail(where, `server.probe_port ${server.probe_port} is not the container port named probe`);
  if ("learner_address" in cfg === false && "state_dir" in cfg) {  // the learner
    const tokens = server.auth?.job_token_files || [];
    if (!tokens.length || !tokens.every(inSecret)) fail(where, "server.auth.job_token_files must be files in a Secret volume");
  }
  if (server.auth?.allow_unauthenticated) fail(where, "server.auth.allow_unauthenticated is set");
}

function checkDeployable(name, objects) {
  const byKind = (kind) => objects.filter((o) => o.kind === kind);
  const find = (kind, n) => objects.find((o) => o.kind === kind && o.metadata.name === n);
  const workloads = objects.filter((o) => WORKLOADS.has(o.kind));
  const where = (o) => `${name}: ${o.kind}/${o.metadata.name}`;

  for (const o of objects) {
    if (!["Namespace", "RuntimeClass"].includes(o.kind) && o.metadata.namespace !== "kforge") {
      fail(name, `${o.kind}/${o.metadata.name} is not in namespace kforge`);
    }
  }
  for (const w of workloads) {
    const pod = w.spec.template.spec;
    const labels = w.spec.template.metadata.labels;
    if (!matches(w.spec.selector.matchLabels, labels)) fail(where(w), "selector does not match the pod labels");
    if (!find("ServiceAccount", pod.serviceAccountName)) fail(where(w), `no ServiceAccount ${pod.serviceAccountName}`);
    if (pod.automountServiceAccountToken !== false) fail(where(w), "service account token is mounted");
    const psc = pod.securityContext || {};
    if (psc.runAsNonRoot !== true || psc.seccompProfile?.type !== "RuntimeDefault") {
      fail(where(w), "pod must run as non-root with the RuntimeDefault seccomp profile");
    }
    const claims = new Set((w.spec.volumeClaimTemplates || []).map((c) => c.metadata.name));
    const volumes = new Set([...(pod.volumes || []).map((v) => v.name), ...claims]);
    for (const v of pod.volumes || []) {
      if (v.configMap && !find("ConfigMap", v.configMap.name)) fail(where(w), `volume ${v.name}: no ConfigMap ${v.configMap.name}`);
      if (v.persistentVolumeClaim && !find("PersistentVolumeClaim", v.persistentVolumeClaim.claimName)) {
        fail(where(w), `volume ${v.name}: no PersistentVolumeClaim ${v.persistentVolumeClaim.claimName}`);
      }
    }
    for (const c of [...(pod.initContainers || []), ...pod.containers]) {
      const init = (pod.initContainers || []).includes(c);
      if (!/^[^/]+\/.+:.+|@sha256:/.test(c.image)) fail(where(w), `container ${c.name}: image ${c.image} was not mapped to a registry and tag`);
      for (const m of c.volumeMounts || []) if (!volumes.has(m.name)) fail(where(w), `container ${c.name}: no volume ${m.name}`);
      const sc = c.securityContext || {};
      if (sc.allowPrivilegeEscalation !== false || !(sc.capabilities?.drop || []).includes("ALL")) {
        fail(where(w), `container ${c.name}: must drop ALL capabilities and disallow privilege escalation`);
      }
      if (!c.resources?.requests?.cpu || !c.resources?.requests?.memory || !c.resources?.limits?.memory) {
        fail(where(w), `container ${c.name}: needs cpu and memory requests and a memory limit`);
      }
      const gpuReq = c.resources?.requests?.["nvidia.com/gpu"], gpuLim = c.resources?.limits?.["nvidia.com/gpu"];
      if (gpuReq !== gpuLim) fail(where(w), `container ${c.name}: nvidia.com/gpu request and limit differ`);
      if (init) continue;
      const ports = new Map((c.ports || []).map((p) => [p.name, p.containerPort]));
      const args = c.args || [];
      const config = args[args.indexOf("--config") + 1];
      const cmName = (pod.volumes || []).find((v) => v.name === "config")?.configMap?.name;
      const cm = find("ConfigMap", cmName);
      const file = config && path.basename(config);
      const cfgOf = () => { try { return JSON.parse(cm?.data?.[file] ?? "{}"); } catch { return {}; } };
      // Kubernetes gRPC probes cannot speak TLS: a TLS server is probed on
      // its plaintext probe port (health only), a plaintext one on its gRPC port.
      const probePort = cfgOf().server?.tls?.cert_file ? ports.get("probe") : ports.get("grpc");
      for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
        const p = c[probe];
        if (!p?.grpc) { fail(where(w), `container ${c.name}: ${probe} must be a gRPC probe`); continue; }
        if (p.grpc.port !== probePort) fail(where(w), `container ${c.name}: ${probe} is not on the ${cfgOf().server?.tls?.cert_file ? "probe" : "grpc"} port`);
      }
      if (!ports.has("metrics")) fail(where(w), `container ${c.name}: no port named metrics`);
      checkSecurity(where(w), c, pod, cfgOf(), ports);
      if (!cm || !cm.data?.[file]) fail(where(w), `--config ${config} is not a key of the mounted ConfigMap`);
      else {
        const cfg = JSON.parse(cm.data[file]);
        if (cfg.server?.port !== ports.get("grpc")) fail(where(w), `${file}: server.port ${cfg.server?.port} is not the grpc containerPort`);
        if (cfg.server?.metrics_port !== ports.get("metrics")) fail(where(w), `${file}: server.metrics_port is not the metrics containerPort`);
        const grace = pod.terminationGracePeriodSeconds ?? 30;
        if ((cfg.server?.drain_timeout_s ?? 10) >= grace) fail(where(w), `${file}: drain_timeout_s must be below terminationGracePeriodSeconds`);
      }
    }
  }

  // Learner: StatefulSet of one with its state volume.
  const learner = find("StatefulSet", "kforge-learner");
  if (!learner || learner.spec.replicas !== 1) fail(name, "the learner must be a StatefulSet of 1");
  else if (!learner.spec.volumeClaimTemplates?.some((c) => c.metadata.name === "state")) fail(name, "learner: no state volumeClaimTemplate");

  // Verifier hardening.
  const verifier = find("Deployment", "kforge-verifier");
  if (verifier) {
    const c = verifier.spec.template.spec.containers[0];
    if (c.securityContext?.readOnlyRootFilesystem !== true) fail(name, "verifier: root filesystem must be read-only");
    if (verifier.spec.template.spec.hostNetwork || verifier.spec.template.spec.hostPID) fail(name, "verifier: host namespaces");
  } else fail(name, "no kforge-verifier Deployment");

  // Services select pods and name ports that exist.
  for (const s of byKind("Service")) {
    const pods = workloads.filter((w) => matches(s.spec.selector, w.spec.template.metadata.labels));
    if (!pods.length) { fail(name, `Service ${s.metadata.name} selects no pods`); continue; }
    for (const p of s.spec.ports) {
      const named = pods[0].spec.template.spec.containers.some((c) => (c.ports || []).some((cp) => cp.name === p.targetPort));
      if (!named) fail(name, `Service ${s.metadata.name}: targetPort ${p.targetPort} is no container port`);
    }
  }
  const verifierSvc = find("Service", "kforge-verifier");
  if (verifierSvc?.spec.clusterIP !== "None") fail(name, "the verifier Service must be headless");
  for (const pdb of byKind("PodDisruptionBudget")) {
    if (!workloads.some((w) => matches(pdb.spec.selector.matchLabels, w.spec.template.metadata.labels))) {
      fail(name, `PodDisruptionBudget ${pdb.metadata.name} selects no pods`);
    }
  }
  for (const w of workloads) {
    if (!byKind("PodDisruptionBudget").some((p) => matches(p.spec.selector.matchLabels, w.spec.template.metadata.labels))) {
      fail(name, `${w.kind}/${w.metadata.name} has no PodDisruptionBudget`);
    }
  }

  // Verifier NetworkPolicy: egress to the learner's gRPC port and DNS only.
  const np = byKind("NetworkPolicy").find((p) => verifier && matches(p.spec.podSelector.matchLabels, verifier.spec.template.metadata.labels));
  if (!np) fail(name, "no NetworkPolicy selects the verifier pods");
  else {
    if (!np.spec.policyTypes?.includes("Egress")) fail(name, "verifier NetworkPolicy does not restrict egress");
    const learnerLabels = learner?.spec.template.metadata.labels;
    for (const rule of np.spec.egress || []) {
      const ports = (rule.ports || []).map((p) => `${p.protocol || "TCP"}/${p.port}`);
      const toLearner = (rule.to || []).length > 0 && rule.to.every((t) => !t.namespaceSelector && !t.ipBlock && t.podSelector && matches(t.podSelector.matchLabels, learnerLabels));
      const toDns = (rule.to || []).length > 0 && rule.to.every((t) => t.podSelector?.matchLabels?.["k8s-app"] === "kube-dns" && t.namespaceSelector?.matchLabels);
      if (toLearner && ports.length && ports.every((p) => p === "TCP/50051")) continue;
      if (toDns && ports.length && ports.every((p) => /^(UDP|TCP)\/53$/.test(p))) continue;
      fail(name, `verifier NetworkPolicy egress rule allows more than the learner and DNS: ${JSON.stringify(rule)}`);
    }
    const learnerCfg = JSON.parse(find("ConfigMap", learner?.spec.template.spec.volumes.find((v) => v.name === "config").configMap.name)?.data["learner.json"] || "{}");
    if (learnerCfg.server?.port !== 50051) fail(name, "the NetworkPolicy allows port 50051 but the learner listens elsewhere");
  }

  // Configs point at the Services.
  const cm = byKind("ConfigMap").find((c) => c.metadata.name.startsWith("kforge-config"));
  const rollout = JSON.parse(cm?.data["rollout.json"] || "{}");
  const verifierCfg = JSON.parse(cm?.data["verifier.json"] || "{}");
  if (rollout.verifier_target !== `dns:///kforge-verifier:${verifierSvc?.spec.ports[0].port}`) {
    fail(name, `rollout.json verifier_target ${rollout.verifier_target} is not the headless verifier Service`);
  }
  for (const [file, cfg] of [["rollout.json", rollout], ["verifier.json", verifierCfg]]) {
    if (cfg.learner_address !== "kforge-learner:50051") fail(name, `${file}: learner_address is not the learner Service`);
  }
  ok(`${name}: references, probes, resources, hardening, network policy`);
}

// --- main -----------------------------------------------------------------
const kubectl = kubectlKustomize();
console.log(kubectl ? `kubectl kustomize ${kubectl} found: comparing renders` : "kubectl with kustomize v5 not found: subset renderer only");
const rendered = {};
for (const name of KUSTOMIZATIONS) {
  try {
    rendered[name] = render(path.join(k8sDir, name));
  } catch (e) {
    fail(name, `render: ${e.message}`);
    continue;
  }
  ok(`${name}: renders ${rendered[name].length} objects`);
  for (const o of rendered[name]) await validate(name, o);
  if (kubectl) {
    try {
      compareWithKubectl(name, rendered[name]);
    } catch (e) {
      fail(name, `kubectl kustomize: ${e.message.split("\n")[0]}`);
    }
  }
}
for (const name of DEPLOYABLE) if (rendered[name]) checkDeployable(name, rendered[name]);

// The base names its images by digest (deploy/images/pin.sh); the GPU
// overlays replace every one with a CUDA image, never keep a CPU one.
const imagesOf = (objects) => (objects || []).filter((o) => WORKLOADS.has(o.kind)).flatMap((w) =>
  [...(w.spec.template.spec.initContainers || []), ...w.spec.template.spec.containers].map((c) => c.image));
const baseImages = new Set(imagesOf(rendered["base"]));
for (const image of baseImages) {
  if (!/@sha256:[0-9a-f]{64}$/.test(image)) fail("base", `image ${image} is not pinned by digest`);
}
for (const name of ["overlays/gpu", "overlays/gvisor"]) {
  for (const image of imagesOf(rendered[name])) {
    if (baseImages.has(image)) fail(name, `image ${image} is the base's CPU image`);
  }
}
ok("base: images pinned by digest; GPU overlays replace them");
for (const file of STANDALONE) {
  for (const o of loadYamlDocuments(path.join(k8sDir, file))) await validate(file, o);
  ok(`${file}: validates`);
}

// Monitoring objects: the parts the operator and Grafana need.
const mon = rendered["monitoring"] || [];
const dashboards = mon.filter((o) => o.kind === "ConfigMap");
for (const d of dashboards) {
  if (d.metadata.labels?.grafana_dashboard !== "1") fail("monitoring", `${d.metadata.name} lacks grafana_dashboard=1`);
  for (const [k, v] of Object.entries(d.data)) {
    try {
      const j = JSON.parse(v);
      if (!j.uid || !Array.isArray(j.panels) || !j.panels.length) fail("monitoring", `${k}: not a Grafana dashboard`);
    } catch (e) {
      fail("monitoring", `${k}: ${e.message}`);
    }
  }
}
const files = fs.readdirSync(path.join(k8sDir, "monitoring/dashboards")).filter((f) => f.endsWith(".json"));
if (dashboards.length !== files.length) fail("monitoring", `${files.length} dashboard files but ${dashboards.length} ConfigMaps`);
const podMonitor = mon.find((o) => o.kind === "PodMonitor");
const deployed = rendered["overlays/gpu"] || [];
for (const w of deployed.filter((o) => WORKLOADS.has(o.kind))) {
  if (!podMonitor || !matches(podMonitor.spec.selector.matchLabels, w.spec.template.metadata.labels)) {
    fail("monitoring", `the PodMonitor does not scrape ${w.metadata.name}`);
  }
}
if (podMonitor) ok(`monitoring: PodMonitor scrapes every workload; ${dashboards.length} dashboards`);

// The Dockerfiles build what the manifests run: a target per service whose
// entrypoint is that service's binary, as the non-root uid the pods run as,
// exposing the ports the pods declare; stages and files they copy exist.
const base = rendered["base"] || [];
for (const file of ["cpu.Dockerfile", "cuda.Dockerfile"]) {
  const where = `docker/${file}`;
  const text = fs.readFileSync(path.join(deployDir, "docker", file), "utf8").replace(/\\\n/g, " ");
  const stages = {};
  let current = null;
  for (const line of text.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"))) {
    const from = line.match(/^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i);
    if (from) {
      current = { base: from[1], lines: [] };
      if (from[2]) stages[from[2]] = current;
      continue;
    }
    if (current) current.lines.push(line);
  }
  const inherited = (stage, re) => {
    for (let s = stage; s; s = stages[s.base]) {
      const hit = [...s.lines].reverse().find((l) => re.test(l));
      if (hit) return hit;
    }
    return null;
  };
  for (const [name, stage] of Object.entries(stages)) {
    for (const l of stage.lines) {
      const m = l.match(/--from=(\S+)/);
      if (m && !stages[m[1]]) fail(where, `stage ${name} copies from unknown stage ${m[1]}`);
      for (const script of l.match(/deploy\/docker\/[\w.-]+/g) || []) {
        if (!fs.existsSync(path.join(deployDir, "..", script))) fail(where, `${script} does not exist`);
      }
    }
  }
  for (const svc of ["learner", "rollout", "verifier"]) {
    const stage = stages[svc];
    if (!stage) { fail(where, `no target ${svc}`); continue; }
    const w = base.find((o) => WORKLOADS.has(o.kind) && o.metadata.name === `kforge-${svc}`);
    const pod = w?.spec.template.spec;
    const entry = inherited(stage, /^ENTRYPOINT/) || "";
    if (!entry.includes(`"kforge-${svc}"`)) fail(where, `target ${svc}: ENTRYPOINT does not run kforge-${svc}`);
    const user = (inherited(stage, /^USER/) || "").split(/\s+/)[1] || "root";
    if (String(pod?.securityContext?.runAsUser) !== user.split(":")[0]) {
      fail(where, `target ${svc}: USER ${user} is not the pods' runAsUser ${pod?.securityContext?.runAsUser}`);
    }
    const exposed = (inherited(stage, /^EXPOSE/) || "").split(/\s+/).slice(1).map(Number).sort();
    const declared = (pod?.containers[0].ports || []).map((p) => p.containerPort).sort();
    if (JSON.stringify(exposed) !== JSON.stringify(declared)) {
      fail(where, `target ${svc}: EXPOSE ${exposed} but the pod declares ${declared}`);
    }
  }
  ok(`${where}: targets learner, rollout, verifier match the manifests`);
}

// The example jobs are JSON that SubmitJob can parse.
for (const f of fs.readdirSync(path.join(deployDir, "examples")).filter((f) => f.endsWith(".json"))) {
  try {
    const j = JSON.parse(fs.readFileSync(path.join(deployDir, "examples", f), "utf8"));
    if (!j.model_path?.startsWith("/models/") || !j.tasks) fail(`examples/${f}`, "model_path must be under /models and tasks set");
    else ok(`examples/${f}: parses`);
  } catch (e) {
    fail(`examples/${f}`, e.message);
  }
}

if (failures) {
  console.log(`\n${failures} check(s) failed`);
  process.exit(1);
}
console.log("\nall manifest checks passed");
