"""Reading docker/k8s the way kustomize does, and the small facts the checks need.

A kustomization directory is one holding kustomization.yaml; its `resources`
are YAML files or other kustomization directories, resolved recursively.
Files named *.example.yaml are Secret examples: deliberately not resources
(`kubectl apply -k` would overwrite the real Secret with placeholders), read
here to know which variables a pod gets.
"""

import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from k8s_schema import validate_kustomization

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "docker" / "k8s"
KUSTOMIZATION = "kustomization.yaml"
WORKLOADS = ("Deployment", "StatefulSet")


class _StrictLoader(yaml.SafeLoader):
    """Refuses duplicate keys, which YAML parsers (and kubectl) resolve silently."""


def _mapping(loader, node, deep=False):
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_all(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.load_all(f, Loader=_StrictLoader) if d is not None]


@dataclass
class Doc:
    source: Path
    index: int
    body: dict

    @property
    def kind(self):
        return self.body.get("kind")

    @property
    def name(self):
        return (self.body.get("metadata") or {}).get("name")

    def __str__(self):
        return f"{self.source.relative_to(REPO)}: {self.kind}/{self.name}"


@dataclass
class Resolved:
    """One kustomization with everything it pulls in."""
    directory: Path
    docs: list = field(default_factory=list)
    examples: list = field(default_factory=list)   # Docs of the *.example.yaml files met
    errors: list = field(default_factory=list)

    def find(self, kind, name=None):
        return [d for d in self.docs if d.kind == kind and (name is None or d.name == name)]


def kustomization_dirs():
    return sorted(p.parent for p in K8S.rglob(KUSTOMIZATION))


def resolve(directory, stack=()):
    out = Resolved(directory)
    rel = directory.relative_to(REPO)
    if directory in stack:
        out.errors.append(f"{rel}: kustomization cycle through {' -> '.join(str(s.relative_to(REPO)) for s in stack)}")
        return out
    try:
        docs = load_all(directory / KUSTOMIZATION)
    except (OSError, yaml.YAMLError) as e:
        out.errors.append(f"{rel}/{KUSTOMIZATION}: {e}")
        return out
    if len(docs) != 1 or not isinstance(docs[0], dict):
        out.errors.append(f"{rel}/{KUSTOMIZATION}: must be one map")
        return out
    out.errors += [f"{rel}/{KUSTOMIZATION}: {e}" for e in validate_kustomization(docs[0])]
    resources = docs[0].get("resources") or []
    for res in resources if isinstance(resources, list) else []:
        path = (directory / str(res)).resolve()
        if path.is_dir():
            if not (path / KUSTOMIZATION).is_file():
                out.errors.append(f"{rel}: resource '{res}' is a directory without {KUSTOMIZATION}")
                continue
            sub = resolve(path, stack + (directory,))
            out.docs += sub.docs
            out.examples += sub.examples
            out.errors += sub.errors
        elif path.is_file():
            if path.suffix not in (".yaml", ".yml"):
                out.errors.append(f"{rel}: resource '{res}' is not a .yaml file")
                continue
            try:
                bodies = load_all(path)
            except yaml.YAMLError as e:
                out.errors.append(f"{path.relative_to(REPO)}: {e}")
                continue
            if not bodies:
                out.errors.append(f"{path.relative_to(REPO)}: no document")
            out.docs += [Doc(path, i, b) for i, b in enumerate(bodies)]
        else:
            out.errors.append(f"{rel}: resource '{res}' does not exist")
    # Every other YAML file here must be a resource or a Secret example.
    listed = {(directory / str(r)).resolve() for r in resources if isinstance(r, str)}
    for f in sorted(directory.iterdir()):
        if f.suffix not in (".yaml", ".yml") or f.name == KUSTOMIZATION:
            continue
        if f.name.endswith((".example.yaml", ".example.yml")):
            try:
                out.examples += [Doc(f, i, b) for i, b in enumerate(load_all(f))]
            except yaml.YAMLError as e:
                out.errors.append(f"{f.relative_to(REPO)}: {e}")
        elif f.resolve() not in listed:
            out.errors.append(f"{f.relative_to(REPO)}: not listed in {rel}/{KUSTOMIZATION} (a forgotten resource?)")
    seen = {}
    for d in out.docs:
        key = (d.kind, d.name)
        if key in seen and seen[key] is not d:
            out.errors.append(f"{d}: defined twice (also in {seen[key].source.relative_to(REPO)})")
        seen.setdefault(key, d)
    out.docs = list({id(d): d for d in out.docs}.values())
    return out


# --- values -------------------------------------------------------------------

_ENV_REF = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}")


def expand(value, env):
    """The relay's ${NAME} / ${NAME:-default} / $$ expansion (docs/configuration.md)."""
    if not isinstance(value, str):
        return value

    def sub(m):
        if m.group(0) == "$$":
            return "$"
        got = env.get(m.group(1), "")
        if got:
            return got
        if m.group(2) is not None:
            return m.group(3)
        raise KeyError(m.group(1))
    return _ENV_REF.sub(sub, value)


def env_refs(text):
    """Names referenced without a default in a relay config."""
    return {m.group(1) for m in _ENV_REF.finditer(text) if m.group(1) and m.group(2) is None}


_PLACEHOLDER = re.compile(r"<([^<>]*)>")


def fill_examples(examples):
    """Secret name -> {key: value}, placeholders replaced by valid dummies.

    A whole-value placeholder becomes a sha256 digest for *_SHA256 keys and a
    plain token otherwise; a placeholder inside a value (REDIS_URL's password)
    that names a key of some example becomes that key's dummy, so that
    references between secrets stay consistent.
    """
    raw = {}
    for d in examples:
        if d.kind == "Secret":
            raw[d.name] = dict((d.body.get("stringData") or {}))
    filled = {}

    def whole(key, value):
        if key.endswith("_SHA256"):
            return hashlib.sha256(f"dummy {key}".encode()).hexdigest()
        return "dummy" + hashlib.sha256(f"{key} {value}".encode()).hexdigest()[:24]

    for name, data in raw.items():
        filled[name] = {k: whole(k, v) if _PLACEHOLDER.fullmatch(str(v)) else v for k, v in data.items()}
    for name, data in filled.items():
        for k, v in data.items():
            def sub(m):
                ref = m.group(1).strip()
                for source in [filled[name]] + list(filled.values()):
                    if ref in source and not _PLACEHOLDER.search(str(source[ref])):
                        return source[ref]
                return whole(ref, m.group(0))
            data[k] = _PLACEHOLDER.sub(sub, str(v))
    return filled


def parse_endpoint(text):
    m = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^:\[\]]+):(\d+)", str(text))
    if not m:
        raise ValueError(f"not host:port: {text!r}")
    return (m.group(1), int(m.group(2))) if m.group(1) else (m.group(3), int(m.group(4)))


def is_loopback(host):
    return host == "localhost" or host == "::1" or host.startswith("127.")


def quantity(value):
    """A Kubernetes quantity as a float (cpu in cores, memory in bytes)."""
    s = str(value)
    suffixes = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
                "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    for suffix in sorted(suffixes, key=len, reverse=True):
        if s.endswith(suffix):
            return float(s[: -len(suffix)]) * suffixes[suffix]
    return float(s)


def cores(value):
    return math.ceil(quantity(value) - 1e-9)


def image_name(image):
    """'registry.example.com/team/kimi-relay:1.2' -> 'kimi-relay'."""
    return str(image).rsplit("/", 1)[-1].split("@")[0].split(":")[0]


def labels_match(selector, labels):
    return bool(selector) and all((labels or {}).get(k) == v for k, v in selector.items())


# --- the model of a pod -------------------------------------------------------

class Pod:
    def __init__(self, doc):
        self.doc = doc
        template = doc.body["spec"]["template"]
        self.labels = (template.get("metadata") or {}).get("labels") or {}
        self.annotations = (template.get("metadata") or {}).get("annotations") or {}
        self.spec = template["spec"]
        self.containers = (self.spec.get("initContainers") or []) + self.spec["containers"]
        self.volumes = {v["name"]: v for v in self.spec.get("volumes") or []}

    def of_image(self, name):
        return [c for c in self.containers if image_name(c.get("image", "")) == name]

    def resolve_port(self, port):
        """A Service targetPort or probe port (number or name) -> a container port number."""
        for c in self.containers:
            for p in c.get("ports") or []:
                if port in (p["containerPort"], p.get("name")):
                    return p["containerPort"]
        return None

    def security(self, container, key):
        return (container.get("securityContext") or {}).get(key, (self.spec.get("securityContext") or {}).get(key))


def pods(docs):
    return [Pod(d) for d in docs if d.kind in WORKLOADS]


def selected_pods(selector, docs):
    return [p for p in pods(docs) if labels_match(selector, p.labels)]


def container_env(pod, container, secrets, docs):
    """The environment a container gets, with the Secret examples' dummies."""
    env, errors = {}, []

    def secret(name):
        if name not in secrets:
            errors.append(f"Secret '{name}' has no *.example.yaml")
        return secrets.get(name, {})
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        if "secretRef" in source:
            data = secret(source["secretRef"]["name"])
        else:
            cms = [d for d in docs if d.kind == "ConfigMap" and d.name == source["configMapRef"]["name"]]
            data = cms[0].body.get("data", {}) if cms else {}
        env.update({prefix + k: v for k, v in data.items()})
    for var in container.get("env") or []:
        ref = (var.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            data = secret(ref["name"])
            if ref["key"] not in data and ref["name"] in secrets:
                errors.append(f"env {var['name']}: Secret '{ref['name']}' has no key '{ref['key']}'")
            env[var["name"]] = data.get(ref["key"], "")
        else:
            env[var["name"]] = var.get("value", "")
    return env, errors


def mounted_file(pod, container, path, docs):
    """(ConfigMap doc, key, text, mount) of the file at `path` in the container."""
    mounts = [m for m in container.get("volumeMounts") or []
              if path.startswith(m["mountPath"].rstrip("/") + "/")]
    if not mounts:
        return None
    mount = max(mounts, key=lambda m: len(m["mountPath"]))
    cm = pod.volumes.get(mount["name"], {}).get("configMap")
    if cm is None:
        return None
    rel = path[len(mount["mountPath"].rstrip("/")) + 1:]
    key = next((i["key"] for i in cm.get("items") or [] if i["path"] == rel), None if cm.get("items") else rel)
    for d in docs:
        if d.kind == "ConfigMap" and d.name == cm.get("name") and key in (d.body.get("data") or {}):
            return d, key, d.body["data"][key], mount
    return None


def prestop_seconds(container):
    handler = ((container.get("lifecycle") or {}).get("preStop")) or {}
    if "sleep" in handler:
        return handler["sleep"]["seconds"]
    command = " ".join((handler.get("exec") or {}).get("command") or [])
    m = re.fullmatch(r"(?:/bin/)?(?:sh -c )?(?:/bin/)?sleep (\d+)", command)
    return int(m.group(1)) if m else (None if handler else 0)
