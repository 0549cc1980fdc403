#!/usr/bin/python3
"""The Kubernetes manifests, Dockerfiles and Grafana dashboards as their tools read them.

    tests/deploy/check_manifests.py ROOT BIN_DIR

Run by tests/deploy/check_deploy.sh (ctest DeployFilesTest). Checks, without a
cluster, a Docker daemon or Grafana:

  deploy/k8s        every file parses as YAML (python3-yaml) and each object
                    has what its kind needs: the kustomization lists every
                    manifest; selectors match their pods' labels; the
                    coordinator is one StatefulSet replica whose
                    PersistentVolumeClaim is mounted at exactly its --db
                    folder; a Service reaches its grpc and metrics ports;
                    one worker DaemonSet per platform with a nodeSelector,
                    --platform equal to its platform label, GPU resources for
                    nvidia (nvidia.com/gpu) and amd (amd.com/gpu), and
                    --coordinator naming that Service; every flag is one the
                    binary in BIN_DIR accepts (its --help); every file a flag
                    names lies on a mounted volume; scrape annotations name the
                    --metrics port; images are the ones deploy/docker builds.
  deploy/docker     each Dockerfile's ENTRYPOINT is a kevo program of BIN_DIR
                    in the bundle the image copies, its CMD flags are accepted,
                    EXPOSE matches them, the bases are as documented (Debian 12;
                    nvidia/cuda; rocm/), kevo is built with
                    scripts/install-deps.sh's packages, and nothing is
                    downloaded (no curl, wget, git clone, pip).
  deploy/grafana    every dashboard is JSON with a unique uid; every panel has
                    the provisioned datasource and targets with an expression;
                    the provisioning files name that datasource uid and the
                    folder the dashboards are mounted at.
  deploy/prometheus prometheus-kubernetes.yml keeps the job names the alert
                    rules select on (promtool checks it where its build has
                    kubernetes_sd; Debian's has not).

Prints one line per problem and exits 1 if there is any.
"""
import glob
import json
import os
import re
import subprocess
import sys

import yaml

ROOT, BIN = sys.argv[1], sys.argv[2]
problems = []


def problem(where, what):
    problems.append(f"{where}: {what}")


# --------------------------------------------------------------------- flags
def accepted_flags(program):
    """The flags `program --help` lists: {flag: takes_value}."""
    path = os.path.join(BIN, program)
    try:
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30)
    except OSError as e:
        problem(path, f"cannot run --help: {e}")
        return {}
    if out.returncode != 0:
        problem(path, f"--help exited {out.returncode}: {out.stderr.strip()}")
        return {}
    # The usage block only: the descriptions below it mention other programs' flags.
    usage = []
    for line in out.stdout.splitlines():
        if re.match(r"\s{1,4}--", line):
            break
        usage.append(line)
    flags = {}
    tokens = " ".join(usage).split()
    for i, tok in enumerate(tokens):
        m = re.fullmatch(r"\[*(--[a-z][a-z0-9-]*)(\]*),?", tok)
        if not m or m.group(1) in flags:
            continue
        # "[--auth [--admin-token-file FILE]]": a flag whose token closes a
        # bracket, or that the next flag follows, takes no value.
        nxt = tokens[i + 1].lstrip("[") if i + 1 < len(tokens) else ""
        flags[m.group(1)] = not m.group(2) and not nxt.startswith("--") and nxt != ""
    if not flags:
        problem(path, "--help lists no flags")
    return flags


FLAGS = {p: accepted_flags(p) for p in ("kevo-coordinator", "kevo-worker")}


def parse_args(where, program, args):
    """args as {flag: value or True}; a problem for every flag `program` does not accept."""
    known = FLAGS[program]
    out = {}
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("--"):
            problem(where, f"{program} argument {a!r} is not a flag")
            i += 1
            continue
        if a not in known:
            problem(where, f"{program} does not accept {a} (its --help lists {', '.join(sorted(known))})")
            i += 1
            continue
        if known[a]:
            if i + 1 >= len(args):
                problem(where, f"{a} needs a value")
                break
            out[a] = args[i + 1]
            i += 2
        else:
            out[a] = True
            i += 1
    return out


def port_of(address):
    return int(address.rsplit(":", 1)[1])


# --------------------------------------------------------------------- docker
DOCKER = os.path.join(ROOT, "deploy/docker")
dockerfiles = sorted(glob.glob(os.path.join(DOCKER, "Dockerfile.*")))
IMAGES = {}  # image name -> (program, platform or None)
expected = {"coordinator": ("kevo-coordinator", None, r"debian:12"),
            "worker-cpu": ("kevo-worker", "cpu", r"debian:12"),
            "worker-nvidia": ("kevo-worker", "nvidia", r"nvidia/cuda:"),
            "worker-amd": ("kevo-worker", "amd", r"rocm/")}
for kind in expected:
    if not os.path.exists(os.path.join(DOCKER, f"Dockerfile.{kind}")):
        problem(DOCKER, f"Dockerfile.{kind} is missing")
for path in dockerfiles:
    kind = os.path.basename(path).split(".", 1)[1]
    where = os.path.relpath(path, ROOT)
    if kind not in expected:
        problem(where, f"unexpected Dockerfile (expected {', '.join(expected)})")
        continue
    program, platform, base = expected[kind]
    IMAGES[f"kevo-{kind}"] = (program, platform)
    text = open(path).read()
    # Continuation lines joined, comments dropped.
    lines = [l for l in re.sub(r"\\\n", " ", text).splitlines() if l.strip() and not l.lstrip().startswith("#")]
    args = {}
    stages = []
    entrypoint = cmd = None
    exposed = set()
    for line in lines:
        word, _, rest = line.strip().partition(" ")
        word = word.upper()
        if word == "ARG" and "=" in rest:
            k, v = rest.split("=", 1)
            args[k.strip()] = v.strip()
        elif word == "FROM":
            image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), rest.split()[0])
            stages.append(image)
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
        elif word == "EXPOSE":
            exposed |= {int(p.split("/")[0]) for p in rest.split()}
        elif word == "RUN" and re.search(r"\b(curl|wget|git\s+clone|pip3?\s+install)\b", rest):
            problem(where, f"downloads something: {rest[:80]}")
    if not stages or not re.match(base, stages[-1]):
        problem(where, f"the final image should be FROM {base}..., not {stages[-1] if stages else 'nothing'}")
    if not any(s.startswith("debian:12") for s in stages[:-1]):
        problem(where, "kevo should be built in a debian:12 stage")
    if "scripts/install-deps.sh" not in text:
        problem(where, "the build stage should install scripts/install-deps.sh's packages")
    if "scripts/bundle.sh" not in text or "COPY --from=build /opt/kevo /opt/kevo" not in text:
        problem(where, "the image should carry scripts/bundle.sh's bundle to /opt/kevo")
    if not (isinstance(entrypoint, list) and entrypoint):
        problem(where, "ENTRYPOINT must be an exec-form JSON list")
        continue
    if entrypoint[0] != f"/opt/kevo/bin/{program}":
        problem(where, f"ENTRYPOINT {entrypoint[0]} is not /opt/kevo/bin/{program}")
    if not os.access(os.path.join(BIN, os.path.basename(entrypoint[0])), os.X_OK):
        problem(where, f"ENTRYPOINT {entrypoint[0]}: {os.path.basename(entrypoint[0])} is not a program of {BIN}")
    flags = parse_args(where, program, entrypoint[1:] + (cmd or []))
    ports = {port_of(flags[f]) for f in ("--listen", "--metrics") if isinstance(flags.get(f), str)}
    if "--metrics" not in flags:
        problem(where, "CMD should serve --metrics")
    if ports != exposed:
        problem(where, f"EXPOSE {sorted(exposed)} but the flags listen on {sorted(ports)}")
    if platform and flags.get("--platform") != platform:
        problem(where, f"CMD --platform {flags.get('--platform')} for the {platform} image")

# --------------------------------------------------------------------- k8s
K8S = os.path.join(ROOT, "deploy/k8s")
objects = []  # (file, object)
kustomization = None
for path in sorted(glob.glob(os.path.join(K8S, "*.yaml"))):
    where = os.path.relpath(path, ROOT)
    try:
        docs = [d for d in yaml.safe_load_all(open(path)) if d is not None]
    except yaml.YAMLError as e:
        problem(where, f"not YAML: {e}")
        continue
    for d in docs:
        if not isinstance(d, dict) or not d.get("kind") or not d.get("apiVersion"):
            problem(where, "a document without kind and apiVersion")
            continue
        if d["kind"] == "Kustomization":
            kustomization = (path, d)
            continue
        if not d.get("metadata", {}).get("name"):
            problem(where, f"{d['kind']} without metadata.name")
        objects.append((os.path.basename(path), d))

OPTIONAL = {"podmonitor.yaml"}  # needs the Prometheus Operator's CRD
if kustomization is None:
    problem("deploy/k8s", "no kustomization.yaml")
else:
    path, k = kustomization
    listed = set(k.get("resources", []))
    files = {os.path.basename(p) for p in glob.glob(os.path.join(K8S, "*.yaml"))} - {"kustomization.yaml"}
    for r in sorted(listed - files):
        problem("deploy/k8s/kustomization.yaml", f"resource {r} does not exist")
    for f in sorted(files - listed - OPTIONAL):
        problem("deploy/k8s/kustomization.yaml", f"{f} is not listed in resources")
    if k.get("namespace") != "kevo":
        problem("deploy/k8s/kustomization.yaml", "namespace should be kevo")
    for img in k.get("images", []):
        if img.get("name") not in IMAGES:
            problem("deploy/k8s/kustomization.yaml", f"image {img.get('name')} is not built by deploy/docker")


def of_kind(kind):
    return [(f, o) for f, o in objects if o["kind"] == kind]


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def pod_checks(where, obj, program):
    """Checks a workload's pod template; returns (labels, container, flags)."""
    spec = obj.get("spec", {})
    template = spec.get("template", {})
    labels = template.get("metadata", {}).get("labels", {})
    if not matches(spec.get("selector", {}).get("matchLabels"), labels):
        problem(where, f"selector {spec.get('selector')} does not match the pod labels {labels}")
    pod = template.get("spec", {})
    containers = pod.get("containers", [])
    if len(containers) != 1:
        problem(where, "expected one container")
        return labels, {}, {}, pod
    c = containers[0]
    image = c.get("image", "").rsplit("/", 1)[-1].split(":")[0]
    if image not in IMAGES:
        problem(where, f"image {c.get('image')} is not one deploy/docker builds ({', '.join(IMAGES)})")
    elif IMAGES[image][0] != program:
        problem(where, f"image {image} runs {IMAGES[image][0]}, not {program}")
    flags = parse_args(where, program, [str(a) for a in c.get("args", [])])
    # Volumes: every mount names a volume (or a claim template), every file flag lies on a mount.
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
    mounts = c.get("volumeMounts", [])
    for m in mounts:
        if m["name"] not in volumes and m["name"] not in claims:
            problem(where, f"volumeMount {m['name']} names no volume")
    for flag in ("--tls-cert", "--tls-key", "--tls-ca", "--token-file", "--admin-token-file", "--work-dir", "--db"):
        value = flags.get(flag)
        if not isinstance(value, str):
            continue
        if not any(value == m["mountPath"] or value.startswith(m["mountPath"].rstrip("/") + "/") for m in mounts):
            problem(where, f"{flag} {value} is on no mounted volume")
    for flag in ("--tls-cert", "--tls-key", "--tls-ca", "--token-file"):
        value = flags.get(flag)
        if isinstance(value, str):
            m = max((m for m in mounts if value.startswith(m["mountPath"].rstrip("/") + "/")),
                    key=lambda m: len(m["mountPath"]), default=None)
            if m and "secret" not in volumes.get(m["name"], {}):
                problem(where, f"{flag} {value} should come from a Secret volume")
    # Ports: the flags' ports are container ports; the scrape annotations name the metrics one.
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    for flag in ("--listen", "--metrics"):
        if isinstance(flags.get(flag), str) and port_of(flags[flag]) not in ports.values():
            problem(where, f"{flag} {flags[flag]}: port not among the container ports {ports}")
    if "--metrics" not in flags:
        problem(where, "no --metrics: Prometheus cannot scrape it")
    else:
        ann = template.get("metadata", {}).get("annotations", {})
        if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/port") != str(port_of(flags["--metrics"])):
            problem(where, f"scrape annotations {ann} do not name the --metrics port")
        if ports.get("metrics") != port_of(flags["--metrics"]):
            problem(where, "the --metrics port should be the container port named metrics (the PodMonitor's)")
    sc = c.get("securityContext", {})
    if sc.get("allowPrivilegeEscalation") is not False or sc.get("privileged"):
        problem(where, "the container should not be privileged nor allow privilege escalation")
    if pod.get("securityContext", {}).get("runAsNonRoot") is not True:
        problem(where, "the pod should run as non-root (the images' kevo user)")
    return labels, c, flags, pod


services = of_kind("Service")
coordinator_service = None
statefulsets = of_kind("StatefulSet")
if len(statefulsets) != 1:
    problem("deploy/k8s", f"expected one StatefulSet (the coordinator), found {len(statefulsets)}")
for f, sts in statefulsets:
    where = f"deploy/k8s/{f}: StatefulSet {sts['metadata']['name']}"
    spec = sts.get("spec", {})
    if spec.get("replicas") != 1:
        problem(where, "the coordinator must run exactly one replica (one RocksDB, one process)")
    labels, c, flags, pod = pod_checks(where, sts, "kevo-coordinator")
    for flag in ("--listen", "--db", "--metrics", "--auth", "--tls-cert", "--tls-key"):
        if flag not in flags:
            problem(where, f"the coordinator should run with {flag} (docs/security.md)")
    claims = {t["metadata"]["name"]: t for t in spec.get("volumeClaimTemplates", [])}
    if not claims:
        problem(where, "no volumeClaimTemplates: the RocksDB folder would not survive the pod")
    db_mounts = [m for m in c.get("volumeMounts", []) if m["name"] in claims]
    if not any(m["mountPath"] == flags.get("--db") for m in db_mounts):
        problem(where, f"--db {flags.get('--db')} is not where the PersistentVolumeClaim is mounted "
                       f"({[m['mountPath'] for m in db_mounts]})")
    for name, t in claims.items():
        if not t.get("spec", {}).get("resources", {}).get("requests", {}).get("storage"):
            problem(where, f"claim {name} requests no storage")
    governing = [s for _, s in services if s["metadata"]["name"] == spec.get("serviceName")]
    if not governing or governing[0]["spec"].get("clusterIP") != "None":
        problem(where, f"serviceName {spec.get('serviceName')} should be a headless Service")
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    for _, s in services:
        if not matches(s["spec"].get("selector"), labels):
            continue
        for p in s["spec"].get("ports", []):
            if p.get("targetPort") not in ports and p.get("targetPort") not in ports.values():
                problem(f"deploy/k8s/{f}: Service {s['metadata']['name']}",
                        f"targetPort {p.get('targetPort')} is no container port of the coordinator")
        if s["spec"].get("clusterIP") != "None":
            coordinator_service = s
    if coordinator_service is None:
        problem(where, "no (non-headless) Service selects the coordinator's pods")
    elif isinstance(flags.get("--listen"), str):
        grpc = [p for p in coordinator_service["spec"]["ports"] if ports.get(p.get("targetPort"), p.get("targetPort")) == port_of(flags["--listen"])]
        if not grpc:
            problem(where, f"Service {coordinator_service['metadata']['name']} does not reach --listen {flags['--listen']}")
for f, s in services:
    if not any(matches(s["spec"].get("selector"), o["spec"]["template"]["metadata"]["labels"])
               for _, o in statefulsets + of_kind("DaemonSet")):
        problem(f"deploy/k8s/{f}: Service {s['metadata']['name']}", "its selector matches no pods")

daemonsets = of_kind("DaemonSet")
platforms = {}
GPU = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}
for f, ds in daemonsets:
    where = f"deploy/k8s/{f}: DaemonSet {ds['metadata']['name']}"
    labels, c, flags, pod = pod_checks(where, ds, "kevo-worker")
    platform = labels.get("platform")
    platforms[platform] = f
    if flags.get("--platform") != platform:
        problem(where, f"--platform {flags.get('--platform')} but the pods are labelled platform={platform}")
    image = c.get("image", "").rsplit("/", 1)[-1].split(":")[0]
    if IMAGES.get(image, (None, platform))[1] != platform:
        problem(where, f"image {image} is not the {platform} worker's")
    if not pod.get("nodeSelector"):
        problem(where, "no nodeSelector: it would start a worker on every node")
    for flag in ("--coordinator", "--platform", "--token-file", "--tls-ca", "--metrics", "--work-dir"):
        if flag not in flags:
            problem(where, f"the worker should run with {flag}")
    if coordinator_service is not None and isinstance(flags.get("--coordinator"), str):
        host, port = flags["--coordinator"].rsplit(":", 1)
        name = coordinator_service["metadata"]["name"]
        if host.split(".")[0] != name or int(port) not in [p["port"] for p in coordinator_service["spec"]["ports"]]:
            problem(where, f"--coordinator {flags['--coordinator']} is not the Service {name}'s address")
    limits = c.get("resources", {}).get("limits", {})
    for p, resource in GPU.items():
        if p == platform and not limits.get(resource):
            problem(where, f"no {resource} in resources.limits")
        if p != platform and resource in limits:
            problem(where, f"asks for {resource} on the {platform} platform")
for p in ("cpu", "nvidia", "amd"):
    if p not in platforms:
        problem("deploy/k8s", f"no worker DaemonSet for platform {p}")

for f, pm in of_kind("PodMonitor"):
    where = f"deploy/k8s/{f}: PodMonitor"
    names = set()
    for e in pm["spec"].get("selector", {}).get("matchExpressions", []):
        names |= set(e.get("values", []))
    pods = [o["spec"]["template"]["metadata"]["labels"] for _, o in statefulsets + daemonsets]
    for n in ("kevo-coordinator", "kevo-worker"):
        if not any(l.get(pm["spec"].get("jobLabel")) == n for l in pods) or n not in names:
            problem(where, f"does not give job={n} (jobLabel {pm['spec'].get('jobLabel')})")
    if "platform" not in pm["spec"].get("podTargetLabels", []):
        problem(where, "should keep the workers' platform label (podTargetLabels)")

# --------------------------------------------------------------------- grafana
GRAFANA = os.path.join(ROOT, "deploy/grafana")
datasource_uid = None
try:
    ds_files = glob.glob(os.path.join(GRAFANA, "provisioning/datasources/*.yml"))
    for p in ds_files:
        for d in yaml.safe_load(open(p)).get("datasources", []):
            if d.get("type") == "prometheus":
                datasource_uid = d.get("uid")
    if not datasource_uid:
        problem("deploy/grafana/provisioning/datasources", "no prometheus datasource with a uid")
    dash_path = None
    for p in glob.glob(os.path.join(GRAFANA, "provisioning/dashboards/*.yml")):
        for prov in yaml.safe_load(open(p)).get("providers", []):
            dash_path = prov.get("options", {}).get("path")
    if not dash_path:
        problem("deploy/grafana/provisioning/dashboards", "no provider with options.path")
except (yaml.YAMLError, OSError, AttributeError) as e:
    problem("deploy/grafana/provisioning", f"unreadable: {e}")
uids = {}
boards = sorted(glob.glob(os.path.join(GRAFANA, "dashboards/*.json")))
if len(boards) < 4:
    problem("deploy/grafana/dashboards", f"expected the four dashboards, found {len(boards)}")
for path in boards:
    where = os.path.relpath(path, ROOT)
    try:
        d = json.load(open(path))
    except ValueError as e:
        problem(where, f"not JSON: {e}")
        continue
    if d.get("uid") in uids:
        problem(where, f"uid {d.get('uid')} is also {uids[d.get('uid')]}'s")
    uids[d.get("uid")] = where
    if not d.get("title") or not d.get("panels"):
        problem(where, "no title or no panels")
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") == "query" and v.get("datasource", {}).get("uid") != datasource_uid:
            problem(where, f"variable {v.get('name')} does not use the datasource {datasource_uid}")
    for panel in d.get("panels", []):
        title = panel.get("title") or f"panel {panel.get('id')}"
        if panel.get("datasource", {}).get("uid") != datasource_uid:
            problem(where, f"panel \"{title}\" has no datasource {datasource_uid} ({panel.get('datasource')})")
        targets = panel.get("targets") or []
        if not targets:
            problem(where, f"panel \"{title}\" has no targets")
        for t in targets:
            if not t.get("expr", "").strip():
                problem(where, f"panel \"{title}\" target {t.get('refId')} has no expr")
            if t.get("datasource", {}).get("uid", datasource_uid) != datasource_uid:
                problem(where, f"panel \"{title}\" target {t.get('refId')} names another datasource")

# --------------------------------------------------------------------- prometheus on kubernetes
path = os.path.join(ROOT, "deploy/prometheus/prometheus-kubernetes.yml")
try:
    cfg = yaml.safe_load(open(path))
    jobs = [s for s in cfg.get("scrape_configs", []) if s.get("kubernetes_sd_configs")]
    relabels = [r for s in jobs for r in s.get("relabel_configs", [])]
    if not any(r.get("target_label") == "job" and "app_kubernetes_io_name" in str(r.get("source_labels"))
               for r in relabels):
        problem("deploy/prometheus/prometheus-kubernetes.yml", "does not set job from app.kubernetes.io/name")
    if not any(r.get("target_label") == "platform" for r in relabels):
        problem("deploy/prometheus/prometheus-kubernetes.yml", "does not keep the workers' platform label")
    if "alerts.yml" not in cfg.get("rule_files", []):
        problem("deploy/prometheus/prometheus-kubernetes.yml", "does not load alerts.yml")
except (yaml.YAMLError, OSError, AttributeError) as e:
    problem("deploy/prometheus/prometheus-kubernetes.yml", f"unreadable: {e}")

for p in problems:
    print(p)
print(f"manifests: {len(objects)} Kubernetes objects, {len(dockerfiles)} Dockerfiles, {len(boards)} dashboards: "
      f"{'ok' if not problems else f'{len(problems)} problems'}")
sys.exit(1 if problems else 0)
