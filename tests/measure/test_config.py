"""hase.measure.config: every value of the collect config checked for type and range, one line per mistake."""
from __future__ import annotations

import dataclasses

import pytest
from collect_cases import FAST

from hase.errors import HaseError
from hase.measure.config import load_collect_config, settings_hash
from hase.measure.types import CanaryPolicy, MeasureSettings
from hase.runtime.types import EPConfig

DEVICE = '[[device]]\nname = "cpu-test"\nep = "cpu"\n'

BAD = {
    "zero profiled runs": ("[profile]\nruns = 0\n" + DEVICE,
                           r"\[profile\] runs = 0 is out of range: use an integer from 1 to 10000"),
    "negative warm-up": ("[kernel_timing]\nwarmup = -1\n" + DEVICE,
                         r"\[kernel_timing\] warmup = -1 is out of range: use an integer from 0 to"),
    "time as a word": ('[model_timing]\nmax_time_s = "fast"\n' + DEVICE,
                       r'\[model_timing\] max_time_s = "fast" is not a number: use a number from 0.001 to 3600'),
    "time not a number": ("[model_timing]\nmax_time_s = nan\n" + DEVICE, r"max_time_s = nan is out of range"),
    "fractional count": ("[cold]\nsessions = 2.5\n" + DEVICE, r"\[cold\] sessions = 2.5 is not an integer"),
    "boolean count": ("[profile]\nruns = true\n" + DEVICE, r"\[profile\] runs = true is not an integer"),
    "huge count": ("[kernel_timing]\nmax_runs = 1000000000\n" + DEVICE,
                   r"max_runs = 1000000000 is out of range: use an integer from 1 to 1000000$"),
    "one cold session": ("[cold]\nsessions = 1\n" + DEVICE, r"\[cold\] sessions = 1 is out of range: .* from 2 to 64"),
    "no timing pass": ("[robust]\npasses = 0\n" + DEVICE, r"\[robust\] passes = 0 is out of range: .* from 1 to 10"),
    "unknown key": ("[profile]\nrunz = 3\n" + DEVICE, r"unknown key \[profile\] runz: the known keys are"),
    "unknown table": ("[profiles]\nruns = 3\n" + DEVICE, r"unknown table \['profiles'\]"),
    "table as a value": ("profile = 3\n" + DEVICE, r"\[profile\] must be a table of keys, not 3"),
    "max below min": ("[kernel_timing]\nmin_runs = 50\nmax_runs = 10\n" + DEVICE,
                      r"\[kernel_timing\] max_runs = 10 is below min_runs = 50"),
    "max time below min": ("[model_timing]\nmin_time_s = 2\nmax_time_s = 1\n" + DEVICE,
                           r"max_time_s = 1 is below min_time_s = 2"),
    "no device": ("[profile]\nruns = 3\n", r"defines no \[\[device\]\]"),
    "profile min above runs": ("[profile]\nruns = 5\nmin_runs = 6\n" + DEVICE,
                               r"\[profile\] min_runs = 6 is above runs = 5: lower min_runs or raise runs"),
    "interval over 100 %": ("[model_timing]\nrel_ci = 2\n" + DEVICE,
                            r"\[model_timing\] rel_ci = 2 is out of range: use a number from 0 to 1"),
    "device not a table": ("device = 3\n", r"device must be an array of \[\[device\]\] tables"),
    "negative threads": (DEVICE + "intra_op_threads = -2\n",
                         r"\[\[device\]\] #1 intra_op_threads = -2 is out of range: use an integer from 0 to 1024"),
    "threads as text": (DEVICE + 'inter_op_threads = "1"\n', r'inter_op_threads = "1" is not an integer'),
    "unknown provider": ('[[device]]\nname = "x"\nep = "tpu"\n', r'ep = "tpu": use one of \[\'cpu\', \'cuda\'\]'),
    "unknown level": (DEVICE + 'opt_level = "max"\n', r'opt_level = "max": use one of'),
    "unknown device key": (DEVICE + "speed = 3\n", r"\[\[device\]\] #1: unknown key \['speed'\]"),
    "no name": ('[[device]]\nep = "cpu"\n', r'\[\[device\]\] #1 has no name: add name = "..."'),
    "path as a name": ('[[device]]\nname = "../x"\n', r'name = "../x": give a name'),
    "same name twice": (DEVICE + DEVICE, r"device name 'cpu-test' is used twice"),
}


@pytest.mark.parametrize("text,match", BAD.values(), ids=BAD.keys())
def test_bad_values_are_one_line_errors(tmp_path, text, match):
    path = tmp_path / "devices.toml"
    path.write_text(text)
    with pytest.raises(HaseError, match=match) as info:
        load_collect_config(path)
    assert "\n" not in str(info.value) and str(info.value).startswith(str(path))


def test_good_config_and_defaults(tmp_path):
    path = tmp_path / "devices.toml"
    path.write_text(FAST)
    cfg = load_collect_config(path)
    assert cfg.settings.profile_runs == 3 and cfg.settings.cold_max_bytes == 64 << 20
    assert cfg.settings.kernel.max_time_s == 0.05 and cfg.devices == (EPConfig(name="cpu-test", opt_level="extended"),)
    path.write_text(DEVICE + "[model_timing]\nmax_runs = 400\n")
    cfg = load_collect_config(path)
    # a device that names no level gets ONNX Runtime's default, `all`; one thread unless told
    assert cfg.devices == (EPConfig(name="cpu-test"),) and cfg.devices[0].opt_level == "all"
    assert (cfg.devices[0].intra_op_threads, cfg.devices[0].inter_op_threads) == (1, 1)
    assert cfg.settings.model.max_runs == 400 and cfg.settings.model.min_runs == MeasureSettings().model.min_runs
    assert cfg.settings.model_blocks == 3 and cfg.settings.canary == CanaryPolicy()  # the defaults
    path.write_text(DEVICE + "[profile]\nruns = 8\nmin_runs = 4\nrel_ci = 0.03\n[kernel_timing]\nrel_ci = 0.02\n")
    settings = load_collect_config(path).settings
    assert (settings.profile_runs, settings.profile_min_runs, settings.profile_rel_ci) == (8, 4, 0.03)
    assert settings.kernel.rel_ci == 0.02 and settings.model.rel_ci == MeasureSettings().model.rel_ci
    path.write_text(DEVICE + "[profile]\nruns = 8\n")
    assert load_collect_config(path).settings.profile_min_runs == 8  # no min_runs: every run is made


def test_robust_and_canary_tables(tmp_path):
    path = tmp_path / "devices.toml"
    path.write_text(DEVICE + "[robust]\nblocks = 5\nnoise_bound = 0.2\npasses = 3\n[canary]\nenabled = false\n"
                             "busy_ratio = 1.5\nevery_kernels = 10\n")
    s = load_collect_config(path).settings
    assert (s.model_blocks, s.noise_bound, s.model_passes) == (5, 0.2, 3)
    assert (s.canary.enabled, s.canary.busy_ratio, s.canary.every_kernels, s.canary.runs) == (False, 1.5, 10, 30)


@pytest.mark.parametrize(("text", "match"), [
    ("[robust]\nblocks = 0\n", r"\[robust\] blocks = 0 is out of range: use an integer from 1 to 100"),
    ("[canary]\nbusy_ratio = 1.0\n", r"\[canary\] busy_ratio = 1.0 is out of range: use a number from 1.01"),
    ("[canary]\nenabled = 1\n", r"\[canary\] enabled = 1 is not true or false"),
    ("[canary]\nbusy = 2\n", r"unknown key \[canary\] busy: the known keys are \[.*'enabled'"),
])
def test_bad_robust_and_canary_values(tmp_path, text, match):
    path = tmp_path / "devices.toml"
    path.write_text(DEVICE + text)
    with pytest.raises(HaseError, match=match):
        load_collect_config(path)


def test_shipped_config_is_valid():
    from conftest import REPO

    cfg = load_collect_config(REPO / "configs" / "devices.toml")
    # what a user's session gets: ORT's default level, on one thread and on ORT's default thread count (0)
    assert [(d.name, d.ep, d.intra_op_threads, d.inter_op_threads, d.opt_level) for d in cfg.devices] == [
        ("cpu-1t", "cpu", 1, 1, "all"), ("cpu-mt", "cpu", 0, 1, "all")]


def test_shipped_extended_device_is_valid_when_uncommented(tmp_path):
    from conftest import REPO

    text = (REPO / "configs" / "devices.toml").read_text()
    start = text.index('# [[device]]\n# name = "cpu-1t-extended"')
    block = text[start:text.index("\n\n", start)]
    path = tmp_path / "devices.toml"
    path.write_text(text + "\n" + "\n".join(line.removeprefix("# ") for line in block.splitlines()) + "\n")
    (extended,) = [d for d in load_collect_config(path).devices if d.name == "cpu-1t-extended"]
    assert (extended.intra_op_threads, extended.opt_level) == (1, "extended")


def test_settings_hash_follows_every_setting(tmp_path):
    path = tmp_path / "devices.toml"
    path.write_text(FAST)
    cfg = load_collect_config(path)
    ep, settings = cfg.devices[0], cfg.settings
    h = settings_hash(ep, settings)
    again = settings_hash(EPConfig(name="cpu-test", opt_level="extended"), load_collect_config(path).settings)
    assert len(h) == 16 and h == again
    others = {settings_hash(dataclasses.replace(ep, intra_op_threads=2), settings),
              settings_hash(dataclasses.replace(ep, opt_level="all"), settings),
              settings_hash(ep, dataclasses.replace(settings, profile_runs=4)),
              settings_hash(ep, dataclasses.replace(settings, kernel=dataclasses.replace(settings.kernel, warmup=3)))}
    assert h not in others and len(others) == 4
