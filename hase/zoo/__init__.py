"""The model zoo: deterministic, offline-built ONNX models of many architecture families, driven by a TOML config.

    specs = load_zoo_config("configs/zoo_small.toml")      # validated ModelSpecs, no building
    model = build_model(specs[0], seed=0)                   # an onnx.ModelProto
    for entry in ensure_zoo("configs/zoo_small.toml", "model_zoo"):   # model_zoo/zoo_small/<name>.onnx
        ...

Families register themselves with `@register_family` in their modules, imported here to fill the registry.
"""
from hase.zoo import blocks, classic, googlenet, mobilenet, nas, resnet, shufflenet, transformer, vit  # noqa: F401
from hase.zoo.build import INDEX_COLUMNS, INDEX_NAME, ZooEntry, build_model, ensure_zoo, zoo_dir
from hase.zoo.config import ZooConfig, load_zoo_config, parse_zoo_config, read_zoo_config
from hase.zoo.registry import Family, ModelSpec, Param, families, get_family, register_family

__all__ = [
    "INDEX_COLUMNS",
    "INDEX_NAME",
    "Family",
    "ModelSpec",
    "Param",
    "ZooConfig",
    "ZooEntry",
    "build_model",
    "ensure_zoo",
    "families",
    "get_family",
    "load_zoo_config",
    "parse_zoo_config",
    "read_zoo_config",
    "register_family",
    "zoo_dir",
]
