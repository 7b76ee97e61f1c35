"""Re-describe stored kernels whose signature gained information since they were collected.

A kernel's id and measurements stay; only its signature JSON (what the feature extractors read) is written again
from a fresh split of the model it came from. Used when `hase.kernels.split` starts recording something it did
not before (the exponent of a Pow, `split.VALUE_OPS`): a store collected earlier then trains on the same features
as a fresh collect, without measuring anything again.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hase.errors import HaseError
from hase.kernels import graph, split
from hase.measure.store import Store
from hase.runtime.types import EPConfig

log = logging.getLogger(__name__)


@dataclass
class ResignReport:
    """What `refresh_signatures` did: kernels rewritten, models split, models whose source was gone."""

    kernels: int = 0
    models: int = 0
    missing: tuple[str, ...] = ()


def refresh_signatures(store: Store, op_types: Sequence[str], root: Path = Path()) -> ResignReport:
    """Rewrite the signature of every stored kernel of `op_types` from a fresh split of a model that runs it (its
    `source`, relative to `root`); kernel ids are kept, so every measurement stays attached. A model whose file is
    gone is listed in `missing` and its kernels left as they were."""
    if not op_types:
        raise HaseError("refresh_signatures: name the op types whose kernels to describe again, e.g. Pow")
    marks = ",".join("?" * len(op_types))
    rows = store.conn.execute(
        f"SELECT DISTINCT m.source, m.opt_level FROM model_nodes n JOIN models m ON n.model_id = m.model_id AND "
        f"n.opt_level = m.opt_level WHERE n.op_type IN ({marks}) ORDER BY m.source", tuple(op_types)).fetchall()
    report, missing, done = ResignReport(), [], set()
    for source, opt_level in rows:
        path = root / source
        if not path.is_file():
            missing.append(str(source))
            continue
        kg = graph.kernel_graph(graph.load_model(path), EPConfig(name="resign", opt_level=opt_level))
        stored = dict(store.conn.execute(
            "SELECT n.node_name, n.kernel_id FROM model_nodes n JOIN models m ON n.model_id = m.model_id AND "
            f"n.opt_level = m.opt_level WHERE m.source = ? AND m.opt_level = ? AND n.op_type IN ({marks})",
            (source, opt_level, *op_types)).fetchall())
        report.models += 1
        with store.transaction():
            for kn in split.split(kg):
                kid = stored.get(kn.node_name)
                if kid is None or kid in done:
                    continue
                spec = dataclasses.replace(kn.spec, kernel_id=kid)
                store.conn.execute("UPDATE kernels SET signature_json = ? WHERE kernel_id = ?", (spec.to_json(), kid))
                done.add(kid)
    report.kernels, report.missing = len(done), tuple(missing)
    log.info("re-described %d kernels of %d models (%d sources missing)", report.kernels, report.models, len(missing))
    return report
