"""The CLI's shared arguments (hase.commands.common) and default paths (hase.paths), through `main([...])`."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from hase import paths
from hase.cli import COMMANDS, build_parser, main
from hase.commands import common
from hase.commands.predict import one_device
from hase.errors import HaseError

REPO = Path(__file__).resolve().parents[2]


def _sub(command: str) -> argparse.ArgumentParser:
    """The parser of a subcommand ("predict", "pipeline run"), as `main` builds it."""
    parser = build_parser(command.split(maxsplit=1)[0])
    for name in command.split():
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in parser._actions if flag in a.option_strings)


@pytest.mark.parametrize("command", ["collect", "train", "evaluate"])
def test_store_is_declared_once_with_the_default_path(command):
    opt = _option(_sub(command), "--store")
    assert opt.default == paths.STORE == "data/hase.sqlite"
    assert opt.help == _option(_sub("collect"), "--store").help  # the same words in every command


@pytest.mark.parametrize("command", ["predict", "evaluate", "pipeline run", "pipeline simulate"])
def test_predictors_default_to_the_shipped_ones(command):
    opt = _option(_sub(command), "--predictors")
    assert opt.default is None and paths.PREDICTORS in opt.help


def test_device_option_single_or_repeatable():
    assert _option(_sub("evaluate"), "--device").default == paths.DEFAULT_DEVICE == "cpu-1t"
    for command in ("collect", "train", "predict"):  # predict: one device, or several with --compare
        opt = _option(_sub(command), "--device")
        assert isinstance(opt, argparse._AppendAction) and opt.default is None
    assert one_device(None) == paths.DEFAULT_DEVICE and one_device(["gpu"]) == "gpu"
    with pytest.raises(HaseError, match="add --compare"):
        one_device(["cpu-1t", "gpu"])


@pytest.mark.parametrize("command", ["split", "profile", "predict"])
def test_input_shape_is_repeatable_everywhere(command):
    opt = _option(_sub(command), "--input-shape")
    assert isinstance(opt, argparse._AppendAction) and opt.metavar == common.INPUT_SHAPE_METAVAR


def test_ep_options():
    for command in ("split", "profile"):
        parser = _sub(command)
        assert _option(parser, "--ep").default == "cpu" and tuple(_option(parser, "--ep").choices) == ("cpu", "cuda")
        assert _option(parser, "--opt-level").default == "all"
        assert "all" in _option(parser, "--opt-level").choices
    assert _option(_sub("profile"), "--threads").default == 1
    assert not any("--threads" in a.option_strings for a in _sub("split")._actions)
    collect = _sub("collect")
    assert _option(collect, "--ep").default is None and _option(collect, "--threads").default == 1


def test_helpers_on_a_fresh_parser():
    parser = argparse.ArgumentParser()
    common.add_store_arg(parser)
    common.add_device_arg(parser, "device", repeatable=True)
    common.add_input_shape_arg(parser)
    common.add_ep_args(parser)
    common.add_json_arg(parser)
    args = parser.parse_args(["--device", "a", "--device", "b", "--input-shape", "x=1,3", "--ep", "cuda",
                              "--threads", "4", "--opt-level", "all", "--json"])
    assert args.store == paths.STORE and args.device == ["a", "b"] and args.input_shape == ["x=1,3"]
    assert (args.ep, args.threads, args.opt_level, args.json) == ("cuda", 4, "all", True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--ep", "tpu"])


def test_default_paths_match_the_makefile():
    make = (REPO / "Makefile").read_text()
    defaults = dict(re.findall(r"^(\w+)\s*\?=\s*(\S+)\s*$", make, flags=re.M))
    assert defaults["STORE"] == paths.STORE
    assert defaults["PREDICTORS"] == paths.PREDICTORS
    assert defaults["REPORT"] == paths.REPORTS
    assert defaults["ZOO"] == paths.ZOO_CONFIG
    assert defaults["DEVICE"] == paths.DEVICES_CONFIG
    assert f"--config {paths.PREDICTOR_CONFIG}" in make and f"--device {paths.DEFAULT_DEVICE}" in make
    assert paths.SHIPPED_PREDICTORS == REPO / "hase" / "predictors"  # package data, beside the code
    for config in (paths.ZOO_CONFIG, paths.DEVICES_CONFIG, paths.PREDICTOR_CONFIG, paths.PIPELINE_EXAMPLE):
        assert (REPO / config).is_file(), config


def test_every_command_has_help(capsys):
    for command in COMMANDS:
        assert main([command, "--help"]) == 0  # main returns argparse's exit code, never raises SystemExit
    assert "--input-shape" in capsys.readouterr().out


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_bad_choice_is_a_usage_error(tmp_path, capsys):
    assert main(["split", str(tmp_path / "m.onnx"), "--out", str(tmp_path / "o"), "--ep", "tpu"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'tpu'" in err and len(err.strip().splitlines()) == 1  # one line, not the usage
