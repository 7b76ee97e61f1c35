"""hase.measure.fleet: collect on a real local Ray cluster (two worker nodes faked as two machines) with real ONNX
Runtime: the store equals a serial collect's job for job, a killed worker's job is retried or skipped once, a
SIGKILLed driver resumes; and the pieces that need no cluster (placement options, refusals, errors)."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest
from collect_cases import FAST, integrity, relu_model
from conftest import REPO, conv_bn_relu_model, embedding_model

from hase.cli import main
from hase.errors import HaseError
from hase.measure import collect as coll
from hase.measure import fleet, placement
from hase.measure.progress import CollectEvent, JobFinished
from hase.measure.store import Store
from hase.runtime import sessions
from hase.runtime.types import EPConfig

ray = pytest.importorskip("ray", reason="Ray is the `ray` extra (make setup installs it)")

# Two device configs; node A offers only cpu-a, node B both: cpu-b jobs may only run on B.
TWO_DEVICES = FAST.replace('name = "cpu-test"', 'name = "cpu-a"') + """
[canary]
wait_s = 0.0
[[device]]
name = "cpu-b"
ep = "cpu"
intra_op_threads = 1
opt_level = "extended"
"""
#: the tables whose keys must match a serial collect's, with their keys (every column but measured values)
KEYS = {"jobs": ["job", "device"], "models": ["model_id", "opt_level", "sha256"], "kernels": ["kernel_id"],
        "model_nodes": ["model_id", "opt_level", "node_idx", "kernel_id"],
        "kernel_measurements": ["kernel_id", "device", "variant"], "model_measurements": ["model_id", "device"],
        "node_spans": ["model_id", "device", "node_name"], "fixed_costs": ["device", "kind"],
        "skips": ["job", "device"]}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A local Ray cluster: a head that runs nothing, node A (cpu-a) and node B (cpu-a, cpu-b), one CPU each."""
    from ray.cluster_utils import Cluster

    small = {"object_store_memory": 80 << 20}
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **small})
    nodes = [c.add_node(num_cpus=1, resources={"hase:cpu-a": 1}, **small),
             c.add_node(num_cpus=1, resources={"hase:cpu-a": 1, "hase:cpu-b": 1}, **small)]
    c.wait_for_nodes()
    c.hase_nodes = nodes
    yield c
    if ray.is_initialized():
        ray.shutdown()
    c.shutdown()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    p = tmp_path / "devices.toml"
    p.write_text(TWO_DEVICES)
    return p


@pytest.fixture
def zoo(tmp_path: Path) -> list[coll.ModelSource]:
    """A small zoo: a CNN block, an embedding, two Relus (one kernel shared by several models per device)."""
    models = {"conv8": conv_bn_relu_model(c=8), "emb": embedding_model(), "relu16": relu_model(16),
              "relu32": relu_model(32)}
    out = []
    for name, m in models.items():
        onnx.save(m, tmp_path / f"{name}.onnx")
        out.append(coll.ModelSource(name, "user", tmp_path / f"{name}.onnx"))
    return out


def keys(store_path: Path) -> dict[str, set[tuple[Any, ...]]]:
    with Store(store_path) as s:
        return {t: set(map(tuple, s.table(t)[cols].itertuples(index=False))) for t, cols in KEYS.items()}


def once_each(store_path: Path) -> None:
    """Every job is done or skipped, exactly once, and the store is intact."""
    assert integrity(store_path) == "ok"
    with Store(store_path) as s:
        jobs, skips = s.table("jobs"), s.table("skips")
    assert not jobs.duplicated(["job", "device"]).any()
    assert not set(zip(jobs.job, jobs.device, strict=True)) & set(zip(skips.job, skips.device, strict=True))


def complete(store_path: Path, n_model_rows: int) -> None:
    """Every job once, every model measured on every device once, every kernel of a model measured or skipped."""
    once_each(store_path)
    with Store(store_path) as s:
        mm, km, mn, skips = (s.table(t) for t in ("model_measurements", "kernel_measurements", "model_nodes", "skips"))
    assert len(mm) == n_model_rows and not mm.duplicated(["model_id", "device"]).any()
    assert not km.duplicated(["kernel_id", "device", "variant"]).any()
    skipped = {j.split(":", 1)[1] for j in skips.job if j.startswith("kernel:")}
    assert set(mn.kernel_id) == set(km.kernel_id) | skipped


@pytest.mark.slow
def test_fleet_store_equals_a_serial_collect(tmp_path, cluster, config, zoo):
    cfg = coll.load_collect_config(config)
    with Store(tmp_path / "serial.sqlite") as s:
        coll.collect(zoo, cfg, s)
    events: list[CollectEvent] = []
    with Store(tmp_path / "fleet.sqlite") as s:
        report = fleet.collect_fleet(zoo, cfg, s, events.append, address=cluster.address)
    serial, fleet_keys = keys(tmp_path / "serial.sqlite"), keys(tmp_path / "fleet.sqlite")
    for table in KEYS:
        assert fleet_keys[table] == serial[table], table
    complete(tmp_path / "fleet.sqlite", 2 * len(zoo))
    # placement: both nodes worked, cpu-b only on node B, every row carries the worker's own metadata
    assert len(report.workers) == 2 and all(w.jobs_done > 0 for w in report.workers.values())
    devices = {label: w.devices for label, w in report.workers.items()}
    assert sorted(devices.values()) == [("cpu-a",), ("cpu-a", "cpu-b")]
    b_jobs = [e for e in events if isinstance(e, JobFinished) and e.device == "cpu-b"]
    assert b_jobs and {e.worker for e in b_jobs} == {next(k for k, d in devices.items() if "cpu-b" in d)}
    with Store(tmp_path / "fleet.sqlite") as s:
        km = s.table("kernel_measurements")
    assert (km.cpu_model == sessions.cpu_model()).all() and km.canary_ms.notna().all()
    assert (km.host == sessions.host_name()).all()  # the worker's own name (both local nodes run on this host)
    assert sum(w.jobs_done for w in report.workers.values()) == len(serial["jobs"])
    assert not report.retried and not report.refused and report.dispatch_gaps_s
    # a rerun hands out nothing
    with Store(tmp_path / "fleet.sqlite") as s:
        again = fleet.collect_fleet(zoo, cfg, s, address=cluster.address)
    assert sum(w.jobs_done for w in again.workers.values()) == 0 and keys(tmp_path / "fleet.sqlite") == fleet_keys


def _cluster_pids(cluster: Any) -> set[int]:
    """The raylets of this test's worker nodes (a measuring worker is their child)."""
    return {n.all_processes["raylet"][0].process.pid for n in cluster.hase_nodes}


def _kill_one_measuring_worker(raylets: set[int], killed: list[int], stop: threading.Event) -> None:
    """SIGKILL the first worker process of this cluster seen running a fleet task (Ray titles it ray::fleet_task)."""
    while not stop.is_set() and not killed:
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if cmd.startswith(b"ray::fleet_task") and ppid in raylets:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
        time.sleep(0.02)


def _collect_killing_a_worker(cluster: Any, store: Path, zoo: list[coll.ModelSource], cfg: coll.CollectConfig,
                              **kwargs: Any) -> tuple[coll.CollectReport, list[int]]:
    killed: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_one_measuring_worker, args=(_cluster_pids(cluster), killed, stop))
    killer.start()
    try:
        with Store(store) as s:
            report = fleet.collect_fleet(zoo, cfg, s, address=cluster.address, **kwargs)
    finally:
        stop.set()
        killer.join()
    return report, killed


@pytest.mark.slow
def test_a_killed_worker_loses_one_job_which_ends_done_or_skipped_once(tmp_path, cluster, config, zoo):
    cfg = coll.load_collect_config(config, ["cpu-a"])
    store = tmp_path / "s.sqlite"
    report, killed = _collect_killing_a_worker(cluster, store, zoo, cfg, max_retries=0)
    assert killed and len(report.retried) == 1  # lost once, not retried: a skip naming why
    target = report.retried[0][0]
    with Store(store) as s:
        skips = s.table("skips")
    assert skips.target.tolist() == [target] and skips.reason[0].startswith("lost 1 times, last on ")
    once_each(store)
    # retried this time (--retry-skips), lost once more and handed to a worker again: done, once
    report, killed = _collect_killing_a_worker(cluster, store, zoo, cfg, max_retries=1, retry_skips=True)
    assert killed and len(report.retried) == 1 and not report.skips
    complete(store, len(zoo))


@pytest.mark.slow
def test_a_sigkilled_driver_resumes_from_the_store(tmp_path, cluster, config, zoo):
    store = tmp_path / "s.sqlite"
    argv = [sys.executable, "-m", "hase.cli", "-q", "collect", "--cluster", cluster.address, "--zoo", "none",
            "--devices", str(config), "--store", str(store)]
    for src in zoo:
        argv += ["--model", str(src.path)]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, n = time.time() + 120, 0
    while time.time() < deadline and proc.poll() is None and n < 8:
        time.sleep(0.05)
        if store.exists():
            try:
                n = sqlite3.connect(store, timeout=1).execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
            except sqlite3.OperationalError:
                continue
    assert proc.poll() is None, "the driver finished before it could be killed; give it more models"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with Store(store) as s:
        partial = s.counts()["jobs"]
    assert partial > 0
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    complete(store, 2 * len(zoo))
    assert "per worker" in result.stdout and "Traceback" not in result.stderr


def test_placement_options_pin_a_job_and_hold_the_node():
    w = placement.Worker("ab" * 28, cpus=16, gpus=0, devices=["cpu-1t"], host="box")
    cpu = w.options(ray, EPConfig(name="cpu-1t"))
    assert cpu["num_cpus"] == 16 and cpu["resources"] == {"hase:cpu-1t": 0.001} and cpu["max_retries"] == 0
    assert cpu["scheduling_strategy"].node_id == w.node_id and cpu["scheduling_strategy"].soft is False
    gpu_worker = placement.Worker("cd" * 28, cpus=16, gpus=4, devices=["cuda0"])
    gpu = gpu_worker.options(ray, EPConfig(name="cuda0", ep="cuda"))
    assert gpu["num_gpus"] == 1 and gpu["num_cpus"] == 1
    assert (w.depth, w.label, gpu_worker.depth) == (2, "box/abababab", 5)


def test_rows_of_another_machine_are_refused():
    meta = sessions.device_metadata(EPConfig(name="cpu-1t"))
    expected = {c: meta[c] for c in placement.FINGERPRINT_COLS}
    assert placement.refusal({"kernel_measurements": [meta]}, expected) is None
    other = {**meta, "cpu_model": "Some Other CPU", "ort_version": "1.0.0"}
    why = placement.refusal({"kernel_measurements": [meta, other]}, expected)
    assert why is not None and "cpu_model 'Some Other CPU'" in why and "ort_version '1.0.0'" in why


def test_missing_ray_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    store = tmp_path / "s.sqlite"
    assert main(["collect", "--cluster", "auto", "--zoo", "none", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert 'pip install "hase[ray]"' in err and err.count("\n") == 1 and "Traceback" not in err
    assert not store.exists()


@pytest.mark.slow
def test_unreachable_cluster_and_unoffered_device_write_nothing(tmp_path, cluster, capsys):
    store = tmp_path / "s.sqlite"
    assert main(["collect", "--cluster", "127.0.0.1:1", "--zoo", "none", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "cannot connect to a Ray cluster at '127.0.0.1:1'" in err and err.count("\n") == 1
    assert not store.exists()
    cfg = tmp_path / "devices.toml"
    cfg.write_text(FAST.replace('name = "cpu-test"', 'name = "cpu-z"'))
    unoffered = "no node of the Ray cluster can measure device config 'cpu-z'"
    with Store(store) as s, pytest.raises(HaseError, match=unoffered):
        fleet.collect_fleet([], coll.load_collect_config(cfg), s, address=cluster.address)
    with Store(store) as s:
        assert s.counts()["jobs"] == 0


@pytest.mark.slow
def test_a_store_of_another_machine_refuses_every_node(tmp_path, cluster, config):
    """The store's rows of cpu-a came from another CPU: no node of this cluster may add to them."""
    store = tmp_path / "s.sqlite"
    meta = sessions.device_metadata(EPConfig(name="cpu-a"))
    row = {**meta, "kind": "empty_kernel", "cpu_model": "Some Other CPU", "median_ms": 0.01, "measured_at": 1.0}
    with Store(store) as s:
        s.commit_job("fixed:empty_kernel", "cpu-a", {"fixed_costs": [row]})
        with pytest.raises(HaseError, match=r"cpu_model .* the device config's machines have 'Some Other CPU'"):
            fleet.collect_fleet([], coll.load_collect_config(config, ["cpu-a"]), s, address=cluster.address)
