"""Part 4: ``pulumi preview`` wall time and peak memory, dev stack and generated fleets.

Everything runs in a temporary copy of the program (``Pulumi.yaml``, ``__main__.py``,
``components/``, ``stack_config/``, ``dynamic_providers/``, ``charts/``) with its own file
backend, so ``Pulumi.dev.yaml`` and the repository's state are never touched:

- **dev**: ``Pulumi.dev.yaml`` and its inventory folder ``environments/dev`` copied as they are
  (its credential sets decrypt with the dev stack's lab-only passphrase); its relative paths
  (``.lab/kubeconfig``, the BMC CA bundle) resolve inside the copy to the benchmark's own control
  plane (:mod:`bench.labctl`).
- **fleet-N** (N = 16, 64, 256 by default): :func:`fleet_stack` generates an inventory folder
  ``environments/fleetN`` of N hosts, each with a BMC and a BlueField-3 DPU, in racks of 32 hosts
  (a file each, every BMC naming the credential set ``bmc``), one hypervisor cluster, tenants and
  networks; the stack file holds the folder's path and the dev stack's two credential sets (its
  ciphertexts under its encryption salt, same passphrase), so no plaintext is written.
- **validation only** (10,000 hosts by default): the same generator, validated as
  ``python -m stack_config validate`` does (no preview).

Every preview runs with the policy pack (``policies``, lab config), as ``make preview`` does.

Figures per stack:

- ``config_bytes``: the configuration the engine hands the program (in one environment variable,
  ``PULUMI_CONFIG``; Linux caps one at 128 KiB) and the analyzer (the policy pack; the CLI this
  project pins passes it in the analyzer's ``ConfigureStack`` call, not its environment): measured
  in the previews from each process's ``/proc/<pid>/environ`` (``config_env_bytes_by_process``),
  and computed for every stack from its file (:func:`engine_config_bytes`: secrets counted as
  their ciphertext, an upper bound) beside what the same estate would weigh inline in
  ``composable-gpu:estate``.

- ``wall_seconds``: ``pulumi preview`` from start to exit (``time.perf_counter``).
- ``peak_tree_rss_mib``: highest sum of RSS over the CLI and all its descendant processes
  (engine, language host, the Python program, resource providers), sampled from ``/proc``
  every 50 ms; ``peak_rss_by_process_mib`` the highest RSS of each kind of process.
- ``program``: measured inside the real run by a thin wrapper ``__main__.py`` in the copy that
  runs the real program with ``runpy``: ``construct_seconds`` (the program's module code:
  config validation and component construction, synchronous Python), ``cpu_seconds`` (user +
  system CPU of the program process over its whole life, including waiting on the engine's
  RPCs) and ``alive_seconds``, ``maxrss_mib``.
- ``mocks``: the same program under ``pulumi.runtime.set_mocks`` in a fresh interpreter (no
  engine, no providers): ``seconds`` and ``tracemalloc`` peak, the program's own Python cost.
- ``engine_seconds`` = ``wall_seconds - program.alive_seconds``: CLI start-up, plugin loading,
  and the engine's and providers' work after the program exits; the overlap while the program
  runs is the part of ``alive_seconds`` not spent on ``cpu_seconds``.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.machine import commit

ROOT = Path(__file__).resolve().parents[1]
#: What the program needs from the checkout (``environments`` holds the dev stack's inventory).
PROGRAM_DIRS = ("components", "stack_config", "dynamic_providers", "domain", "charts", "environments")
#: The code this part measures: the program, its policy pack and the benchmark.
PREVIEW_PATHS = ("__main__.py", *PROGRAM_DIRS, "policies", "bench")
DEV_PASSPHRASE = "dev-lab-only-passphrase"
PROJECT = "composable-gpu"
INVENTORY_KEY = f"{PROJECT}:inventory"
CREDENTIALS_KEY = f"{PROJECT}:credentials"
#: Hosts per inventory file of a generated fleet (a rack).
RACK_SIZE = 32
#: Generated estates that are validated only (no preview): a fleet beyond one preview's reach.
VALIDATE_ONLY = (10_000,)
#: The policy pack every preview runs with, and its config for the lab environment.
POLICY_ARGS = ("--policy-pack", str(ROOT / "policies"),
               "--policy-pack-config", str(ROOT / "policies" / "config" / "lab.json"))

_WRAPPER = '''"""Benchmark wrapper (bench/preview.py): runs the real program and records its own cost."""
import atexit, json, os, resource, runpy, time
from pathlib import Path

_t0 = time.perf_counter()
_stats = {"config_env_bytes": sum(len(os.environ.get(k, "").encode())
                                  for k in ("PULUMI_CONFIG", "PULUMI_CONFIG_SECRET_KEYS"))}


def _dump():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    _stats.update(cpu_seconds=ru.ru_utime + ru.ru_stime, maxrss_mib=ru.ru_maxrss / 1024,
                  alive_seconds=time.perf_counter() - _t0)
    out = os.environ.get("BENCH_PROGRAM_STATS")
    if out:
        Path(out).write_text(json.dumps(_stats))


atexit.register(_dump)
runpy.run_path(str(Path(__file__).with_name("_program.py")), run_name="__main__")
_stats["construct_seconds"] = time.perf_counter() - _t0
'''

_MOCK_RUNNER = """
import json, sys, time, tracemalloc
from pathlib import Path
import pulumi

class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return [args.name + "_id", dict(args.inputs)]
    def call(self, args):
        return {}

config = json.loads(Path(sys.argv[1]).read_text())
root = Path(sys.argv[2])
sys.path.insert(0, str(root))
pulumi.runtime.set_all_config(config)
pulumi.runtime.set_mocks(Mocks(), project="@PROJECT@", stack=sys.argv[3], preview=True)
mode = sys.argv[4]
if mode == "trace":
    tracemalloc.start()
if mode == "profile":
    import cProfile, pstats
    prof = cProfile.Profile()
    prof.enable()
t0 = time.perf_counter()
import runpy
runpy.run_path(str(root / "_program.py"), run_name="__main__")
# let the mock engine resolve every registration
from pulumi.runtime.stack import wait_for_rpcs
from pulumi.runtime.sync_await import _sync_await
_sync_await(wait_for_rpcs())
dt = time.perf_counter() - t0
if mode == "trace":
    _, peak = tracemalloc.get_traced_memory()
    print(json.dumps({"tracemalloc_peak_mib": peak / 2**20}))
elif mode == "profile":
    prof.disable()
    st = pstats.Stats(prof)
    rows = []
    for (f, line, fn), (_cc, nc, tt, ct, _c) in st.stats.items():
        where = "/".join(f.rsplit("/", 3)[-3:]) if "site-packages" in f else "/".join(f.rsplit("/", 2)[-2:])
        rows.append({"function": f"{where}:{line}({fn})", "calls": nc, "tottime_s": round(tt, 4),
                     "cumtime_s": round(ct, 4)})
    rows.sort(key=lambda r: -r["tottime_s"])
    print(json.dumps({"profile_by_tottime": rows[:15]}))
else:
    print(json.dumps({"seconds": dt}))
""".replace("@PROJECT@", PROJECT)


@dataclass
class BenchStack:
    """A stack the bench previews or validates: its stack file and its inventory folder.

    Attributes:
        name: the stack's name (``dev``, ``fleet256``).
        hosts: number of hosts.
        doc: the ``Pulumi.<name>.yaml`` content (``config`` names ``folder``; ``encryptionsalt``).
        folder: the inventory folder, relative to the project (``environments/<name>``).
        files: the folder's files, path inside the folder -> content.
    """

    name: str
    hosts: int
    doc: dict[str, Any]
    folder: str
    files: dict[str, Any] = field(default_factory=dict)

    def write(self, project: Path) -> Path:
        """Write the stack file and the folder's files (when generated) into ``project``; returns
        the stack file."""
        target = project / self.folder
        if self.files:
            shutil.rmtree(target, ignore_errors=True)
        for name, content in self.files.items():
            path = target / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.safe_dump(content, sort_keys=False, default_flow_style=None))
        stack_file = project / f"Pulumi.{self.name}.yaml"
        stack_file.write_text(yaml.safe_dump(self.doc, sort_keys=False))
        return stack_file


def make_project_copy(dest: Path, *, kubeconfig: Path, ca_pem: Path) -> Path:
    """Copy the program into ``dest`` with the wrapper ``__main__.py`` and lab paths filled in.

    ``.lab/kubeconfig`` becomes a copy of ``kubeconfig``; ``.lab/sim-state/redfish/tls/ca.pem``
    a copy of ``ca_pem`` (any PEM CA: preview does not contact the BMCs).
    """
    dest.mkdir(parents=True, exist_ok=True)
    for d in PROGRAM_DIRS:
        shutil.copytree(ROOT / d, dest / d, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    shutil.copy2(ROOT / "__main__.py", dest / "_program.py")
    (dest / "__main__.py").write_text(_WRAPPER)
    proj = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    proj.setdefault("runtime", {}).setdefault("options", {})["virtualenv"] = str(Path(sys.prefix))
    (dest / "Pulumi.yaml").write_text(yaml.safe_dump(proj, sort_keys=False))
    lab = dest / ".lab"
    (lab / "sim-state" / "redfish" / "tls").mkdir(parents=True, exist_ok=True)
    shutil.copy2(kubeconfig, lab / "kubeconfig")
    shutil.copy2(ca_pem, lab / "sim-state" / "redfish" / "tls" / "ca.pem")
    return dest


def _dev_stack() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text()))


def _dev_estate(dev: dict[str, Any]) -> dict[str, Any]:
    """The dev stack's inventory folder joined (its credential references kept)."""
    from stack_config.inventory import join_inventory, read_inventory

    folder = dev["config"][INVENTORY_KEY]
    raw, _origins, _problems = join_inventory(read_inventory(ROOT / folder), folder)
    return raw


def dev_bench_stack(dev: dict[str, Any] | None = None) -> BenchStack:
    """The dev stack as committed: its stack file and its folder (copied with the program)."""
    dev = dev or _dev_stack()
    return BenchStack("dev", len(_dev_estate(dev).get("hosts", [])), dev, dev["config"][INVENTORY_KEY])


def fleet_stack(n_hosts: int, *, dev: dict[str, Any] | None = None) -> BenchStack:
    """A generated stack of ``n_hosts`` hosts, in folder form (``environments/fleet<N>``).

    Hosts ``gpu-node-001..N`` are bare-metal workers with a BMC and a DPU each (endpoints on
    ``127.0.0.1``, distinct ports; never contacted by preview), all naming the credential set
    ``bmc``, in files of :data:`RACK_SIZE` hosts (``hosts/rack-001.yaml``, ...), all in one
    hypervisor cluster; one tenant per 16 hosts (at least 2) with a network and a child cluster; the
    Director pool holds 4 GPUs per host. The stack file holds the folder's path and the dev stack's
    credential sets and encryption salt (its ciphertexts, never a plaintext).
    """
    dev = dev or _dev_stack()
    est = _dev_estate(dev)
    names = [f"gpu-node-{i:03d}" for i in range(1, n_hosts + 1)]
    hosts = []
    for i, name in enumerate(names, start=1):
        mac = f"52:54:00:{(i >> 16) & 0xFF:02x}:{(i >> 8) & 0xFF:02x}:{i & 0xFF:02x}"
        bmc = {"credential": "bmc", "ca_bundle": ".lab/sim-state/redfish/tls/ca.pem"}
        hosts.append({
            "name": name,
            "role": "baremetal-worker",
            "boot_mac": mac,
            "bmc": {"endpoint": f"https://127.0.0.1:{20000 + i}", **bmc},
            "dpu": {"name": f"dpu-{name}", "bmc": {"endpoint": f"https://127.0.0.1:{30000 + i}", **bmc}},
        })
    n_tenants = max(2, n_hosts // 16)
    tenants = [
        {
            "name": f"tenant-{t:02d}",
            "networks": [{
                "name": f"tenant-{t:02d}-net",
                "cidr": f"10.{t // 256}.{t % 256}.0/24",
                "vxlan_id": 10000 + t,
                "vlan_id": 100 + t,
                "gateway": f"10.{t // 256}.{t % 256}.1",
            }],
            "clusters": [
                {"name": f"tenant-{t:02d}-k8s", "hypervisor_cluster": "fleet-workers", "workers": 1}
            ],
            "gpu_quota": 4,
            "allowed_models": ["Tesla-T4"],
        }
        for t in range(1, n_tenants + 1)
    ]
    fabric = {**est["fabric"], "pools": [{**est["fabric"]["pools"][0], "size": 4 * n_hosts}]}
    files: dict[str, Any] = {
        "estate.yaml": {
            **{k: est[k] for k in ("environment", "mothership") if k in est},
            "composer": {**est.get("composer", {}), "target_cluster": "fleet-workers"},
        },
        "fabric.yaml": {"fabric": fabric, "gpu_compositions": []},
        "clusters.yaml": {
            "hypervisor_clusters": [{
                "name": "fleet-workers",
                "hosts": names,
                "gpu_workload_mode": "container",
                "kubevirt": True,
                "control_plane_replicas": 1,
            }],
            "dpu_cluster": {"name": "fleet-dpu"},
        },
        "tenants.yaml": {"tenants": tenants},
    }
    for r in range(0, n_hosts, RACK_SIZE):
        files[f"hosts/rack-{r // RACK_SIZE + 1:03d}.yaml"] = {"hosts": hosts[r:r + RACK_SIZE]}
    folder = f"environments/fleet{n_hosts}"
    doc = {
        "config": {INVENTORY_KEY: folder, CREDENTIALS_KEY: dev["config"][CREDENTIALS_KEY]},
        "encryptionsalt": dev["encryptionsalt"],
    }
    return BenchStack(f"fleet{n_hosts}", n_hosts, doc, folder, files)


def _engine_value(value: Any) -> str:
    """A config value as the engine hands it over: strings as they are, others as JSON; a
    ``{secure: ...}`` leaf counted as its ciphertext (longer than the plaintext it decrypts to)."""

    def leaves(v: Any) -> Any:
        if isinstance(v, dict):
            return v["secure"] if set(v) == {"secure"} else {k: leaves(x) for k, x in v.items()}
        return [leaves(x) for x in v] if isinstance(v, list) else v

    plain = leaves(value)
    return plain if isinstance(plain, str) else json.dumps(plain, separators=(",", ":"))


def engine_config_bytes(config: dict[str, Any]) -> int:
    """Bytes of ``PULUMI_CONFIG`` for a stack file's ``config``: the JSON object of every key and
    its value as the engine passes it (:func:`_engine_value`), UTF-8; ``PULUMI_CONFIG_SECRET_KEYS``
    (the secret keys' names) is counted too."""
    values = {k: _engine_value(v) for k, v in config.items()}
    secret_keys = [k for k, v in config.items() if "secure" in json.dumps(v)]
    return len(json.dumps(values).encode()) + len(json.dumps(secret_keys).encode())


def inline_estate(stack: BenchStack, project: Path | None = None) -> dict[str, Any]:
    """The stack's estate as one ``composable-gpu:estate`` value (the form before inventory folders):
    the folder's files joined, every credential reference replaced by its set's fields."""
    from stack_config.inventory import InventoryFile, _secret_holders, join_inventory, read_inventory
    from stack_config.models import EstateConfig

    if stack.files:
        files = [InventoryFile(n, c) for n, c in sorted(stack.files.items())]
    else:
        files = read_inventory((project or ROOT) / stack.folder)
    raw, _origins, _problems = join_inventory(files, stack.folder)
    raw = copy.deepcopy(raw)  # the joined lists hold the files' own mappings
    sets = stack.doc["config"].get(CREDENTIALS_KEY) or {}
    for holder, model, _path in list(_secret_holders(EstateConfig, raw)):
        cred = dict(sets.get(holder.pop("credential", None)) or {})
        if "user" in model.model_fields and "username" in cred:
            cred["user"] = cred.pop("username")
        holder.update(cred)
    return raw


def config_figures(stack: BenchStack, project: Path | None = None) -> dict[str, Any]:
    """``{"config_bytes", "inline_config_bytes"}``: what the engine hands the program (and the
    analyzer, the same value) for the stack as it is, and for its estate inline."""
    inline = {k: v for k, v in stack.doc["config"].items() if k not in (INVENTORY_KEY, CREDENTIALS_KEY)}
    inline[f"{PROJECT}:estate"] = inline_estate(stack, project)
    return {"config_bytes": engine_config_bytes(stack.doc["config"]),
            "inline_config_bytes": engine_config_bytes(inline)}


def validate_only(n_hosts: int, work: Path) -> dict[str, Any]:
    """Generate a fleet of ``n_hosts`` in ``work`` and validate it as ``python -m stack_config
    validate`` does; ``{"stack", "hosts", "files", "validation_seconds", "ok", "config_bytes",
    "inline_config_bytes"}`` (``problems``: the first ones when it is not valid)."""
    from stack_config.errors import EstateConfigError
    from stack_config.stack_file import load_stack_file

    stack = fleet_stack(n_hosts)
    stack_file = stack.write(work)
    t0 = time.perf_counter()
    try:
        estate = load_stack_file(stack_file)
        ok, problems = len(estate.hosts) == n_hosts, []
    except EstateConfigError as exc:
        ok, problems = False, [str(p) for p in exc.problems[:5]]
    seconds = time.perf_counter() - t0
    row = {"stack": stack.name, "hosts": n_hosts, "files": len(stack.files),
           "validation_seconds": round(seconds, 3), "ok": ok, **config_figures(stack)}
    if problems:
        row["problems"] = problems
    return row


def _plain_for_mocks(obj: Any) -> Any:
    """Replace ``{secure: ...}`` leaves by a plaintext placeholder (mocks have no decrypter)."""
    if isinstance(obj, dict):
        if set(obj) == {"secure"}:
            return "bench-placeholder-secret"
        return {k: _plain_for_mocks(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain_for_mocks(v) for v in obj]
    return obj


class TreeSampler:
    """Samples the summed RSS of a process and all its descendants from ``/proc`` (MiB)."""

    def __init__(self, pid: int, interval_seconds: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval_seconds
        self.peak_mib = 0.0
        self.by_name: dict[str, float] = {}
        #: Bytes of ``PULUMI_CONFIG`` + ``PULUMI_CONFIG_SECRET_KEYS`` in each kind of process's
        #: environment (the program's runner and the policy pack get the stack's config there).
        self.config_env_bytes: dict[str, int] = {}
        self._environ_read: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _children() -> dict[int, list[int]]:
        kids: dict[int, list[int]] = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d))
        return kids

    @staticmethod
    def _rss_and_name(pid: int) -> tuple[float, str]:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return 0.0, ""
        rss = 0.0
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
        args = [a.decode(errors="replace") for a in cmd if a]
        name = Path(args[0]).name if args else "?"
        if name.startswith("python") and len(args) > 1:
            tail = next((a for a in args[1:] if not a.startswith("-")), "")
            name = f"python {Path(tail).name}" if tail else name
        return rss, name

    @staticmethod
    def _config_env_bytes(pid: int) -> int:
        """Bytes of the values of ``PULUMI_CONFIG`` and ``PULUMI_CONFIG_SECRET_KEYS`` in the
        process's environment (its ``/proc/<pid>/environ``, as it was at exec), 0 without them."""
        try:
            entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return 0
        keys = (b"PULUMI_CONFIG=", b"PULUMI_CONFIG_SECRET_KEYS=")
        return sum(len(e) - len(k) for e in entries for k in keys if e.startswith(k))

    def sample(self) -> None:
        kids = self._children()
        stack, total, seen = [self.pid], 0.0, set()
        while stack:
            p = stack.pop()
            if p in seen:
                continue
            seen.add(p)
            rss, name = self._rss_and_name(p)
            total += rss
            if name and rss > 0:
                self.by_name[name] = max(self.by_name.get(name, 0.0), rss)
            if name and p not in self._environ_read:
                self._environ_read.add(p)
                size = self._config_env_bytes(p)
                self.config_env_bytes[name] = max(self.config_env_bytes.get(name, 0), size)
            stack.extend(kids.get(p, []))
        self.peak_mib = max(self.peak_mib, total)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


@dataclass(frozen=True)
class SampledRun:
    """A finished process and its process tree's memory as :class:`TreeSampler` saw it.

    Attributes:
        returncode: its exit status (negative: killed by that signal, as on a timeout).
        out: its standard output. err: its standard error.
        wall_seconds: start to exit (``time.perf_counter``).
        sampler: the sampler that watched it and its descendants.
    """

    returncode: int
    out: str
    err: str
    wall_seconds: float
    sampler: TreeSampler

    def peaks_by_process(self, most: int = 8) -> dict[str, float]:
        """The highest RSS (MiB, one decimal) of each kind of process, the ``most`` largest first."""
        ranked = sorted(self.sampler.by_name.items(), key=lambda kv: -kv[1])[:most]
        return {k: round(v, 1) for k, v in ranked}


def run_sampled(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> SampledRun:
    """Run ``argv`` to its end (killed after ``timeout`` seconds), sampling the summed RSS of it and
    its descendants (:class:`TreeSampler`)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with TreeSampler(proc.pid) as sampler:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    return SampledRun(proc.returncode, out, err, time.perf_counter() - t0, sampler)


def _env(project: Path, backend: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PULUMI_BACKEND_URL=f"file://{backend}",
        PULUMI_CONFIG_PASSPHRASE=DEV_PASSPHRASE,
        PULUMI_SKIP_UPDATE_CHECK="1",
        PULUMI_DIY_BACKEND_NO_LEGACY_WARNING="1",
        # The fleets' BMC endpoints are generated, not served: measure the program's preview,
        # not the endpoint probes (dynamic_providers.preflight).
        COMPOSABLE_GPU_PREFLIGHT="off",
    )
    env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    return env


def run_preview(
    project: Path, stack: BenchStack, backend: Path, *, timeout: float = 1800
) -> dict[str, Any]:
    """``pulumi stack init`` + ``pulumi preview`` (with the policy pack) of ``stack`` in ``project``.

    Returns ``{"wall_seconds", "peak_tree_rss_mib", "peak_rss_by_process_mib",
    "config_env_bytes_by_process", "program", "resources" (planned creates), "ok", "exit_code",
    "tail"}``.
    """
    env = _env(project, backend)
    stack.write(project)
    subprocess.run(
        ["pulumi", "stack", "init", stack.name, "--non-interactive"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    stats_file = project / f".bench-program-{stack.name}.json"
    stats_file.unlink(missing_ok=True)
    env["BENCH_PROGRAM_STATS"] = str(stats_file)
    argv = ["pulumi", "preview", "--stack", stack.name, "--non-interactive", "--json", *POLICY_ARGS]
    run = run_sampled(argv, cwd=project, env=env, timeout=timeout)
    out, err, wall, sampler = run.out, run.err, run.wall_seconds, run.sampler
    program = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    creates = None
    try:
        doc = json.loads(out)
        creates = (doc.get("changeSummary") or {}).get("create")
    except json.JSONDecodeError:
        pass
    result: dict[str, Any] = {
        "wall_seconds": round(wall, 3),
        "peak_tree_rss_mib": round(sampler.peak_mib, 1),
        "peak_rss_by_process_mib": run.peaks_by_process(),
        "config_env_bytes_by_process": dict(sorted(sampler.config_env_bytes.items())),
        "program": {k: round(v, 3) for k, v in program.items()},
        "resources": creates,
        "ok": run.returncode == 0,
        "exit_code": run.returncode,
    }
    if program.get("alive_seconds") is not None:
        result["engine_seconds"] = round(wall - program["alive_seconds"], 3)
    if run.returncode != 0:
        result["tail"] = (err or out)[-2000:]
    return result


def mock_config(project: Path, stack: BenchStack) -> dict[str, str]:
    """The stack's config as the engine would hand it to the program (``pulumi.runtime.set_all_config``
    form), its secrets replaced by placeholders (mocks have no decrypter) and its inventory path
    absolute (mocks have no project root)."""
    config = _plain_for_mocks(stack.doc["config"])
    config[INVENTORY_KEY] = str(project / config[INVENTORY_KEY])
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def run_mocks(
    project: Path, stack: BenchStack, *, profile: bool = False, timeout: float = 1800
) -> dict[str, Any]:
    """The program under Pulumi mocks in fresh interpreters (no engine, no providers):
    ``{"ok", "seconds"}`` from an untraced run, ``"tracemalloc_peak_mib"`` from a traced one
    (tracing slows Python, so the two are separate runs) and, with ``profile``, the top
    functions by own time from a cProfile run (``"profile_by_tottime"``)."""
    stack.write(project)
    cfg_file = project / f".bench-mock-{stack.name}.json"
    cfg_file.write_text(json.dumps(mock_config(project, stack)))
    runner = project / ".bench_mock_runner.py"
    runner.write_text(_MOCK_RUNNER)
    result: dict[str, Any] = {"ok": True}
    for mode in ("time", "trace", *(("profile",) if profile else ())):
        out = subprocess.run(
            [sys.executable, str(runner), str(cfg_file), str(project), stack.name, mode],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if out.returncode != 0:
            return {"ok": False, "tail": (out.stderr or out.stdout)[-2000:]}
        line = [x for x in out.stdout.splitlines() if x.startswith("{")][-1]
        result.update({k: (round(v, 3) if isinstance(v, float) else v) for k, v in json.loads(line).items()})
    return result


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median wall time, plus ``wall_seconds_all`` and the highest peak RSS."""
    ok = sorted((r for r in runs if r.get("ok")), key=lambda r: r["wall_seconds"]) or runs
    mid = dict(ok[len(ok) // 2])
    mid["wall_seconds_all"] = [r["wall_seconds"] for r in runs]
    mid["peak_tree_rss_mib"] = max(r["peak_tree_rss_mib"] for r in runs)
    mid["runs"] = len(runs)
    return mid


def run(
    *,
    quick: bool = False,
    kubeconfig: Path,
    ca_pem: Path,
    fleets: tuple[int, ...] | None = None,
    repeats: int | None = None,
    validate_sizes: tuple[int, ...] | None = None,
    work_dir: Path | None = None,
) -> dict[str, Any]:
    """Run part 4 against the control plane of ``kubeconfig``: each stack is previewed
    ``repeats`` times (default 3, 1 with ``quick``) with the policy pack and the median-wall run
    reported; the largest stack's program is also profiled under mocks; the ``validate_sizes``
    fleets (default :data:`VALIDATE_ONLY`, 1,000 with ``quick``) are generated and validated only.

    Returns ``{"commit": {"sha", "dirty", "paths"} (bench.machine.commit),
    "stacks": [{"stack", "hosts", "config", "preview": {...}, "mocks": {...}}, ...],
    "validated": [{"stack", "hosts", "validation_seconds", "config_bytes", ...}], ...}``.
    """
    measured = commit(PREVIEW_PATHS)  # before the runs: the code that is measured
    reps = repeats or (1 if quick else 3)
    sizes = fleets if fleets is not None else ((16,) if quick else (16, 64, 256))
    checked = validate_sizes if validate_sizes is not None else ((1_000,) if quick else VALIDATE_ONLY)
    tmp = Path(work_dir or tempfile.mkdtemp(prefix="bench-preview-"))
    project = make_project_copy(tmp / "project", kubeconfig=kubeconfig, ca_pem=ca_pem)
    backend = tmp / "state"
    backend.mkdir(exist_ok=True)
    dev = _dev_stack()
    stacks = [dev_bench_stack(dev), *(fleet_stack(n, dev=dev) for n in sizes)]
    rows = []
    biggest = max(st.hosts for st in stacks)
    for st in stacks:
        rows.append(
            {
                "stack": st.name,
                "hosts": st.hosts,
                "config": config_figures(st, project),
                "mocks": run_mocks(project, st, profile=st.hosts == biggest),
                "preview": _median_run([run_preview(project, st, backend) for _ in range(reps)]),
            }
        )
    validated = [validate_only(n, tmp / "validate") for n in checked]
    if work_dir is None:
        shutil.rmtree(tmp, ignore_errors=True)
    command = "python -m bench --only preview" + (" --quick" if quick else "")
    if fleets is not None:
        command += " --fleets " + ",".join(str(n) for n in fleets)
    if repeats is not None:
        command += f" --repeats {repeats}"
    if validate_sizes is not None:
        command += " --validate-fleets " + ",".join(str(n) for n in validate_sizes)
    return {
        "part": "preview",
        "commit": measured,
        "quick": quick,
        "stacks": rows,
        "validated": validated,
        "command": command,
    }
