"""Checks of deploy/'s operator files, each with its ecosystem's own tool,
and of the worker's /metrics against what the dashboard and alerts use.

- systemd: `systemd-analyze verify` on both units (in a scratch root that
  holds the units, the built binary at their ExecStart path and a copy of
  the host's system units), `systemd-analyze security --offline` for the
  sandbox, and the unit's stop timeout / restart policy against the
  worker's real grace period and exit status for a bad configuration;
- Kubernetes: every manifest through kubernetes-validate --strict for
  K8S_VERSION; the CRDs it has no schema for (ServiceMonitor,
  ScaledObject, TriggerAuthentication) through jsonschema with a subset of
  their upstream CRD schemas written down here (the fields used, with
  unknown fields refused); the kustomization lists every manifest; yamllint
  over deploy/;
- Prometheus: promtool check rules and promtool test rules on the alert
  rules (promtool built by deploy/setup.sh step promtool), and every expr
  parsed by promql-parser;
- Grafana: the dashboard loads into grafana-foundation-sdk's Dashboard
  model and back without losing a field, plus panel/target/datasource
  structure and every expr parsed;
- a real worker, configured with the ConfigMap's worker.conf and the
  StatefulSet's environment (pod name as worker.id and
  kafka.group.instance.id), serves two turns; its /metrics passes
  prometheus_client's parser and `promtool check metrics`, and holds every
  metric the dashboard and alerts name, with the labels they use; its
  memory figures match the process and the documented budget.
"""

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import _missing

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
ALERTS = DEPLOY / "prometheus" / "parley-alerts.yaml"
ALERT_TESTS = DEPLOY / "prometheus" / "parley-alerts.test.yaml"
DASHBOARD = DEPLOY / "grafana" / "parley-workers.json"
K8S_VERSION = "1.33.0"  # the Kubernetes version the manifests are validated for

# Labels Prometheus or the Prometheus Operator attach to every scraped
# sample (target labels), which the worker itself never exports.
TARGET_LABELS = {"job", "instance", "pod", "namespace", "service", "endpoint", "container"}
# Series Prometheus records itself, not scraped from the worker.
PROMETHEUS_SERIES = {"up"}


def _venv_tool(name: str) -> str:
    """A console script of the test venv (next to its python), else PATH."""
    py = os.environ.get("PARLEY_PY")
    for d in ([Path(py).parent] if py else []) + [Path(os.sys.executable).parent]:
        if (d / name).is_file():
            return str(d / name)
    found = shutil.which(name)
    if not found:
        _missing(f"no {name} (deploy/requirements-test.txt installs it)")
    return found


def _promtool() -> str:
    p = os.environ.get("PARLEY_PROMTOOL") or shutil.which("promtool")
    if not p or not os.access(p, os.X_OK):
        _missing("no promtool (deploy/setup.sh promtool builds it; PARLEY_PROMTOOL)")
    return p


def _yaml_docs(path: Path) -> list:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _manifests() -> dict:
    """kind/name -> resource, over every manifest in deploy/k8s."""
    out = {}
    for f in sorted(K8S.glob("*.yaml")):
        if f.name == "kustomization.yaml":
            continue
        for d in _yaml_docs(f):
            out[f"{d['kind']}/{d['metadata']['name']}"] = d
    return out


def _conf_text(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def _worker_defaults(parley_bin) -> dict:
    """key -> default from `parley worker --print-config-doc`."""
    doc = subprocess.run([str(parley_bin), "worker", "--print-config-doc"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    out = {}
    for m in re.finditer(r"^\| `([^`]+)` \| [^|]+ \| `([^`]*)` \|", doc, re.M):
        out[m.group(1)] = m.group(2)
    assert "worker.grace_ms" in out, doc[:500]
    return out


def _seconds(v: str) -> float:
    m = re.fullmatch(r"(\d+)(ms|s|min)?", v.strip())
    assert m, v
    return int(m.group(1)) * {"ms": 0.001, "s": 1, None: 1, "min": 60}[m.group(2)]


def _unit(path: Path) -> dict:
    """Unit file -> {key: [values]} (all sections; the keys used do not clash)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            k, _, v = line.partition("=")
            out.setdefault(k, []).append(v)
    return out


# ---- systemd -----------------------------------------------------------------

UNITS = ["parley-worker@.service", "parley-gateway.service"]


@pytest.fixture(scope="module")
def systemd_root(tmp_path_factory, parley_bin):
    """A scratch root for systemd-analyze: our units in etc/, the host's
    system units in usr/lib (sysinit.target and friends), the built binary
    where ExecStart expects it."""
    if not shutil.which("systemd-analyze"):
        _missing("no systemd-analyze (deploy/setup.sh apt installs systemd)")
    host_units = Path("/usr/lib/systemd/system")
    if not (host_units / "sysinit.target").exists():
        _missing("no /usr/lib/systemd/system/sysinit.target (package systemd)")
    root = tmp_path_factory.mktemp("sdroot")
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "usr/local/bin").mkdir(parents=True)
    (root / "usr/lib/systemd").mkdir(parents=True)
    shutil.copytree(host_units, root / "usr/lib/systemd/system", symlinks=True)
    shutil.copy2(parley_bin, root / "usr/local/bin/parley")
    for u in UNITS:
        shutil.copy2(DEPLOY / "systemd" / u, root / "etc/systemd/system" / u)
    return root


def _sd(root, *args):
    return subprocess.run(["systemd-analyze", *args, f"--root={root}",
                           "parley-worker@w1.service", "parley-gateway.service"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_systemd_units_verify(systemd_root):
    r = _sd(systemd_root, "verify")
    # systemd-analyze only warns (exit 0) on unknown keys or bad values:
    # any output at all is a failure.
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr


def test_systemd_verify_catches_a_typo(systemd_root, tmp_path):
    """The verify test above would notice a mistake: a misspelt key and a
    bad memory value in a copy of the unit are reported."""
    root = tmp_path / "root"
    shutil.copytree(systemd_root, root, symlinks=True)
    u = root / "etc/systemd/system/parley-worker@.service"
    u.write_text(u.read_text().replace("NoNewPrivileges=", "NoNewPrivilegs=")
                 .replace("MemoryMax=3G", "MemoryMax=3Q"))
    r = _sd(root, "verify")
    assert "NoNewPrivilegs" in r.stderr and "3Q" in r.stderr, r.stderr


def test_systemd_units_sandbox_exposure(systemd_root):
    r = _sd(systemd_root, "security", "--offline=yes", "--threshold=20", "--no-pager")
    # exit non-zero when a unit's exposure is above 2.0 ("OK" is below 4)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    levels = [float(x) for x in re.findall(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)]
    assert len(levels) == 2 and max(levels) <= 2.0, r.stdout[-500:]


def test_systemd_worker_unit_matches_the_worker(parley_bin, tmp_path):
    """TimeoutStopSec above the worker's grace period, restart except on the
    exit status the worker really uses for a bad configuration, instance
    name as worker.id and group.instance.id, MemoryMax above the budget the
    unit's comment states."""
    u = _unit(DEPLOY / "systemd" / "parley-worker@.service")
    grace_s = int(_worker_defaults(parley_bin)["worker.grace_ms"]) / 1000
    assert _seconds(u["TimeoutStopSec"][0]) >= grace_s + 10, (u["TimeoutStopSec"], grace_s)
    assert u["KillSignal"] == ["SIGTERM"] and u["Restart"] == ["on-failure"]
    assert u["RestartPreventExitStatus"] == ["2"]
    bad = subprocess.run([str(parley_bin), "worker", "--no.such.key", "1"], capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2, bad.stderr
    bad = subprocess.run([str(parley_bin), "worker", "--config", str(tmp_path / "missing.conf")],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2, bad.stderr
    assert "PARLEY_WORKER_ID=%i" in u["Environment"]
    assert "PARLEY_KAFKA_GROUP_INSTANCE_ID=%i" in u["Environment"]
    assert any(not e.startswith("-") for e in u["EnvironmentFile"])
    assert u["ProtectSystem"] == ["strict"] and u["NoNewPrivileges"] == ["yes"]
    assert u["DynamicUser"] == ["yes"] and u["RestrictAddressFamilies"]
    # Gemma 3 270M (272 MiB resident) + cache.budget_mib 2048 + 512 MiB
    mem = {"G": 1024, "M": 1}
    m = re.fullmatch(r"(\d+)([GM])", u["MemoryMax"][0])
    assert m and int(m.group(1)) * mem[m.group(2)] >= 272 + 2048 + 512
    g = _unit(DEPLOY / "systemd" / "parley-gateway.service")
    assert g["RestartPreventExitStatus"] == ["2"] and g["ProtectSystem"] == ["strict"]


# ---- Kubernetes --------------------------------------------------------------

def test_k8s_manifests_validate():
    files = sorted(str(f) for f in K8S.glob("*.yaml") if f.name != "kustomization.yaml")
    r = subprocess.run([_venv_tool("kubernetes-validate"), "--strict", "-k", K8S_VERSION, *files],
                       capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    passed = re.findall(r"INFO (\S+) passed for resource (\S+)", out)
    crds = re.findall(r"WARN (\S+) Couldn't find schema for kind (\w+)", out)
    # every built-in kind validated; only the CRDs go without a schema
    assert sorted(k for _, k in crds) == ["ScaledObject", "ServiceMonitor", "TriggerAuthentication"], out
    assert len(passed) + len(crds) == len(_manifests()), out
    assert {"statefulset", "poddisruptionbudget", "service", "secret", "configmap"} <= \
        {p.split("/")[0] for _, p in passed}, out


def test_k8s_validate_catches_a_typo(tmp_path):
    ss = next(d for d in _yaml_docs(K8S / "worker-statefulset.yaml") if d["kind"] == "StatefulSet")
    ss["spec"]["template"]["spec"]["terminationGracePeriodSecond"] = 45
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(ss))
    r = subprocess.run([_venv_tool("kubernetes-validate"), "--strict", "-k", K8S_VERSION, str(f)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "terminationGracePeriodSecond" in r.stdout + r.stderr


# Subsets of the upstream CRD schemas (prometheus-operator
# monitoring.coreos.com_servicemonitors, KEDA keda.sh_scaledobjects and
# keda.sh_triggerauthentications): the fields these manifests use, with
# their types; anything else is refused, so a misspelt field fails here
# instead of being silently dropped by the API server's pruning.
def _obj(props, required=()):
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": False}


_STR = {"type": "string"}
_INT = {"type": "integer"}
_META = {"type": "object", "required": ["name"],
         "properties": {"name": _STR, "labels": {"type": "object"},
                        "namespace": _STR, "annotations": {"type": "object"}},
         "additionalProperties": False}
_SELECTOR = _obj({"matchLabels": {"type": "object", "additionalProperties": _STR}})
CRD_SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): _obj({
        "apiVersion": _STR, "kind": _STR, "metadata": _META,
        "spec": _obj({
            "selector": _SELECTOR,
            "namespaceSelector": _obj({"matchNames": {"type": "array", "items": _STR},
                                       "any": {"type": "boolean"}}),
            "jobLabel": _STR,
            "endpoints": {"type": "array", "minItems": 1, "items": _obj({
                "port": _STR, "path": _STR, "scheme": {"enum": ["http", "https"]},
                "interval": {"type": "string", "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
                "scrapeTimeout": {"type": "string", "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
                "honorLabels": {"type": "boolean"}})},
        }, ["selector", "endpoints"]),
    }, ["apiVersion", "kind", "metadata", "spec"]),
    ("keda.sh/v1alpha1", "ScaledObject"): _obj({
        "apiVersion": _STR, "kind": _STR, "metadata": _META,
        "spec": _obj({
            "scaleTargetRef": _obj({"apiVersion": _STR, "kind": _STR, "name": _STR,
                                    "envSourceContainerName": _STR}, ["name"]),
            "minReplicaCount": _INT, "maxReplicaCount": _INT, "idleReplicaCount": _INT,
            "pollingInterval": _INT, "cooldownPeriod": _INT,
            "advanced": _obj({
                "restoreToOriginalReplicaCount": {"type": "boolean"},
                "horizontalPodAutoscalerConfig": _obj({
                    "name": _STR,
                    # autoscaling/v2 HorizontalPodAutoscalerBehavior
                    "behavior": _obj({d: _obj({
                        "stabilizationWindowSeconds": _INT,
                        "selectPolicy": {"enum": ["Max", "Min", "Disabled"]},
                        "policies": {"type": "array", "items": _obj({
                            "type": {"enum": ["Pods", "Percent"]}, "value": _INT,
                            "periodSeconds": _INT}, ["type", "value", "periodSeconds"])}})
                        for d in ("scaleUp", "scaleDown")})})}),
            "triggers": {"type": "array", "minItems": 1, "items": _obj({
                "type": _STR, "name": _STR, "useCachedMetrics": {"type": "boolean"},
                "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                "metadata": {"type": "object", "additionalProperties": _STR},
                "authenticationRef": _obj({"name": _STR, "kind": _STR}, ["name"])},
                ["type", "metadata"])},
        }, ["scaleTargetRef", "triggers"]),
    }, ["apiVersion", "kind", "metadata", "spec"]),
    ("keda.sh/v1alpha1", "TriggerAuthentication"): _obj({
        "apiVersion": _STR, "kind": _STR, "metadata": _META,
        "spec": _obj({"secretTargetRef": {"type": "array", "items": _obj({
            "parameter": _STR, "name": _STR, "key": _STR}, ["parameter", "name", "key"])}}),
    }, ["apiVersion", "kind", "metadata", "spec"]),
}
# KEDA's kafka scaler's metadata keys (scaler docs); a typo is refused.
KEDA_KAFKA_KEYS = {"bootstrapServers", "consumerGroup", "topic", "lagThreshold",
                   "activationLagThreshold", "offsetResetPolicy", "allowIdleConsumers",
                   "scaleToZeroOnInvalidOffset", "excludePersistentLag",
                   "limitToPartitionsWithLag", "partitionLimitation", "version", "sasl", "tls"}


def test_k8s_crds_against_schema_subsets():
    jsonschema = pytest.importorskip("jsonschema")
    seen = set()
    for key, d in _manifests().items():
        k = (d["apiVersion"], d["kind"])
        if k in CRD_SCHEMAS:
            jsonschema.validate(d, CRD_SCHEMAS[k])
            seen.add(k)
            for t in d["spec"].get("triggers", []):
                assert t["type"] == "kafka" and set(t["metadata"]) <= KEDA_KAFKA_KEYS, t
    assert seen == set(CRD_SCHEMAS)
    bad = copy.deepcopy(_manifests()["ServiceMonitor/parley-worker"])
    bad["spec"]["endpoints"][0]["intervall"] = "15s"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, CRD_SCHEMAS[("monitoring.coreos.com/v1", "ServiceMonitor")])


def test_k8s_kustomization_and_wiring(parley_bin):
    kz = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {f.name for f in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kz["resources"]) == files and len(kz["resources"]) == len(files)
    m = _manifests()
    ss = m["StatefulSet/parley-worker"]
    pod = ss["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["PARLEY_WORKER_ID"]["value"] == "$(POD_NAME)"
    assert env["PARLEY_KAFKA_GROUP_INSTANCE_ID"]["value"] == "$(POD_NAME)"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    conf = _conf_text(m["ConfigMap/parley-worker"]["data"]["worker.conf"])
    grace_s = int(conf.get("worker.grace_ms", _worker_defaults(parley_bin)["worker.grace_ms"])) / 1000
    assert pod["terminationGracePeriodSeconds"] >= grace_s + 10
    # memory limit = model resident (272 MiB) + KV pool + 512 MiB
    lim = c["resources"]["limits"]["memory"]
    assert lim.endswith("Mi") and int(lim[:-2]) >= 272 + int(conf["cache.budget_mib"]) + 512
    secrets = {e["secretRef"]["name"] for e in c["envFrom"]}
    assert {"parley-kafka", "parley-redis"} <= secrets
    for s in secrets:
        assert f"Secret/{s}" in m
    assert any(k.startswith("PARLEY_REDIS_PASSWORD") for k in m["Secret/parley-redis"]["stringData"])
    svc = m["Service/parley-worker"]
    assert ss["spec"]["serviceName"] == "parley-worker" and svc["spec"]["clusterIP"] == "None"
    sm = m["ServiceMonitor/parley-worker"]
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert {e["port"] for e in sm["spec"]["endpoints"]} <= {p["name"] for p in svc["spec"]["ports"]}
    assert sm["spec"]["endpoints"][0]["path"] == "/metrics"
    pdb = m["PodDisruptionBudget/parley-worker"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= \
        ss["spec"]["template"]["metadata"]["labels"].items()
    so = m["ScaledObject/parley-worker"]
    assert so["spec"]["scaleTargetRef"]["kind"] == "StatefulSet"
    trig = so["spec"]["triggers"][0]["metadata"]
    assert trig["consumerGroup"] == conf["worker.group"]
    assert trig["topic"] == conf["worker.topic.turns"]
    assert trig.get("allowIdleConsumers", "false") == "false"
    assert f"TriggerAuthentication/{so['spec']['triggers'][0]['authenticationRef']['name']}" in m


def test_yamllint_deploy():
    r = subprocess.run([_venv_tool("yamllint"), "-c", str(DEPLOY / ".yamllint"), "-s",
                        str(DEPLOY)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


# ---- PromQL: metric names and labels in the dashboard and the rules ----------

def _promql_uses(expr: str) -> list:
    """(metric name, set of labels the expr relies on it having) for every
    selector in expr: its matchers, and the by-labels of the aggregations
    and the on/ignoring labels of the binary operations around it."""
    pp = pytest.importorskip("promql_parser")
    uses = []

    def walk(n, ctx):
        if isinstance(n, pp.VectorSelector):
            labels = {mt.name for mt in n.matchers.matchers if mt.name != "__name__"}
            uses.append((n.name, labels | ctx))
        elif isinstance(n, pp.MatrixSelector):
            walk(n.vector_selector, ctx)
        elif isinstance(n, pp.AggregateExpr):
            extra = set(n.modifier.labels) if n.modifier and \
                n.modifier.type == pp.AggModifierType.By else set()
            walk(n.expr, ctx | extra)
        elif isinstance(n, pp.BinaryExpr):
            extra = set()
            if n.modifier is not None and n.modifier.matching is not None:
                extra = set(n.modifier.matching.labels) if hasattr(n.modifier.matching, "labels") else set()
            walk(n.lhs, ctx | extra)
            walk(n.rhs, ctx | extra)
        elif isinstance(n, pp.Call):
            for a in n.args:
                walk(a, ctx)
        elif isinstance(n, (pp.ParenExpr, pp.SubqueryExpr, pp.UnaryExpr)):
            walk(n.expr, ctx)

    walk(pp.parse(expr), set())
    assert uses, f"no metric in {expr!r}"
    return uses


def _grafana_expr(e: str) -> str:
    """Dashboard expr with Grafana's variables replaced by what they stand for."""
    return e.replace("$__rate_interval", "5m").replace("$job", "parley-worker")


def _alert_rules() -> list:
    doc = yaml.safe_load(ALERTS.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def _dashboard_exprs() -> list:
    d = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in d["panels"] for t in p.get("targets", [])]


def test_alert_rules_structure():
    doc = yaml.safe_load(ALERTS.read_text())
    assert set(doc) == {"groups"}
    names = []
    for g in doc["groups"]:
        assert set(g) <= {"name", "interval", "rules"} and g["rules"]
        for r in g["rules"]:
            assert set(r) <= {"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}, r
            assert r["labels"]["severity"] in ("info", "warning", "critical")
            assert r["annotations"]["summary"] and r["annotations"]["description"]
            _promql_uses(r["expr"])
            names.append(r["alert"])
    assert len(names) == len(set(names))
    for want in ("ParleyConsumerLagGrowing", "ParleyDLQRate", "ParleyProducerRebuilds",
                 "ParleyNoReadyWorkers", "ParleyCacheHitShareCollapsed"):
        assert want in names


def test_alert_rules_promtool():
    promtool = _promtool()
    r = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([promtool, "test", "rules", ALERT_TESTS.name], capture_output=True,
                       text=True, timeout=120, cwd=ALERT_TESTS.parent)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


# ---- Grafana -----------------------------------------------------------------

def _lost_fields(a, b, path=""):
    """Paths of `a` missing from `b` (what a schema round trip dropped)."""
    out = []
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return [path or "/"]
        for k, v in a.items():
            out += [f"{path}/{k}"] if k not in b else _lost_fields(v, b[k], f"{path}/{k}")
    elif isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return [path]
        for i, (x, y) in enumerate(zip(a, b)):
            out += _lost_fields(x, y, f"{path}[{i}]")
    return out


def _sdk_round_trip(d: dict) -> dict:
    sdk = pytest.importorskip("grafana_foundation_sdk")  # noqa: F841
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard

    register_default_plugins()
    back = Dashboard.from_json(copy.deepcopy(d)).to_json()
    return json.loads(json.dumps(back, default=lambda o: o.to_json()))


def test_dashboard_loads_into_grafana_schema():
    d = json.loads(DASHBOARD.read_text())
    assert _lost_fields(d, _sdk_round_trip(d)) == []
    # the round trip would notice a field the schema does not know
    bad = copy.deepcopy(d)
    bad["panels"][1]["gridpos"] = bad["panels"][1]["gridPos"]
    assert _lost_fields(bad, _sdk_round_trip(bad)) == ["/panels[1]/gridpos"]


def test_dashboard_structure():
    d = json.loads(DASHBOARD.read_text())
    assert d["uid"] and d["title"] and d["schemaVersion"] >= 36
    var = {v["name"]: v for v in d["templating"]["list"]}
    assert var["datasource"]["type"] == "datasource" and var["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for p in d["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"panel {p['title']} overlaps"
                cells.add((x, y))
        if p["type"] == "row":
            continue
        assert p["type"] == "timeseries"
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in p["targets"]]
        assert p["targets"] and len(refs) == len(set(refs))
        for t in p["targets"]:
            assert t["datasource"] == p["datasource"] and t["expr"]
            _promql_uses(_grafana_expr(t["expr"]))
    titles = " | ".join(p["title"].lower() for p in d["panels"])
    for want in ("turns/s", "tokens/s", "time to first token", "turn latency", "by tier",
                 "consumer lag per partition", "transactions", "dlq", "backpressure",
                 "resident memory vs budget"):
        assert want in titles, want
    # percentiles of TTFT and turn latency
    exprs = " ".join(e for _, e in _dashboard_exprs())
    for q in ("0.5", "0.95", "0.99"):
        assert f"histogram_quantile({q}, sum by (le) (rate(parley_ttft_seconds_bucket" in exprs
        assert f"histogram_quantile({q}, sum by (le) (rate(parley_turn_seconds_bucket" in exprs


# ---- a real worker's /metrics ------------------------------------------------

@pytest.fixture(scope="module")
def scrape(parley_bin, kafka_bootstrap, redis_addr, tmp_path_factory):
    """Run a worker the way the StatefulSet does (ConfigMap worker.conf,
    pod name in PARLEY_WORKER_ID and PARLEY_KAFKA_GROUP_INSTANCE_ID), with
    the cluster addresses pointed at the test services, serve two turns of
    one conversation, and return (/metrics text, the pod name, the pid,
    its VmRSS in bytes read right after the scrape, the KV pool MiB)."""
    msgpack = pytest.importorskip("msgpack")
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    from worker_kit import free_port, http_get, wait_listening

    tmp = tmp_path_factory.mktemp("deployops")
    model = tmp / "cai-tiny.gguf"
    subprocess.run([str(parley_bin), "mkmodel", "--preset", "cai-tiny", "--out", str(model)],
                   check=True, capture_output=True, timeout=60)
    m = _manifests()
    conf = m["ConfigMap/parley-worker"]["data"]["worker.conf"]
    (tmp / "worker.conf").write_text(conf)
    sfx = uuid.uuid4().hex[:10]
    topics = {k: f"dep-{k}-{sfx}" for k in ("turns", "tokens", "responses", "dlq")}
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for f in admin.create_topics([NewTopic(topics["turns"], 2, 1), NewTopic(topics["tokens"], 2, 1),
                                  NewTopic(topics["responses"], 2, 1),
                                  NewTopic(topics["dlq"], 1, 1)]).values():
        f.result(30)
    pod = "parley-worker-0"
    port = free_port()
    ss_env = {e["name"]: e for e in
              m["StatefulSet/parley-worker"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    env = {k: v["value"].replace("$(POD_NAME)", pod) for k, v in ss_env.items() if "value" in v}
    env["PARLEY_WORKER_HTTP"] = f"127.0.0.1:{port}"  # the pod's 0.0.0.0, on loopback here
    pool_mib = 64  # the ConfigMap's 2048 MiB pool is resident at start: too much for CI
    # The flags point the cluster settings at the test services; every
    # other key comes from the ConfigMap and must be accepted as it is.
    args = [str(parley_bin), "worker", "--config", str(tmp / "worker.conf"),
            "--model.path", str(model),
            "--model.threads", "1",
            "--kafka.bootstrap.servers", kafka_bootstrap, "--kafka.security.protocol", "plaintext",
            "--redis.addr", f"{redis_addr[0]}:{redis_addr[1]}",
            "--cache.budget_mib", str(pool_mib),
            "--kafka.session.timeout.ms", "6000", "--kafka.heartbeat.interval.ms", "500",
            "--kafka.transaction.timeout.ms", "8000", "--scheduler.batch_window_us", "2000",
            "--worker.group", f"dep-group-{sfx}",
            *[a for k in ("turns", "tokens", "responses", "dlq")
              for a in (f"--worker.topic.{k}", topics[k])]]
    log = open(tmp / "worker.log", "wb")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_") or
             k in ("PARLEY_ISA",)}
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**clean, **env})
    logtext = lambda _wid=None: (tmp / "worker.log").read_text(errors="replace")  # noqa: E731
    try:
        wait_listening(port, proc, logtext, pod)
        end = time.time() + 90
        while time.time() < end and http_get(port, "/readyz")[0] != 200:
            assert proc.poll() is None, logtext()
            time.sleep(0.2)
        assert http_get(port, "/readyz")[0] == 200, logtext()
        p = ck.Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
        hist = [{"role": "user", "content": "hello there, how are you today?"}]
        for t in range(2):
            rec = {"v": 1, "conversation_id": "dep-c", "turn_id": f"dep-c-t{t}", "messages": hist,
                   "params": {"max_tokens": 4, "temperature": 0.0}, "stream": True}
            p.produce(topics["turns"], key="dep-c", value=msgpack.packb(rec, use_bin_type=True))
            p.flush(30)
            want = t + 1
            end = time.time() + 120
            text = ""
            while time.time() < end:
                text = http_get(port, "/metrics")[1]
                mm = re.search(r"^parley_turns_total (\S+)$", text, re.M)
                if mm and float(mm.group(1)) >= want:
                    break
                assert proc.poll() is None, logtext()
                time.sleep(0.2)
            else:
                raise AssertionError(f"turn {t} never committed: {logtext()[-2000:]}")
            hist = hist + [{"role": "assistant", "content": "fine"},
                           {"role": "user", "content": f"and question {t + 2}?"}]
        # lag is refreshed by the poll loop once the commit position is known
        end = time.time() + 30
        while time.time() < end and "parley_consumer_lag{" not in text:
            time.sleep(0.2)
            text = http_get(port, "/metrics")[1]
        vmrss = int(re.search(r"^VmRSS:\s+(\d+) kB", Path(f"/proc/{proc.pid}/status").read_text(),
                              re.M).group(1)) * 1024
        yield text, pod, proc.pid, vmrss, pool_mib, logtext()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def _families(text: str) -> dict:
    """name -> (type, [(sample name, labels)]) via prometheus_client's parser
    (it raises on malformed exposition)."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(text):
        out[fam.name] = (fam.type, [(s.name, s.labels) for s in fam.samples])
    return out


def test_worker_metrics_exposition_lints(scrape):
    text = scrape[0]
    fams = _families(text)
    assert len(fams) > 30
    # prometheus_client strips _total from counter family names
    assert fams["parley_turns"][0] == "counter" and fams["parley_ttft_seconds"][0] == "histogram"
    r = subprocess.run([_promtool(), "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_worker_runs_with_the_statefulset_identity(scrape):
    text, pod, _, _, _, log = scrape
    # worker.id from PARLEY_WORKER_ID (the pod name), static membership on
    assert f"worker={pod}" in log, log[-2000:]
    assert re.search(r"^parley_assigned_partitions [1-9]", text, re.M), text


def test_worker_memory_metrics(scrape):
    text, _, _, vmrss, pool_mib, _ = scrape
    val = {n: float(v) for n, v in re.findall(r"^(\w+) (\S+)$", text, re.M)}
    assert val["parley_kv_pool_bytes"] == pool_mib << 20
    assert val["parley_model_resident_bytes"] > 0
    rss = val["process_resident_memory_bytes"]
    # /proc/self/statm and /proc/PID/status read the same counter a moment
    # apart; they agree within a few MiB for an idle worker
    assert abs(rss - vmrss) < 32 << 20, (rss, vmrss)
    # the sizing rule of deploy/README.md: model + KV pool + 512 MiB
    assert rss <= val["parley_model_resident_bytes"] + val["parley_kv_pool_bytes"] + (512 << 20)


def _exported(fams: dict) -> dict:
    """Sample name -> set of label names seen on it."""
    out = {}
    for _, (_, samples) in fams.items():
        for name, labels in samples:
            out.setdefault(name, set()).update(labels)
    return out


def test_every_dashboard_and_alert_metric_is_exported(scrape):
    exported = _exported(_families(scrape[0]))
    uses = [(f"dashboard panel {t!r}", _grafana_expr(e)) for t, e in _dashboard_exprs()]
    uses += [(f"alert {r['alert']}", r["expr"]) for r in _alert_rules()]
    missing = []
    names = set()
    for where, expr in uses:
        for metric, labels in _promql_uses(expr):
            names.add(metric)
            if metric in PROMETHEUS_SERIES:
                continue
            if metric not in exported:
                missing.append(f"{where}: metric {metric}")
                continue
            have = exported[metric] | TARGET_LABELS
            for lab in sorted(labels - have):
                missing.append(f"{where}: {metric} has no label {lab!r} "
                               f"(has {sorted(exported[metric])})")
    assert not missing, "\n".join(missing)
    # the ones the issue names are among them
    for want in ("parley_turns_total", "parley_completion_tokens_total", "parley_ttft_seconds_bucket",
                 "parley_turn_seconds_bucket", "parley_cache_hit_tokens_total",
                 "parley_consumer_lag", "parley_txn_commits_total", "parley_dlq_total",
                 "parley_backpressure_paused", "process_resident_memory_bytes",
                 "parley_kv_pool_bytes", "parley_producer_rebuilds_total",
                 "parley_assigned_partitions", "parley_cached_tokens_total"):
        assert want in names, want
