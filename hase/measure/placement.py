"""Which nodes of a Ray cluster may measure which device config, and how a job is pinned to one (`hase.measure.fleet`).

A node offers a device config with the custom resource `hase:<device>` (`ray start --resources
'{"hase:cpu-1t": 1}'`). Every node offering one is probed (`probe_node`, a task on it): its device metadata must
match the config's fingerprint (`FINGERPRINT_COLS`: that of the store's latest row of the config, else of the
strict majority of the nodes) and it must run the driver's Hase; a node that differs is left out for that config,
with the reason. `Worker.options` pins a job to its node (node affinity, never spilled) with the config's resource
and the node's slot: all its CPUs for a CPU job, one GPU for a CUDA job.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hase.errors import HaseError, first_line
from hase.measure.collect import CollectReport, WorkerSummary
from hase.measure.config import CollectConfig
from hase.measure.jobs import HostWatch
from hase.measure.store import Store
from hase.runtime import sessions
from hase.runtime.types import EPConfig
from hase.version import __version__

__all__ = ["FINGERPRINT_COLS", "RESOURCE_PREFIX", "NodeProbe", "Worker", "device_resource", "live_workers", "pool",
           "probe_node", "refusal"]

log = logging.getLogger(__name__)

RESOURCE_PREFIX = "hase:"
#: the device metadata a row must share with its device config's machines (the rest, `device`, is the config)
FINGERPRINT_COLS = ("cpu_model", "gpu_name", "gpu_driver", "ort_version", "execution_provider", "intra_op_threads",
                    "inter_op_threads", "opt_level")
_MEASURED_TABLES = ("fixed_costs", "kernel_measurements", "model_measurements")


def device_resource(device: str) -> str:
    """The Ray custom resource by which a node offers a device config: `hase:<device>`."""
    return RESOURCE_PREFIX + device


@dataclass(frozen=True)
class NodeProbe:
    """What a task on a Ray node found: its host name and, per device config it offers, the device metadata its
    rows would carry (`sessions.device_metadata`) or, where it cannot run the config, why."""

    host: str
    metadata: Mapping[str, dict[str, Any]]
    unusable: Mapping[str, str]

    def reason_left_out(self, device: str, expected: Mapping[str, Any]) -> str | None:
        """Why the node cannot measure a device config whose machines have the fingerprint `expected`, or None:
        it cannot run it, it is another machine, or it runs other Hase code than the driver."""
        if device in self.unusable:
            return self.unusable[device]
        meta = self.metadata[device]
        return refusal({"probe": [meta]}, expected) or _version_gap(meta)


def probe_node(eps: list[EPConfig]) -> NodeProbe:
    """What a node is, from a task on it: its host name and, per device config, its metadata or why it has none."""
    metadata: dict[str, dict[str, Any]] = {}
    unusable: dict[str, str] = {}
    for ep in eps:
        try:
            sessions.check_provider(ep)
            metadata[ep.name] = sessions.device_metadata(dataclasses.replace(ep, device_id=0))
        except Exception as exc:  # a node that cannot run a config is left out for it, with the reason
            unusable[ep.name] = first_line(exc)
    return NodeProbe(socket.gethostname(), metadata, unusable)


def refusal(rows: Mapping[str, list[dict[str, Any]]], expected: Mapping[str, Any]) -> str | None:
    """Why rows cannot join the store (their device metadata is not the device config's fingerprint), or None."""
    for table_rows in rows.values():
        for row in table_rows:
            diff = [c for c in FINGERPRINT_COLS if c in row and row[c] != expected[c]]
            if diff:
                return "; ".join(f"{c} {row[c]!r}, the device config's machines have {expected[c]!r}" for c in diff[:3])
    return None


@dataclass
class Worker:
    """One node of the pool: the device configs it serves, its canary watches, what it has in flight."""

    node_id: str
    cpus: float
    gpus: float
    devices: list[str]
    host: str = ""
    watches: dict[str, HostWatch] = field(default_factory=dict)
    summary: WorkerSummary | None = None
    alive: bool = True
    inflight: int = 0
    last_end: float | None = None
    turn: int = 0

    @property
    def label(self) -> str:
        """How logs and the summary name it: `host/1a2b3c4d` (host and the start of the Ray node id)."""
        return f"{self.host or 'node'}/{self.node_id[:8]}"

    @property
    def depth(self) -> int:
        """Jobs it may hold at once: one running per slot (a CPU node: one; a GPU node: one per GPU) plus one
        queued on the node, so it never waits for the driver between two jobs."""
        return max(1, int(self.gpus)) + 1

    def options(self, ray: Any, ep: EPConfig) -> dict[str, Any]:
        """Ray task options that pin a job of this device config to this node and hold its slot."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        opts: dict[str, Any] = {"scheduling_strategy": NodeAffinitySchedulingStrategy(self.node_id, soft=False),
                                "max_retries": 0, "resources": {device_resource(ep.name): 0.001}}
        if ep.ep == "cuda":
            opts.update(num_gpus=1, num_cpus=min(1.0, self.cpus))
        else:
            opts.update(num_cpus=self.cpus)
        return opts


def pool(ray: Any, cfg: CollectConfig, store: Store, report: CollectReport
          ) -> tuple[list[Worker], dict[str, dict[str, Any]]]:
    """The live nodes that offer the device configs, probed, each kept only for the configs whose fingerprint
    it matches; and each config's fingerprint."""
    workers = [w for w in live_workers(ray, cfg.devices) if w.devices]
    eps = {ep.name: ep for ep in cfg.devices}
    try:
        probes = ray.get([ray.remote(probe_node).options(
            num_cpus=0, max_retries=0, scheduling_strategy=w.options(ray, eps[w.devices[0]])["scheduling_strategy"]
        ).remote([eps[d] for d in w.devices]) for w in workers], timeout=300)
    except ray.exceptions.RayError as exc:
        raise HaseError(f"probing the Ray cluster's nodes failed ({first_line(exc)}): check that every node has "
                        f"Hase installed (`pip install hase[cpu,ray]`) and rerun") from None
    expected: dict[str, dict[str, Any]] = {}
    found: list[NodeProbe] = probes
    for ep in cfg.devices:
        metas = {w.node_id: p.metadata[ep.name] for w, p in zip(workers, found, strict=True)
                 if ep.name in w.devices and ep.name in p.metadata}
        expected[ep.name] = _fingerprint(store, ep, metas)
    for w, p in zip(workers, found, strict=True):
        w.host = p.host
        for d in list(w.devices):
            why = p.reason_left_out(d, expected[d])
            if why:
                log.warning("node %s is not used for %s: %s", w.label, d, why)
                report.refused.append((f"device {d}", w.label, why))
                w.devices.remove(d)
        w.watches = {d: HostWatch.for_settings(cfg.settings) for d in w.devices}
        w.summary = WorkerSummary(w.host, tuple(w.devices))
        if w.devices:
            report.workers[w.label] = w.summary
    for ep in cfg.devices:
        if not any(ep.name in w.devices for w in workers):
            raise HaseError(f"no node of the Ray cluster can measure device config {ep.name!r} (nodes offering it "
                            f"with `--resources '{{\"{device_resource(ep.name)}\": 1}}'` that match its "
                            f"fingerprint: none{_reasons(report, ep.name)}): start one as docs/fleet.md shows")
    return [w for w in workers if w.devices], expected


def check_driver(expected: Mapping[str, Mapping[str, Any]]) -> None:
    """The driver splits every model with its own ONNX Runtime: it must be the version the fleet measures with,
    or the kernels it hands out would not be the ones the workers' ORT executes."""
    here = sessions.ort().__version__
    for device, fp in expected.items():
        if fp["ort_version"] not in (None, here):
            raise HaseError(f"this driver runs ONNX Runtime {here} but the machines of device config {device!r} run "
                            f"{fp['ort_version']}: the driver splits the models, so run it with the same version")


def _version_gap(meta: Mapping[str, Any]) -> str | None:
    """Why a node runs other Hase code than the driver (the jobs it is handed are this Hase's), or None."""

    if meta["hase_version"] != __version__:
        return (f"it runs Hase {meta['hase_version']}, the driver Hase {__version__}: install the same Hase on "
                f"every node")
    return None


def live_workers(ray: Any, devices: tuple[EPConfig, ...]) -> list[Worker]:
    """Every live node with the resources of the device configs it offers (CPUs for cpu ones, a GPU for cuda)."""
    out = []
    for node in ray.nodes():
        res = node.get("Resources", {})
        if not node.get("Alive"):
            continue
        cpus, gpus = float(res.get("CPU", 0)), float(res.get("GPU", 0))
        offered = [ep.name for ep in devices if res.get(device_resource(ep.name), 0) > 0
                   and (gpus >= 1 if ep.ep == "cuda" else cpus >= 1)]
        out.append(Worker(node["NodeID"], cpus, gpus, offered))
    return out


def _fingerprint(store: Store, ep: EPConfig, metas: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """A device config's fingerprint: that of its latest row in the store, else the strict majority of the nodes
    offering it (a HaseError when they split evenly: nothing decides which machines the config means)."""
    for table in _MEASURED_TABLES:
        row = store.conn.execute(f"SELECT {', '.join(FINGERPRINT_COLS)} FROM {table} WHERE device = ? "
                                 f"ORDER BY measured_at DESC LIMIT 1", (ep.name,)).fetchone()
        if row is not None:
            return dict(zip(FINGERPRINT_COLS, row, strict=True))
    prints = [tuple(m[c] for c in FINGERPRINT_COLS) for m in metas.values()]
    if not prints:
        return dict.fromkeys(FINGERPRINT_COLS)  # no node can run it: `_pool` says so
    (top, n), *rest = collections.Counter(prints).most_common()
    if rest and rest[0][1] == n:
        raise HaseError(f"the nodes offering device config {ep.name!r} are different machines ({top[0]!r} with "
                        f"ORT {top[3]}, {rest[0][0][0]!r} with ORT {rest[0][0][3]}) and the store has no row of it "
                        f"to say which it means: give each kind of machine its own device config")
    return dict(zip(FINGERPRINT_COLS, top, strict=True))


def _reasons(report: CollectReport, device: str) -> str:
    """`; node x: why` for every node left out for a device config."""
    return "".join(f"; {w}: {why}" for target, w, why in report.refused if target == f"device {device}")
