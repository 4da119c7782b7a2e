"""A hand-written schema of the Kubernetes objects docker/k8s uses.

kubeconform and kubectl's OpenAPI validation are not Debian packages, and the
tests run offline: this module lists, for each object the manifests use, the
keys the API server accepts and their types, so that a misspelt key
(`livenesProbe`) or a value of the wrong type (`containerPort: "8080"`) fails
the test the way `kubectl apply` would fail in a cluster. It is a subset of the
real API (Kubernetes 1.29, monitoring.coreos.com/v1): every key listed is
real; a real key that is missing here is refused until it is added.

validate(doc) returns a list of "path: message" strings, empty when the
document conforms.
"""

import difflib
import re

# --- types --------------------------------------------------------------------


class Type:
    def check(self, value, path, errors):
        raise NotImplementedError


class Scalar(Type):
    def __init__(self, name, test, choices=None):
        self.name, self.test, self.choices = name, test, choices

    def check(self, value, path, errors):
        if not self.test(value):
            errors.append(f"{path}: must be {self.name}, got {type(value).__name__} {value!r}")
        elif self.choices is not None and value not in self.choices:
            errors.append(f"{path}: must be one of {', '.join(map(str, self.choices))}; got {value!r}")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


STR = Scalar("a string", lambda v: isinstance(v, str))
INT = Scalar("an integer", _is_int)
BOOL = Scalar("a boolean", lambda v: isinstance(v, bool))
INT_OR_STR = Scalar("an integer or a string", lambda v: _is_int(v) or isinstance(v, str))
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|m|k|Ki|Mi|Gi|Ti|Pi|Ei|M|G|T|P|E)?$")
QUANTITY = Scalar(
    "a quantity (e.g. 500m, 2, 128Mi)",
    lambda v: (_is_int(v) or isinstance(v, float) or isinstance(v, str)) and bool(_QUANTITY.match(str(v))),
)
ANY = Scalar("anything", lambda v: True)


def enum(*choices):
    return Scalar("a string", lambda v: isinstance(v, str), choices)


class ListOf(Type):
    def __init__(self, item):
        self.item = item

    def check(self, value, path, errors):
        if not isinstance(value, list):
            errors.append(f"{path}: must be a list, got {type(value).__name__}")
            return
        for i, v in enumerate(value):
            self.item.check(v, f"{path}[{i}]", errors)


class MapOf(Type):
    """A map with free keys (labels, data, requests) and values of one type."""

    def __init__(self, value):
        self.value = value

    def check(self, value, path, errors):
        if not isinstance(value, dict):
            errors.append(f"{path}: must be a map, got {type(value).__name__}")
            return
        for k, v in value.items():
            if not isinstance(k, str):
                errors.append(f"{path}: key {k!r} must be a string")
            self.value.check(v, f"{path}.{k}", errors)


class Obj(Type):
    """A map with a fixed set of keys; unknown keys are refused."""

    def __init__(self, fields, required=(), one_of=()):
        self.fields, self.required, self.one_of = fields, tuple(required), tuple(one_of)

    def check(self, value, path, errors):
        if not isinstance(value, dict):
            errors.append(f"{path}: must be a map, got {type(value).__name__}")
            return
        for k, v in value.items():
            if k not in self.fields:
                close = difflib.get_close_matches(str(k), self.fields, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                errors.append(f"{path}: unknown key '{k}'{hint}")
                continue
            self.fields[k].check(v, f"{path}.{k}", errors)
        for k in self.required:
            if k not in value:
                errors.append(f"{path}: missing required key '{k}'")
        if self.one_of and sum(k in value for k in self.one_of) != 1:
            errors.append(f"{path}: needs exactly one of {', '.join(self.one_of)}")


# --- shared pieces ------------------------------------------------------------

STRINGS = ListOf(STR)
STR_MAP = MapOf(STR)


class Resources(MapOf):
    """requests/limits: standard resource names, or a domain-prefixed extended one."""

    def check(self, value, path, errors):
        super().check(value, path, errors)
        for k in value if isinstance(value, dict) else ():
            if k not in ("cpu", "memory", "ephemeral-storage") and not str(k).startswith("hugepages-") \
                    and "/" not in str(k):
                close = difflib.get_close_matches(str(k), ["cpu", "memory", "ephemeral-storage"], n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                errors.append(f"{path}: unknown resource '{k}'{hint}")


QUANTITIES = Resources(QUANTITY)

OBJECT_META = Obj({
    "name": STR, "namespace": STR, "generateName": STR,
    "labels": STR_MAP, "annotations": STR_MAP,
}, required=["name"])

LABEL_SELECTOR = Obj({
    "matchLabels": STR_MAP,
    "matchExpressions": ListOf(Obj({
        "key": STR, "operator": enum("In", "NotIn", "Exists", "DoesNotExist"), "values": STRINGS,
    }, required=["key", "operator"])),
})

LOCAL_REF = Obj({"name": STR, "optional": BOOL}, required=["name"])
KEY_REF = Obj({"name": STR, "key": STR, "optional": BOOL}, required=["key"])

# --- containers ---------------------------------------------------------------

ENV_VAR = Obj({
    "name": STR,
    "value": STR,
    "valueFrom": Obj({
        "secretKeyRef": KEY_REF,
        "configMapKeyRef": KEY_REF,
        "fieldRef": Obj({"fieldPath": STR, "apiVersion": STR}, required=["fieldPath"]),
        "resourceFieldRef": Obj({"resource": STR, "containerName": STR, "divisor": QUANTITY}, required=["resource"]),
    }, one_of=["secretKeyRef", "configMapKeyRef", "fieldRef", "resourceFieldRef"]),
}, required=["name"])

ENV_FROM = Obj({"prefix": STR, "secretRef": LOCAL_REF, "configMapRef": LOCAL_REF},
               one_of=["secretRef", "configMapRef"])

CONTAINER_PORT = Obj({
    "containerPort": INT, "name": STR, "protocol": enum("TCP", "UDP", "SCTP"),
    "hostPort": INT, "hostIP": STR,
}, required=["containerPort"])

RESOURCES = Obj({
    "requests": QUANTITIES, "limits": QUANTITIES,
    "claims": ListOf(Obj({"name": STR}, required=["name"])),
})

VOLUME_MOUNT = Obj({
    "name": STR, "mountPath": STR, "readOnly": BOOL, "subPath": STR, "subPathExpr": STR,
    "mountPropagation": enum("None", "HostToContainer", "Bidirectional"),
}, required=["name", "mountPath"])

HTTP_GET = Obj({
    "path": STR, "port": INT_OR_STR, "host": STR, "scheme": enum("HTTP", "HTTPS"),
    "httpHeaders": ListOf(Obj({"name": STR, "value": STR}, required=["name", "value"])),
}, required=["port"])
EXEC = Obj({"command": STRINGS}, required=["command"])
TCP_SOCKET = Obj({"port": INT_OR_STR, "host": STR}, required=["port"])

PROBE = Obj({
    "httpGet": HTTP_GET, "exec": EXEC, "tcpSocket": TCP_SOCKET,
    "grpc": Obj({"port": INT, "service": STR}, required=["port"]),
    "initialDelaySeconds": INT, "periodSeconds": INT, "timeoutSeconds": INT,
    "successThreshold": INT, "failureThreshold": INT, "terminationGracePeriodSeconds": INT,
}, one_of=["httpGet", "exec", "tcpSocket", "grpc"])

LIFECYCLE_HANDLER = Obj({
    "exec": EXEC, "httpGet": HTTP_GET, "tcpSocket": TCP_SOCKET,
    "sleep": Obj({"seconds": INT}, required=["seconds"]),
}, one_of=["exec", "httpGet", "tcpSocket", "sleep"])

LIFECYCLE = Obj({"preStop": LIFECYCLE_HANDLER, "postStart": LIFECYCLE_HANDLER})

SECCOMP = Obj({"type": enum("RuntimeDefault", "Localhost", "Unconfined"), "localhostProfile": STR},
              required=["type"])
APPARMOR = Obj({"type": enum("RuntimeDefault", "Localhost", "Unconfined"), "localhostProfile": STR},
               required=["type"])

SECURITY_CONTEXT = Obj({
    "runAsUser": INT, "runAsGroup": INT, "runAsNonRoot": BOOL,
    "readOnlyRootFilesystem": BOOL, "allowPrivilegeEscalation": BOOL, "privileged": BOOL,
    "capabilities": Obj({"add": STRINGS, "drop": STRINGS}),
    "seccompProfile": SECCOMP, "appArmorProfile": APPARMOR,
    "procMount": enum("Default", "Unmasked"), "seLinuxOptions": MapOf(STR),
})

POD_SECURITY_CONTEXT = Obj({
    "runAsUser": INT, "runAsGroup": INT, "runAsNonRoot": BOOL,
    "fsGroup": INT, "fsGroupChangePolicy": enum("OnRootMismatch", "Always"),
    "supplementalGroups": ListOf(INT),
    "sysctls": ListOf(Obj({"name": STR, "value": STR}, required=["name", "value"])),
    "seccompProfile": SECCOMP, "appArmorProfile": APPARMOR, "seLinuxOptions": MapOf(STR),
})

CONTAINER = Obj({
    "name": STR, "image": STR, "imagePullPolicy": enum("Always", "IfNotPresent", "Never"),
    "command": STRINGS, "args": STRINGS, "workingDir": STR,
    "env": ListOf(ENV_VAR), "envFrom": ListOf(ENV_FROM),
    "ports": ListOf(CONTAINER_PORT), "resources": RESOURCES, "volumeMounts": ListOf(VOLUME_MOUNT),
    "livenessProbe": PROBE, "readinessProbe": PROBE, "startupProbe": PROBE,
    "lifecycle": LIFECYCLE, "securityContext": SECURITY_CONTEXT,
    "restartPolicy": enum("Always"),   # init containers only: a native sidecar
    "stdin": BOOL, "tty": BOOL,
    "terminationMessagePath": STR, "terminationMessagePolicy": enum("File", "FallbackToLogsOnError"),
}, required=["name"])

# --- pods ---------------------------------------------------------------------

KEY_TO_PATH = ListOf(Obj({"key": STR, "path": STR, "mode": INT}, required=["key", "path"]))

VOLUME = Obj({
    "name": STR,
    "configMap": Obj({"name": STR, "items": KEY_TO_PATH, "defaultMode": INT, "optional": BOOL}),
    "secret": Obj({"secretName": STR, "items": KEY_TO_PATH, "defaultMode": INT, "optional": BOOL}),
    "emptyDir": Obj({"medium": enum("", "Memory"), "sizeLimit": QUANTITY}),
    "persistentVolumeClaim": Obj({"claimName": STR, "readOnly": BOOL}, required=["claimName"]),
    "hostPath": Obj({"path": STR, "type": STR}, required=["path"]),
}, required=["name"], one_of=["configMap", "secret", "emptyDir", "persistentVolumeClaim", "hostPath"])

POD_AFFINITY_TERM = Obj({
    "labelSelector": LABEL_SELECTOR, "namespaceSelector": LABEL_SELECTOR, "namespaces": STRINGS,
    "topologyKey": STR, "matchLabelKeys": STRINGS, "mismatchLabelKeys": STRINGS,
}, required=["topologyKey"])
WEIGHTED_POD_AFFINITY_TERM = Obj({"weight": INT, "podAffinityTerm": POD_AFFINITY_TERM},
                                 required=["weight", "podAffinityTerm"])
POD_AFFINITY = Obj({
    "requiredDuringSchedulingIgnoredDuringExecution": ListOf(POD_AFFINITY_TERM),
    "preferredDuringSchedulingIgnoredDuringExecution": ListOf(WEIGHTED_POD_AFFINITY_TERM),
})
AFFINITY = Obj({"podAffinity": POD_AFFINITY, "podAntiAffinity": POD_AFFINITY, "nodeAffinity": MapOf(ANY)})

TOPOLOGY_SPREAD = Obj({
    "maxSkew": INT, "topologyKey": STR, "whenUnsatisfiable": enum("DoNotSchedule", "ScheduleAnyway"),
    "labelSelector": LABEL_SELECTOR, "minDomains": INT, "matchLabelKeys": STRINGS,
    "nodeAffinityPolicy": enum("Honor", "Ignore"), "nodeTaintsPolicy": enum("Honor", "Ignore"),
}, required=["maxSkew", "topologyKey", "whenUnsatisfiable"])

TOLERATION = Obj({
    "key": STR, "operator": enum("Exists", "Equal"), "value": STR,
    "effect": enum("NoSchedule", "PreferNoSchedule", "NoExecute"), "tolerationSeconds": INT,
})

POD_SPEC = Obj({
    "containers": ListOf(CONTAINER), "initContainers": ListOf(CONTAINER), "volumes": ListOf(VOLUME),
    "restartPolicy": enum("Always", "OnFailure", "Never"),
    "terminationGracePeriodSeconds": INT, "activeDeadlineSeconds": INT,
    "dnsPolicy": enum("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"),
    "nodeSelector": STR_MAP, "serviceAccountName": STR, "automountServiceAccountToken": BOOL,
    "enableServiceLinks": BOOL, "securityContext": POD_SECURITY_CONTEXT,
    "imagePullSecrets": ListOf(LOCAL_REF), "affinity": AFFINITY, "tolerations": ListOf(TOLERATION),
    "topologySpreadConstraints": ListOf(TOPOLOGY_SPREAD), "priorityClassName": STR,
    "hostNetwork": BOOL, "shareProcessNamespace": BOOL, "runtimeClassName": STR,
    "schedulerName": STR, "hostname": STR, "subdomain": STR,
}, required=["containers"])

POD_TEMPLATE = Obj({"metadata": Obj({"labels": STR_MAP, "annotations": STR_MAP}), "spec": POD_SPEC},
                   required=["metadata", "spec"])

# --- workloads ----------------------------------------------------------------

DEPLOYMENT_SPEC = Obj({
    "replicas": INT, "selector": LABEL_SELECTOR, "template": POD_TEMPLATE,
    "strategy": Obj({
        "type": enum("RollingUpdate", "Recreate"),
        "rollingUpdate": Obj({"maxSurge": INT_OR_STR, "maxUnavailable": INT_OR_STR}),
    }),
    "revisionHistoryLimit": INT, "minReadySeconds": INT, "progressDeadlineSeconds": INT, "paused": BOOL,
}, required=["selector", "template"])

PVC_SPEC = Obj({
    "accessModes": ListOf(enum("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")),
    "resources": Obj({"requests": Obj({"storage": QUANTITY}, required=["storage"]),
                      "limits": Obj({"storage": QUANTITY})}, required=["requests"]),
    "storageClassName": STR, "volumeMode": enum("Filesystem", "Block"), "selector": LABEL_SELECTOR,
}, required=["accessModes", "resources"])

STATEFULSET_SPEC = Obj({
    "replicas": INT, "selector": LABEL_SELECTOR, "template": POD_TEMPLATE, "serviceName": STR,
    "volumeClaimTemplates": ListOf(Obj({
        "metadata": Obj({"name": STR, "labels": STR_MAP, "annotations": STR_MAP}, required=["name"]),
        "spec": PVC_SPEC,
    }, required=["metadata", "spec"])),
    "podManagementPolicy": enum("OrderedReady", "Parallel"),
    "updateStrategy": Obj({
        "type": enum("RollingUpdate", "OnDelete"),
        "rollingUpdate": Obj({"partition": INT, "maxUnavailable": INT_OR_STR}),
    }),
    "revisionHistoryLimit": INT, "minReadySeconds": INT,
    "persistentVolumeClaimRetentionPolicy": Obj({
        "whenDeleted": enum("Retain", "Delete"), "whenScaled": enum("Retain", "Delete"),
    }),
    "ordinals": Obj({"start": INT}),
}, required=["selector", "template", "serviceName"])

# --- services and policies ----------------------------------------------------

SERVICE_SPEC = Obj({
    "type": enum("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"),
    "selector": STR_MAP,
    "ports": ListOf(Obj({
        "name": STR, "port": INT, "targetPort": INT_OR_STR, "nodePort": INT,
        "protocol": enum("TCP", "UDP", "SCTP"), "appProtocol": STR,
    }, required=["port"])),
    "clusterIP": STR, "clusterIPs": STRINGS, "sessionAffinity": enum("None", "ClientIP"),
    "externalTrafficPolicy": enum("Cluster", "Local"), "internalTrafficPolicy": enum("Cluster", "Local"),
    "publishNotReadyAddresses": BOOL, "ipFamilyPolicy": enum("SingleStack", "PreferDualStack", "RequireDualStack"),
    "ipFamilies": ListOf(enum("IPv4", "IPv6")), "loadBalancerSourceRanges": STRINGS, "externalName": STR,
})

METRIC_TARGET = Obj({
    "type": enum("Utilization", "Value", "AverageValue"),
    "averageUtilization": INT, "averageValue": QUANTITY, "value": QUANTITY,
}, required=["type"])
SCALING_RULES = Obj({
    "stabilizationWindowSeconds": INT, "selectPolicy": enum("Max", "Min", "Disabled"),
    "policies": ListOf(Obj({"type": enum("Pods", "Percent"), "value": INT, "periodSeconds": INT},
                           required=["type", "value", "periodSeconds"])),
})
HPA_SPEC = Obj({
    "scaleTargetRef": Obj({"apiVersion": STR, "kind": STR, "name": STR}, required=["kind", "name"]),
    "minReplicas": INT, "maxReplicas": INT,
    "metrics": ListOf(Obj({
        "type": enum("Resource", "ContainerResource", "Pods", "Object", "External"),
        "resource": Obj({"name": STR, "target": METRIC_TARGET}, required=["name", "target"]),
        "containerResource": Obj({"name": STR, "container": STR, "target": METRIC_TARGET},
                                 required=["name", "container", "target"]),
        "pods": MapOf(ANY), "object": MapOf(ANY), "external": MapOf(ANY),
    }, required=["type"])),
    "behavior": Obj({"scaleUp": SCALING_RULES, "scaleDown": SCALING_RULES}),
}, required=["scaleTargetRef", "maxReplicas"])

PDB_SPEC = Obj({
    "selector": LABEL_SELECTOR, "minAvailable": INT_OR_STR, "maxUnavailable": INT_OR_STR,
    "unhealthyPodEvictionPolicy": enum("IfHealthyBudget", "AlwaysAllow"),
})

SERVICE_MONITOR_SPEC = Obj({
    "selector": LABEL_SELECTOR,
    "namespaceSelector": Obj({"any": BOOL, "matchNames": STRINGS}),
    "endpoints": ListOf(Obj({
        "port": STR, "targetPort": INT_OR_STR, "path": STR, "scheme": enum("http", "https"),
        "interval": STR, "scrapeTimeout": STR, "honorLabels": BOOL, "honorTimestamps": BOOL,
        "params": MapOf(STRINGS), "relabelings": ListOf(MapOf(ANY)), "metricRelabelings": ListOf(MapOf(ANY)),
        "tlsConfig": MapOf(ANY), "bearerTokenSecret": KEY_REF,
    })),
    "jobLabel": STR, "targetLabels": STRINGS, "podTargetLabels": STRINGS, "sampleLimit": INT,
}, required=["selector", "endpoints"])

# --- top level ----------------------------------------------------------------


def _top(**fields):
    return Obj({"apiVersion": STR, "kind": STR, "metadata": OBJECT_META, **fields},
               required=["apiVersion", "kind", "metadata"])


KINDS = {
    ("apps/v1", "Deployment"): _top(spec=DEPLOYMENT_SPEC),
    ("apps/v1", "StatefulSet"): _top(spec=STATEFULSET_SPEC),
    ("v1", "Service"): _top(spec=SERVICE_SPEC),
    ("v1", "ConfigMap"): _top(data=STR_MAP, binaryData=STR_MAP, immutable=BOOL),
    ("v1", "Secret"): _top(type=STR, data=STR_MAP, stringData=STR_MAP, immutable=BOOL),
    ("autoscaling/v2", "HorizontalPodAutoscaler"): _top(spec=HPA_SPEC),
    ("policy/v1", "PodDisruptionBudget"): _top(spec=PDB_SPEC),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): _top(spec=SERVICE_MONITOR_SPEC),
}

KUSTOMIZATION = Obj({"apiVersion": enum("kustomize.config.k8s.io/v1beta1"), "kind": enum("Kustomization"),
                     "resources": STRINGS}, required=["resources"])


def validate(doc):
    """Errors of one manifest document: its apiVersion/kind pair, then its fields."""
    if not isinstance(doc, dict):
        return [f"a manifest must be a map, got {type(doc).__name__}"]
    pair = (doc.get("apiVersion"), doc.get("kind"))
    schema = KINDS.get(pair)
    if schema is None:
        known = ", ".join(f"{a} {k}" for a, k in KINDS)
        return [f"apiVersion/kind {pair[0]!r}/{pair[1]!r} is not one of: {known}"]
    errors = []
    schema.check(doc, doc["kind"], errors)
    return errors


def validate_kustomization(doc):
    errors = []
    KUSTOMIZATION.check(doc, "Kustomization", errors)
    return errors
