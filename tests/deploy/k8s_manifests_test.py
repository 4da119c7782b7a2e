#!/usr/bin/python3
"""Offline checks of the Kubernetes manifests in docker/k8s.

    RELAY_BIN=build/kimi-relay /usr/bin/python3 tests/deploy/k8s_manifests_test.py [-v]

CTest runs it as deploy.k8s (label integration) with RELAY_BIN set. It needs
only Debian's python3-yaml: no cluster, no kubectl, no network.

1. Every kustomization resolves: its resources exist, nested kustomizations
   resolve, no YAML file in a kustomization directory is left unlisted
   (Secret examples, *.example.yaml, excepted on purpose), no object twice.
2. Every document is a known apiVersion/kind and matches the hand-written
   schema in k8s_schema.py (unknown keys and wrong types fail).
3. The properties the deployment relies on: selectors, Services, the PDB, the
   HPA and the ServiceMonitor reach the right pods and ports; probes and
   container ports agree with the relay config's listeners; every container
   is non-root with a read-only root, no privilege escalation, no
   capabilities and the RuntimeDefault seccomp profile, and has resources;
   the grace period outlasts preStop + drain; the relay configs pass
   `kimi-relay --check-config` with the env their pods get (Secret examples
   filled with dummies); Redis persists (appendonly yes) and never evicts.
"""

import math
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from urllib.parse import urlsplit

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml  # noqa: E402

from k8s_model import (REPO, K8S, KUSTOMIZATION, WORKLOADS, Pod, container_env, cores,  # noqa: E402
                       env_refs, expand, fill_examples, image_name, is_loopback, kustomization_dirs,
                       labels_match, mounted_file, parse_endpoint, pods, prestop_seconds, quantity,
                       resolve, selected_pods)
from k8s_schema import validate  # noqa: E402

RELAY_IMAGE, REDIS_IMAGE = "kimi-relay", "redis"
DEFAULT_CONFIG = "/etc/kimi-relay/relay.yaml"     # the image's CMD (docker/Dockerfile)
IMAGE_UID = 10001                                  # the image's USER


def relay_bin():
    path = os.environ.get("RELAY_BIN") or str(REPO / "build" / "kimi-relay")
    return path if os.access(path, os.X_OK) else None


class Relay:
    """A kimi-relay container with its config, loaded as its pod would load it."""

    def __init__(self, pod, container, secrets, docs):
        self.pod, self.container, self.errors = pod, container, []
        args = container.get("args") or ["--config", DEFAULT_CONFIG]
        path = next((a.split("=", 1)[1] for a in args if a.startswith("--config=")), None)
        if path is None and "--config" in args[:-1]:
            path = args[args.index("--config") + 1]
        self.config_path = path or DEFAULT_CONFIG
        self.env, errors = container_env(pod, container, secrets, docs)
        self.errors += errors
        found = mounted_file(pod, container, self.config_path, docs)
        self.config_doc = self.text = self.mount = None
        self.config = {}
        if found is None:
            self.errors.append(f"{self.config_path} is not a file of a mounted ConfigMap")
            return
        self.config_doc, _, self.text, self.mount = found
        self.config = yaml.safe_load(self.text) or {}

    def value(self, *keys, default=None):
        node = self.config
        for k in keys:
            node = node.get(k) if isinstance(node, dict) else None
        return default if node is None else expand(node, self.env)

    @property
    def admin(self):
        listen = self.value("admin", "listen")
        return parse_endpoint(listen) if listen else None

    @property
    def listens(self):
        listen = self.value("server", "listen", default=[])
        return [parse_endpoint(expand(e, self.env)) for e in (listen if isinstance(listen, list) else [listen])]

    def __str__(self):
        return f"{self.pod.doc}: container '{self.container['name']}'"


# --- the suite ----------------------------------------------------------------

class Manifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.kustomizations = [resolve(d) for d in kustomization_dirs()]
        examples = [e for k in cls.kustomizations for e in k.examples]
        cls.secrets = fill_examples(examples)
        cls.all_docs = list({(d.kind, d.name): d for k in cls.kustomizations for d in k.docs}.values())

    # Each check runs once per kustomization (and per pod) as a subTest, so
    # that one failure does not hide the others. A subTest has to be entered
    # in the test method itself: the loops below are written out there.
    def where(self, k, obj=None):
        where = {"kustomization": str(k.directory.relative_to(REPO))}
        if obj is not None:
            where["object"] = str(obj)
        return self.subTest(**where)

    def objects(self, kind=None):
        return [(k, d) for k in self.kustomizations for d in k.docs if kind is None or d.kind == kind]

    def all_pods(self):
        return [(k, pod) for k in self.kustomizations for pod in pods(k.docs)]

    def relays(self, k, pod):
        return [Relay(pod, c, self.secrets, k.docs) for c in pod.of_image(RELAY_IMAGE)]

    def assertNoErrors(self, errors, what):
        if errors:
            self.fail(f"{what}:\n  " + "\n  ".join(map(str, errors)))

    # 1. kustomize ------------------------------------------------------------

    def test_layout(self):
        names = {str(d.relative_to(K8S)) for d in kustomization_dirs()}
        self.assertTrue({"base", "monitoring", "sidecar"} <= names, f"kustomizations: {sorted(names)}")
        stray = [p for p in K8S.rglob("*.y*ml") if not (p.parent / KUSTOMIZATION).is_file()]
        self.assertNoErrors([f"{p.relative_to(REPO)}: outside any kustomization" for p in stray], "stray YAML")

    def test_contents(self):
        """What each kustomization is for, so that no check below passes by finding nothing."""
        wanted = {
            "base": ["Deployment", "Service", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget",
                     "ConfigMap", "StatefulSet"],
            "monitoring": ["Deployment", "StatefulSet", "ServiceMonitor"],
            "sidecar": ["Deployment", "ConfigMap"],
        }
        for k in self.kustomizations:
            name = str(k.directory.relative_to(K8S))
            with self.where(k):
                kinds = [d.kind for d in k.docs]
                for kind in set(wanted.get(name, [])):
                    self.assertGreaterEqual(kinds.count(kind), wanted[name].count(kind), f"{name}: {kind}")
                relays = [c for pod in pods(k.docs) for c in pod.of_image(RELAY_IMAGE)]
                self.assertTrue(relays, f"{name}: no {RELAY_IMAGE} container")

    def test_kustomizations_resolve(self):
        for k in self.kustomizations:
            with self.where(k):
                self.assertNoErrors(k.errors, k.directory.relative_to(REPO))
                self.assertTrue(k.docs, "no objects")

    def test_examples_are_secrets(self):
        for k in self.kustomizations:
            with self.where(k):
                for e in k.examples:
                    self.assertNoErrors(validate(e.body), e)
                    self.assertEqual(e.kind, "Secret", f"{e}: only Secrets are kept out of the resources")
                    self.assertIn("stringData", e.body, f"{e}: placeholders belong in stringData")

    # 2. schema ---------------------------------------------------------------

    def test_schema(self):
        for k, d in self.objects():
            with self.where(k, d):
                self.assertNoErrors(validate(d.body), d)

    # 3. wiring ---------------------------------------------------------------

    def test_selectors_match_templates(self):
        for k, d in self.objects():
            with self.where(k, d):
                if d.kind not in WORKLOADS:
                    continue
                selector = d.body["spec"]["selector"]
                self.assertNotIn("matchExpressions", selector, f"{d}: use matchLabels")
                self.assertTrue(labels_match(selector.get("matchLabels"), Pod(d).labels),
                                f"{d}: selector {selector} does not match the template's labels")
                others = [p for p in selected_pods(selector.get("matchLabels"), k.docs) if p.doc is not d]
                self.assertFalse(others, f"{d}: its selector also matches {[str(p.doc) for p in others]}")

    def test_services(self):
        for k, svc in self.objects("Service"):
            with self.where(k, svc):
                spec = svc.body["spec"]
                targets = selected_pods(spec.get("selector"), k.docs)
                self.assertEqual(len(targets), 1, f"{svc}: selects {len(targets)} workloads, not 1")
                pod = targets[0]
                headless = spec.get("clusterIP") == "None"
                admin_ports = {r.admin[1] for r in self.relays(k, pod) if r.admin}
                for port in spec["ports"]:
                    target = pod.resolve_port(port.get("targetPort", port["port"]))
                    self.assertIsNotNone(target, f"{svc}: port {port} targets no container port of {pod.doc}")
                    if target in admin_ports:
                        self.assertTrue(headless, f"{svc}: the admin port {target} is only for a headless Service")
                self.assertIn(spec.get("type", "ClusterIP"), ("ClusterIP",), f"{svc}: stays inside the cluster")
                if pod.of_image(RELAY_IMAGE) and not headless:
                    main = {p for r in self.relays(k, pod) for _, p in r.listens}
                    used = {pod.resolve_port(p.get("targetPort", p["port"])) for p in spec["ports"]}
                    self.assertEqual(used, main, f"{svc}: exposes {used}, the relay's API listens on {main}")

    def test_pdb(self):
        for k, pdb in self.objects("PodDisruptionBudget"):
            with self.where(k, pdb):
                selector = pdb.body["spec"]["selector"].get("matchLabels")
                targets = selected_pods(selector, k.docs)
                self.assertEqual(len(targets), 1, f"{pdb}: selects {len(targets)} workloads, not 1")
                spec, low = pdb.body["spec"], self.min_replicas(k, targets[0].doc)
                self.assertGreaterEqual(low, 2, f"{pdb}: {targets[0].doc} may run {low} replica(s)")
                if isinstance(spec.get("minAvailable"), int):
                    self.assertLess(spec["minAvailable"], low, f"{pdb}: would block every eviction")
                if isinstance(spec.get("maxUnavailable"), int):
                    self.assertGreaterEqual(spec["maxUnavailable"], 1, f"{pdb}: would block every eviction")

    def min_replicas(self, k, workload):
        hpas = [h for h in k.find("HorizontalPodAutoscaler")
                if h.body["spec"]["scaleTargetRef"]["name"] == workload.name]
        return hpas[0].body["spec"].get("minReplicas", 1) if hpas else workload.body["spec"].get("replicas", 1)

    def test_hpa(self):
        for k, hpa in self.objects("HorizontalPodAutoscaler"):
            with self.where(k, hpa):
                spec, ref = hpa.body["spec"], hpa.body["spec"]["scaleTargetRef"]
                target = k.find(ref["kind"], ref["name"])
                self.assertTrue(target, f"{hpa}: no {ref['kind']}/{ref['name']}")
                self.assertEqual(ref.get("apiVersion"), target[0].body["apiVersion"], f"{hpa}: scaleTargetRef")
                self.assertLessEqual(spec.get("minReplicas", 1), spec["maxReplicas"], f"{hpa}: min > max")
                replicas = target[0].body["spec"].get("replicas", 1)
                self.assertTrue(spec.get("minReplicas", 1) <= replicas <= spec["maxReplicas"],
                                f"{hpa}: {target[0]} starts at {replicas}, outside the HPA's range")
                cpu = [m for m in spec.get("metrics") or [] if m.get("resource", {}).get("name") == "cpu"]
                self.assertTrue(cpu, f"{hpa}: scales on CPU")
                for c in Pod(target[0]).containers:
                    self.assertIn("cpu", (c.get("resources") or {}).get("requests") or {},
                                  f"{hpa}: CPU utilization needs a cpu request on '{c['name']}'")

    def test_servicemonitor(self):
        for k, sm in self.objects("ServiceMonitor"):
            with self.where(k, sm):
                selector = sm.body["spec"]["selector"].get("matchLabels")
                services = [s for s in k.find("Service") if labels_match(selector, s.body["metadata"].get("labels"))]
                self.assertEqual(len(services), 1, f"{sm}: selects {len(services)} Services, not 1")
                svc = services[0]
                pod = selected_pods(svc.body["spec"]["selector"], k.docs)[0]
                admin = {r.admin[1] for r in self.relays(k, pod)}
                for ep in sm.body["spec"]["endpoints"]:
                    ports = [p for p in svc.body["spec"]["ports"] if p.get("name") == ep.get("port")]
                    self.assertTrue(ports, f"{sm}: {svc} has no port named {ep.get('port')!r}")
                    target = pod.resolve_port(ports[0].get("targetPort", ports[0]["port"]))
                    self.assertIn(target, admin, f"{sm}: scrapes port {target}, the admin listener is {admin}")
                    self.assertEqual(ep.get("path", "/metrics"), "/metrics", f"{sm}: path")

    # 4. pods -----------------------------------------------------------------

    def test_security_context(self):
        for k, pod in self.all_pods():
            with self.where(k, pod.doc):
                for c in pod.containers:
                    what = f"{pod.doc}: container '{c['name']}'"
                    sc = c.get("securityContext") or {}
                    self.assertIs(pod.security(c, "runAsNonRoot"), True, f"{what}: runAsNonRoot")
                    for key in ("runAsUser", "runAsGroup"):
                        self.assertIsInstance(pod.security(c, key), int, f"{what}: a numeric {key}")
                        self.assertNotEqual(pod.security(c, key), 0, f"{what}: {key} 0 is root")
                    self.assertIs(sc.get("allowPrivilegeEscalation"), False, f"{what}: allowPrivilegeEscalation")
                    self.assertIs(sc.get("readOnlyRootFilesystem"), True, f"{what}: readOnlyRootFilesystem")
                    self.assertNotEqual(sc.get("privileged"), True, f"{what}: privileged")
                    caps = sc.get("capabilities") or {}
                    self.assertIn("ALL", caps.get("drop") or [], f"{what}: capabilities.drop [ALL]")
                    self.assertFalse(caps.get("add"), f"{what}: capabilities.add")
                    self.assertEqual((pod.security(c, "seccompProfile") or {}).get("type"), "RuntimeDefault",
                                     f"{what}: seccompProfile RuntimeDefault")
                    if image_name(c.get("image", "")) == RELAY_IMAGE:
                        self.assertEqual((pod.security(c, "runAsUser"), pod.security(c, "runAsGroup")),
                                         (IMAGE_UID, IMAGE_UID), f"{what}: the image's user is {IMAGE_UID}:{IMAGE_UID}")

    def test_resources(self):
        for k, pod in self.all_pods():
            with self.where(k, pod.doc):
                for c in pod.containers:
                    what = f"{pod.doc}: container '{c['name']}'"
                    res = c.get("resources") or {}
                    requests, limits = res.get("requests") or {}, res.get("limits") or {}
                    self.assertTrue({"cpu", "memory"} <= set(requests), f"{what}: requests cpu and memory")
                    self.assertIn("memory", limits, f"{what}: a memory limit")
                    for r in set(requests) & set(limits):
                        self.assertLessEqual(quantity(requests[r]), quantity(limits[r]), f"{what}: {r} request > limit")

    def test_volumes(self):
        for k, pod in self.all_pods():
            with self.where(k, pod.doc):
                claims = {t["metadata"]["name"] for t in pod.doc.body["spec"].get("volumeClaimTemplates") or []}
                for c in pod.containers:
                    for m in c.get("volumeMounts") or []:
                        self.assertIn(m["name"], set(pod.volumes) | claims,
                                      f"{pod.doc}: container '{c['name']}' mounts undefined volume '{m['name']}'")

    def test_relay_pods(self):
        for k, pod in self.all_pods():
            with self.where(k, pod.doc):
                for r in self.relays(k, pod):
                    self.assertNoErrors(r.errors, r)
                    self.check_relay(k, pod, r)

    def check_relay(self, k, pod, r):
        c = r.container
        self.assertNotIn("subPath", r.mount, f"{r}: mount the config as a directory (edits reach the pod)")
        self.assertTrue(r.mount.get("readOnly"), f"{r}: the config mount is read-only")
        self.assertIsNotNone(r.admin, f"{r}: the probes need admin.listen")
        admin_host, admin_port = r.admin
        self.assertFalse(is_loopback(admin_host), f"{r}: the kubelet cannot probe {admin_host}")
        # Probes: /healthz (liveness, startup) and /readyz (readiness) on the admin port.
        for probe, paths in (("livenessProbe", {"/healthz"}), ("readinessProbe", {"/readyz"}),
                             ("startupProbe", {"/healthz", "/readyz"})):
            get = (c.get(probe) or {}).get("httpGet")
            self.assertIsNotNone(get, f"{r}: an httpGet {probe}")
            self.assertIn(get.get("path"), paths, f"{r}: {probe} path")
            self.assertEqual(pod.resolve_port(get["port"]), admin_port,
                             f"{r}: {probe} port {get['port']!r} is not admin.listen's {admin_port}")
        # Container ports: exactly the listeners reachable from outside the pod.
        declared = sorted(p["containerPort"] for p in c.get("ports") or [])
        wanted = sorted({p for h, p in r.listens if not is_loopback(h)} | {admin_port})
        self.assertEqual(declared, wanted, f"{r}: container ports vs the config's listeners")
        # Scrape annotations point at the admin listener.
        ann = pod.annotations
        self.assertEqual(ann.get("prometheus.io/scrape"), "true", f"{pod.doc}: prometheus.io/scrape")
        self.assertEqual(ann.get("prometheus.io/port"), str(admin_port), f"{pod.doc}: prometheus.io/port")
        self.assertEqual(ann.get("prometheus.io/path"), "/metrics", f"{pod.doc}: prometheus.io/path")
        # Workers follow the CPU limit.
        cpu = ((c.get("resources") or {}).get("limits") or {}).get("cpu")
        self.assertIsNotNone(cpu, f"{r}: a CPU limit (workers follow it)")
        self.assertEqual(r.env.get("RELAY_WORKERS"), str(cores(cpu)), f"{r}: RELAY_WORKERS vs CPU limit {cpu}")
        self.assertIn(str(r.value("server", "workers", default=0)), ("0", str(cores(cpu))), f"{r}: server.workers")
        # Shutdown: preStop, then the drain, inside the grace period.
        pre = prestop_seconds(c)
        self.assertIsNotNone(pre, f"{r}: preStop must be a sleep")
        behind_service = [s for s in k.find("Service") if labels_match(s.body["spec"].get("selector"), pod.labels)
                          and s.body["spec"].get("clusterIP") != "None"]
        if behind_service:
            self.assertGreater(pre, 0, f"{r}: behind {behind_service[0]}: preStop lets the endpoints update")
        drain = math.ceil(int(r.value("server", "drain_timeout_ms", default=30000)) / 1000)
        grace = pod.spec.get("terminationGracePeriodSeconds", 30)
        self.assertGreater(grace, pre + drain, f"{r}: grace {grace} s <= preStop {pre} s + drain {drain} s")
        # state_dir is writable (the root filesystem is not).
        state = r.value("state_dir")
        if state:
            mounts = [m for m in c.get("volumeMounts") or [] if m["mountPath"].rstrip("/") == state.rstrip("/")]
            self.assertTrue(mounts and not mounts[0].get("readOnly"), f"{r}: state_dir {state} needs a volume")
            self.assertIn("emptyDir", pod.volumes.get(mounts[0]["name"], {}), f"{r}: state_dir on an emptyDir")
        # The shared state.
        cluster = r.config.get("cluster") or {}
        self.assertEqual(cluster.get("on_redis_failure"), "local", f"{r}: cluster.on_redis_failure")
        self.assertEqual(str(cluster.get("redis_url", "")).strip(), "${REDIS_URL}", f"{r}: cluster.redis_url")
        self.check_redis_url(r)
        self.check_config(r)

    def check_redis_url(self, r):
        url = urlsplit(r.env.get("REDIS_URL", ""))
        self.assertEqual(url.scheme, "redis", f"{r}: REDIS_URL {url.geturl()!r}")
        services = [s for s in self.all_docs if s.kind == "Service" and s.name == url.hostname]
        self.assertTrue(services, f"{r}: REDIS_URL names host {url.hostname!r}, no Service of docker/k8s")
        spec = services[0].body["spec"]
        redis = selected_pods(spec.get("selector"), self.all_docs)
        self.assertTrue(redis and redis[0].of_image(REDIS_IMAGE), f"{r}: {services[0]} is not Redis")
        port = [p for p in spec["ports"] if p["port"] == (url.port or 6379)]
        self.assertTrue(port, f"{r}: {services[0]} has no port {url.port or 6379}")
        container = redis[0].of_image(REDIS_IMAGE)[0]
        env, _ = container_env(redis[0], container, self.secrets, self.all_docs)
        self.assertEqual(url.password, env.get("REDIS_PASSWORD"), f"{r}: REDIS_URL's password is Redis's")

    def check_config(self, r):
        missing = sorted(n for n in env_refs(r.text) if not r.env.get(n))
        self.assertFalse(missing, f"{r}: the pod does not set {missing}")
        binary = relay_bin()
        self.assertIsNotNone(binary, "set RELAY_BIN to a built kimi-relay (CTest does)")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "relay.yaml"
            path.write_text(r.text, encoding="utf-8")
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **r.env}
            run = subprocess.run([binary, "--check-config", str(path)], env=env, capture_output=True,
                                 text=True, timeout=30)
        out = (run.stdout + run.stderr).strip()
        self.assertEqual(run.returncode, 0, f"{r.config_doc}: kimi-relay --check-config: {out}")
        self.assertIn(": OK (", out, f"{r.config_doc}: {out}")

    def test_spread(self):
        for k, pod in self.all_pods():
            with self.where(k, pod.doc):
                if not pod.of_image(RELAY_IMAGE) or self.min_replicas(k, pod.doc) < 2:
                    continue
                spread = [t for t in pod.spec.get("topologySpreadConstraints") or []
                          if labels_match((t.get("labelSelector") or {}).get("matchLabels"), pod.labels)]
                anti = (pod.spec.get("affinity") or {}).get("podAntiAffinity") or {}
                terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution", []) + \
                    [t["podAffinityTerm"] for t in anti.get("preferredDuringSchedulingIgnoredDuringExecution", [])]
                anti_own = [t for t in terms if labels_match((t.get("labelSelector") or {}).get("matchLabels"), pod.labels)]
                self.assertTrue(spread or anti_own, f"{pod.doc}: spread the replicas over nodes")

    def test_redis(self):
        found = 0
        for k, pod in self.all_pods():
            with self.where(k, pod.doc):
                for c in pod.of_image(REDIS_IMAGE):
                    found += 1
                    self.check_redis(k, pod, c)
        self.assertGreater(found, 0, "no Redis in docker/k8s")

    def check_redis(self, k, pod, c):
        what = f"{pod.doc}: container '{c['name']}'"
        self.assertEqual(pod.doc.kind, "StatefulSet", what)
        self.assertEqual(pod.doc.body["spec"].get("replicas", 1), 1, f"{what}: one primary")
        self.assertTrue(k.find("Service", pod.doc.body["spec"]["serviceName"]), f"{what}: serviceName")
        words = [w for part in (c.get("command") or []) + (c.get("args") or []) for w in part.split()]
        confs = [w for w in words if w.endswith(".conf")]
        self.assertTrue(confs, f"{what}: redis-server reads a config file")
        found = mounted_file(pod, c, confs[0], k.docs)
        self.assertIsNotNone(found, f"{what}: {confs[0]} is not a file of a mounted ConfigMap")
        conf = {}
        for line in found[2].splitlines():
            parts = line.split()
            if parts and not parts[0].startswith("#"):
                conf[parts[0].lower()] = " ".join(parts[1:])
        for i, w in enumerate(words[:-1]):          # command-line overrides win
            if w.startswith("--"):
                conf[w[2:].lower()] = words[i + 1]
        self.assertEqual(conf.get("appendonly"), "yes", f"{what}: appendonly yes (the budget ledger)")
        self.assertEqual(conf.get("maxmemory-policy"), "noeviction", f"{what}: maxmemory-policy noeviction")
        script = " ".join((c.get("command") or []) + (c.get("args") or []))
        self.assertRegex(script, r"requirepass \$\(?\{?REDIS_PASSWORD", f"{what}: requirepass from the Secret")
        env = {e["name"]: e for e in c.get("env") or []}
        for name in ("REDIS_PASSWORD", "REDISCLI_AUTH"):
            ref = (env.get(name, {}).get("valueFrom") or {}).get("secretKeyRef")
            self.assertTrue(ref and ref["key"] in self.secrets.get(ref["name"], {}), f"{what}: {name} from a Secret")
        for probe in ("livenessProbe", "readinessProbe"):
            command = " ".join(((c.get(probe) or {}).get("exec") or {}).get("command") or [])
            self.assertIn("redis-cli", command, f"{what}: {probe} runs redis-cli")
            self.assertIn("ping", command.lower(), f"{what}: {probe} pings")
            self.assertIn("PONG", command, f"{what}: {probe} must look for PONG (redis-cli exits 0 on NOAUTH)")
        data_dir = conf.get("dir", "/data")
        claims = {t["metadata"]["name"] for t in pod.doc.body["spec"].get("volumeClaimTemplates") or []}
        mounts = [m["name"] for m in c.get("volumeMounts") or [] if m["mountPath"].rstrip("/") == data_dir]
        self.assertTrue(mounts and mounts[0] in claims, f"{what}: dir {data_dir} on a volumeClaimTemplate")


if __name__ == "__main__":
    unittest.main(verbosity=2)
