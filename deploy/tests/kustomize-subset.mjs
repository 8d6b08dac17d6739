// A renderer for the subset of kustomize that deploy/k8s uses, so the
// manifests can be rendered and checked offline where no kustomize (or
// `kubectl kustomize`) is installed. Where kubectl is present,
// check-manifests.mjs renders with both and requires identical objects, so
// this file cannot drift from what `kubectl apply -k` applies.
//
// Supported (anything else in a kustomization.yaml is an error, so a new
// feature cannot slip in untested):
//   resources           files (multi-document YAML) and directories holding
//                       a kustomization.yaml
//   namespace           set on every namespaced object
//   images              name -> newName / newTag / digest, in containers and
//                       initContainers anywhere in an object
//   configMapGenerator  files, behavior create|merge|replace,
//                       options.labels / annotations / disableNameSuffixHash;
//                       the content-hash suffix is computed as kustomize does
//                       and references from pod volumes, envFrom and env are
//                       renamed with it
//   patches             JSON 6902 patch files (a YAML list of operations:
//                       add, remove, replace, test, copy) with a kind/name target
// Transformer order follows kustomize: resources, generators, patches,
// namespace, images; name hashes are applied once, at the top.
import fs from "node:fs";
import path from "node:path";
import crypto from "node:crypto";
import yaml from "js-yaml";

const KNOWN_FIELDS = new Set([
  "apiVersion", "kind", "resources", "namespace", "images", "configMapGenerator", "patches",
]);

// Kinds that are not namespaced (of those kforge or its tests could use).
const CLUSTER_SCOPED = new Set([
  "Namespace", "RuntimeClass", "ClusterRole", "ClusterRoleBinding", "PersistentVolume",
  "StorageClass", "CustomResourceDefinition", "PriorityClass", "Node",
]);

export function loadYamlDocuments(file) {
  return yaml.loadAll(fs.readFileSync(file, "utf8")).filter((d) => d != null);
}

function kustomizationFile(dir) {
  for (const name of ["kustomization.yaml", "kustomization.yml", "Kustomization"]) {
    const f = path.join(dir, name);
    if (fs.existsSync(f)) return f;
  }
  throw new Error(`${dir}: no kustomization.yaml`);
}

// Renders the kustomization in `dir`; returns a list of objects.
export function render(dir) {
  const objects = build(path.resolve(dir));
  applyNameHashes(objects);
  for (const o of objects) delete o.__generated;
  return objects;
}

function build(dir) {
  const file = kustomizationFile(dir);
  const k = yaml.load(fs.readFileSync(file, "utf8")) || {};
  for (const key of Object.keys(k)) {
    if (!KNOWN_FIELDS.has(key)) throw new Error(`${file}: kustomize field "${key}" is outside the supported subset`);
  }
  if (k.kind !== "Kustomization") throw new Error(`${file}: kind must be Kustomization`);
  let objects = [];
  for (const r of k.resources || []) {
    const p = path.resolve(dir, r);
    if (!fs.existsSync(p)) throw new Error(`${file}: resource ${r} does not exist`);
    if (fs.statSync(p).isDirectory()) objects.push(...build(p));
    else objects.push(...loadYamlDocuments(p));
  }
  for (const g of k.configMapGenerator || []) objects = generateConfigMap(dir, file, g, objects);
  for (const p of k.patches || []) applyPatch(dir, file, p, objects);
  if (k.namespace) {
    for (const o of objects) {
      if (!CLUSTER_SCOPED.has(o.kind)) (o.metadata ||= {}).namespace = k.namespace;
    }
  }
  for (const image of k.images || []) setImage(objects, image);
  checkUnique(objects, file);
  return objects;
}

function checkUnique(objects, file) {
  const seen = new Set();
  for (const o of objects) {
    const id = `${o.apiVersion}/${o.kind}/${o.metadata?.namespace ?? ""}/${o.metadata?.name}`;
    if (seen.has(id)) throw new Error(`${file}: duplicate object ${id}`);
    seen.add(id);
  }
}

function generateConfigMap(dir, file, g, objects) {
  const known = new Set(["name", "behavior", "files", "options"]);
  for (const key of Object.keys(g)) {
    if (!known.has(key)) throw new Error(`${file}: configMapGenerator field "${key}" is outside the supported subset`);
  }
  const data = {};
  for (const f of g.files || []) {
    const [key, rel] = f.includes("=") ? f.split("=", 2) : [path.basename(f), f];
    data[key] = fs.readFileSync(path.resolve(dir, rel), "utf8");
  }
  const options = g.options || {};
  const behavior = g.behavior || "create";
  const existing = objects.find((o) => o.__generated && o.kind === "ConfigMap" && o.__generated.name === g.name);
  if (behavior === "create") {
    if (existing) throw new Error(`${file}: ConfigMap ${g.name} already generated; use behavior merge or replace`);
    const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: g.name }, data };
    if (options.labels) cm.metadata.labels = { ...options.labels };
    if (options.annotations) cm.metadata.annotations = { ...options.annotations };
    Object.defineProperty(cm, "__generated", {
      value: { name: g.name, hash: !options.disableNameSuffixHash }, enumerable: false, configurable: true,
    });
    return [...objects, cm];
  }
  if (!existing) throw new Error(`${file}: behavior ${behavior} but no ConfigMap ${g.name} to ${behavior}`);
  existing.data = behavior === "merge" ? { ...existing.data, ...data } : data;
  if (options.labels) existing.metadata.labels = { ...existing.metadata.labels, ...options.labels };
  if (options.annotations) existing.metadata.annotations = { ...existing.metadata.annotations, ...options.annotations };
  return objects;
}

// kustomize's api/hasher: sha256 over the Go JSON encoding of
// {data, kind, name} (sorted keys, HTML-escaped), first 10 hex digits with
// 0 1 3 a e replaced by g h k m t. kustomize v5 looks the name up as one key
// "metadata/name", finds nothing and hashes an empty name; so does this.
function configMapHash(cm) {
  const sortObject = (o) => Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
  const encoded = JSON.stringify({ data: sortObject(cm.data || {}), kind: "ConfigMap", name: "" })
    .replace(/</g, "\\u003c").replace(/>/g, "\\u003e").replace(/&/g, "\\u0026")
    .replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
  const hex = crypto.createHash("sha256").update(encoded).digest("hex");
  const map = { 0: "g", 1: "h", 3: "k", a: "m", e: "t" };
  return [...hex.slice(0, 10)].map((c) => map[c] ?? c).join("");
}

function applyNameHashes(objects) {
  const renames = new Map();
  for (const o of objects) {
    if (o.kind === "ConfigMap" && o.__generated?.hash) {
      const hashed = `${o.metadata.name}-${configMapHash(o)}`;
      renames.set(o.metadata.name, hashed);
      o.metadata.name = hashed;
    }
  }
  const visit = (node) => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (node === null || typeof node !== "object") return;
    for (const key of ["configMap", "configMapRef", "configMapKeyRef"]) {
      const ref = node[key];
      if (ref && typeof ref.name === "string" && renames.has(ref.name)) ref.name = renames.get(ref.name);
    }
    Object.values(node).forEach(visit);
  };
  for (const o of objects) if (o.kind !== "ConfigMap") visit(o);
}

function applyPatch(dir, file, p, objects) {
  const known = new Set(["path", "target"]);
  for (const key of Object.keys(p)) {
    if (!known.has(key)) throw new Error(`${file}: patches field "${key}" is outside the supported subset`);
  }
  const ops = yaml.load(fs.readFileSync(path.resolve(dir, p.path), "utf8"));
  if (!Array.isArray(ops)) throw new Error(`${p.path}: only JSON 6902 patches (a list of operations) are supported`);
  const t = p.target || {};
  for (const key of Object.keys(t)) {
    if (!["kind", "name"].includes(key)) throw new Error(`${file}: patch target field "${key}" is outside the supported subset`);
  }
  const targets = objects.filter((o) => o.kind === t.kind && o.metadata?.name === t.name);
  if (targets.length !== 1) throw new Error(`${file}: patch ${p.path} matches ${targets.length} objects (${t.kind}/${t.name})`);
  for (const op of ops) applyOperation(targets[0], op, p.path);
}

function pointer(p) {
  if (p === "") return [];
  if (!p.startsWith("/")) throw new Error(`bad JSON pointer ${p}`);
  return p.slice(1).split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function applyOperation(doc, op, where) {
  // copy: an add of the value found at `from`.
  if (op.op === "copy") {
    let value = doc;
    for (const part of pointer(op.from)) {
      value = Array.isArray(value) ? value[Number(part)] : value?.[part];
      if (value === undefined) throw new Error(`${where}: copy from ${op.from}: ${part} does not exist`);
    }
    return applyOperation(doc, { op: "add", path: op.path, value }, where);
  }
  const parts = pointer(op.path);
  const last = parts.pop();
  let parent = doc;
  for (const part of parts) {
    parent = Array.isArray(parent) ? parent[Number(part)] : parent?.[part];
    if (parent === undefined) throw new Error(`${where}: ${op.op} ${op.path}: ${part} does not exist`);
  }
  const clone = (v) => (v === undefined ? v : JSON.parse(JSON.stringify(v)));
  if (Array.isArray(parent)) {
    const index = last === "-" ? parent.length : Number(last);
    if (!Number.isInteger(index) || index < 0 || index > parent.length) {
      throw new Error(`${where}: ${op.op} ${op.path}: bad array index`);
    }
    if (op.op === "add") parent.splice(index, 0, clone(op.value));
    else if (index >= parent.length) throw new Error(`${where}: ${op.op} ${op.path}: no element ${index}`);
    else if (op.op === "replace") parent[index] = clone(op.value);
    else if (op.op === "remove") parent.splice(index, 1);
    else if (op.op === "test") assertEqual(parent[index], op.value, where, op.path);
    else throw new Error(`${where}: operation ${op.op} is outside the supported subset`);
    return;
  }
  if (op.op === "add") parent[last] = clone(op.value);
  else if (!(last in parent)) throw new Error(`${where}: ${op.op} ${op.path}: does not exist`);
  else if (op.op === "replace") parent[last] = clone(op.value);
  else if (op.op === "remove") delete parent[last];
  else if (op.op === "test") assertEqual(parent[last], op.value, where, op.path);
  else throw new Error(`${where}: operation ${op.op} is outside the supported subset`);
}

function assertEqual(a, b, where, p) {
  if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error(`${where}: test ${p} failed`);
}

function setImage(objects, image) {
  const visit = (node) => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (node === null || typeof node !== "object") return;
    for (const key of ["containers", "initContainers"]) {
      for (const c of Array.isArray(node[key]) ? node[key] : []) {
        if (typeof c.image !== "string") continue;
        const m = c.image.match(/^(.*?)(?::([^:/@]+))?(?:@(.+))?$/);
        if (m[1] !== image.name) continue;
        let ref = image.newName ?? m[1];
        if (image.digest) ref += `@${image.digest}`;
        else if (image.newTag) ref += `:${image.newTag}`;
        else if (m[2]) ref += `:${m[2]}`;
        else if (m[3]) ref += `@${m[3]}`;
        c.image = ref;
      }
    }
    Object.values(node).forEach(visit);
  };
  objects.forEach(visit);
}
