"""hase.measure.resign: a store collected before a signature carried a Pow's exponent is described again in place,
ids and measurements untouched."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from collect_cases import FAST
from conftest import REPO

from hase import zoo
from hase.errors import HaseError
from hase.measure import collect as coll
from hase.measure.resign import refresh_signatures
from hase.measure.store import Store


def _exponent(store: Store, kernel_id: str) -> tuple[float, float]:
    (text,) = store.conn.execute("SELECT signature_json FROM kernels WHERE kernel_id = ?", (kernel_id,)).fetchone()
    e = json.loads(text)["inputs"][1]
    return e["low"], e["high"]


@pytest.mark.slow
def test_refresh_rewrites_stale_pow_signatures_and_keeps_ids_and_rows(tmp_path, monkeypatch):
    model = tmp_path / "pow.onnx"
    onnx.save(zoo.build_model(zoo.get_family("sampled-eltwise").spec({"rows": 4, "width": 8, "op": "PowInv"})), model)
    cfg_path = tmp_path / "devices.toml"
    cfg_path.write_text(FAST)
    monkeypatch.chdir(tmp_path)  # sources are stored as given and read relative to `root`
    with Store(tmp_path / "s.sqlite") as store:
        coll.collect([coll.ModelSource("pow", "user", Path("pow.onnx"))], coll.load_collect_config(cfg_path), store)
        (kid,) = [r[0] for r in store.conn.execute("SELECT kernel_id FROM kernels WHERE op_type = 'Pow'")]
        assert _exponent(store, kid) == (-1.0, -1.0)
        stale = json.loads(store.conn.execute("SELECT signature_json FROM kernels WHERE kernel_id = ?",
                                              (kid,)).fetchone()[0])
        stale["inputs"][1]["low"], stale["inputs"][1]["high"] = -1.0, 1.0  # as collected before the exponent
        store.conn.execute("UPDATE kernels SET signature_json = ? WHERE kernel_id = ?",
                           (json.dumps(stale, sort_keys=True), kid))
        rows = len(store.table("kernel_measurements"))
        report = refresh_signatures(store, ["Pow"])
        assert (report.kernels, report.models, report.missing) == (1, 1, ())
        assert _exponent(store, kid) == (-1.0, -1.0) and len(store.table("kernel_measurements")) == rows
        model.unlink()
        assert refresh_signatures(store, ["Pow"]).missing == ("pow.onnx",)
        with pytest.raises(HaseError, match="name the op types"):
            refresh_signatures(store, [])


def test_the_script_refuses_a_missing_store_in_one_line_and_creates_nothing(tmp_path):
    missing = tmp_path / "nowhere.sqlite"
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "refresh_signatures.py"), "--store", str(missing),
                          "--op", "Pow"], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert run.returncode == 2 and "measurement store not found" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr and not missing.exists()
