"""hase.runtime.host: the fingerprint read from /proc and sysfs text, kept as JSON, and what differs between two."""
from __future__ import annotations

import dataclasses
import json
import os

import pytest

from hase.errors import HaseError
from hase.runtime.host import HostFingerprint, cache_sizes, host_fingerprint, others_cpu_s, parse_cpuinfo

ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 1
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse4_1 sse4_2 avx avx2 fma f16c
processor\t: 1
vendor_id\t: AuthenticAMD
physical id\t: 0
core id\t\t: 1
"""


def test_cpuinfo_gives_vendor_family_model_stepping_and_the_isa_ort_dispatches_on():
    cpu = parse_cpuinfo(ZEN3)
    assert (cpu["cpu_vendor"], cpu["cpu_family"], cpu["cpu_model_id"], cpu["cpu_stepping"]) == (
        "AuthenticAMD", 25, 1, 1)
    assert cpu["isa"] == ("sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c") and "fpu" not in cpu["isa"]
    assert (cpu["threads"], cpu["cores"]) == (2, 2)


def test_cache_sizes_come_from_sysfs_levels_and_types(tmp_path):
    for i, (level, kind, size) in enumerate([("1", "Data", "32K"), ("1", "Instruction", "32K"),
                                             ("2", "Unified", "512K"), ("3", "Unified", "32M")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, text in (("level", level), ("type", kind), ("size", size)):
            (d / name).write_text(text + "\n")
    assert cache_sizes(tmp_path) == {"l1d_kib": 32, "l2_kib": 512, "l3_kib": 32768}
    assert cache_sizes(tmp_path / "none") == {"l1d_kib": 0, "l2_kib": 0, "l3_kib": 0}


def test_this_hosts_fingerprint_round_trips_and_its_digest_is_stable():
    fp = host_fingerprint()
    assert fp.ort_version and "CPUExecutionProvider" in fp.ort_providers and fp.threads >= 1
    again = HostFingerprint.from_dict(json.loads(json.dumps(fp.to_dict())))
    assert again == fp and again.digest == fp.digest and len(fp.digest) == 12
    assert fp.differences(again) == []
    with pytest.raises(HaseError, match="'l2_kib'"):
        HostFingerprint.from_dict({**fp.to_dict(), "l2_kib": "1M"})


def test_differences_name_each_thing_that_differs():
    fp = host_fingerprint()
    other = dataclasses.replace(fp, cpu_family=fp.cpu_family + 1, l2_kib=fp.l2_kib + 512,
                                isa=(*tuple(f for f in fp.isa if f != "avx2"), "amx_tile"), ort_version="1.0.0")
    diffs = other.differences(fp, "the predictor's")
    assert len(diffs) == 4 and other.digest != fp.digest
    assert diffs[0].startswith(f"CPU {fp.cpu_vendor} family {fp.cpu_family + 1}")
    assert "+amx_tile" in diffs[1] and ("-avx2" in diffs[1]) == ("avx2" in fp.isa)
    assert f"L2 {fp.l2_kib + 512} KiB, the predictor's {fp.l2_kib} KiB" in diffs
    assert f"ONNX Runtime 1.0.0, the predictor's {fp.ort_version}" in diffs


def test_other_processes_cpu_time_is_the_kernels_busy_time_less_this_process(tmp_path):
    stat = tmp_path / "stat"
    hz = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq: busy = 600 + 100 + 300 + 0 + 0 ticks (idle and iowait left out)
    stat.write_text(f"cpu  {600 * hz} {100 * hz} {300 * hz} {5000 * hz} {70 * hz} 0 0\ncpu0 1 2 3 4 5 6 7\n")
    mine = os.times()
    assert others_cpu_s(stat) == pytest.approx(1000 - (mine.user + mine.system), abs=0.5)
    assert others_cpu_s(tmp_path / "missing") is None
