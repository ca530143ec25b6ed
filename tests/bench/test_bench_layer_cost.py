"""The layer-cost benchmark's own plumbing (fast; no timing asserted): the estimator, the payload reader and the
per-host controller pieces on a canned module result."""

import base64
import io
import json
import pathlib
import subprocess
import sys
import zipfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import bench_layer_cost as B  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.rdma.k8s_node.plugins.module_utils import _facts_text  # noqa: E402  pylint: disable=wrong-import-position


def test_low_is_the_mean_of_the_fastest_third():
    assert B.low([9.0, 1.0, 3.0, 2.0, 8.0, 7.0]) == 1.5
    assert B.low([4.0]) == 4.0 and B.low([5.0, 1.0]) == 1.0


def test_payload_counts_the_collections_module_utils(tmp_path):
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr("ansible_collections/rdma/k8s_node/plugins/module_utils/_host.py", "x" * 2048)
        archive.writestr("ansible_collections/rdma/k8s_node/plugins/module_utils/layers/pcie/observe.py", "y" * 1024)
        archive.writestr("ansible/module_utils/basic.py", "z" * 4096)
    path = tmp_path / "AnsiballZ_rdma_facts.py"
    path.write_text("zip_data = '%s'\n" % base64.b64encode(data.getvalue()).decode(), encoding="utf-8")
    assert B.payload(path) == {"ansiballz_kb": round(path.stat().st_size / 1024.0), "module_utils": 2,
                               "module_utils_kb": 3}


def test_controller_pieces_of_a_canned_result(tmp_path):
    result = {"changed": False, "ansible_facts": {"rdma": {"devices": [], "gpus": [], "problems": []}},
              "invocation": {"module_args": {"host_root": "/"}}}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    done = subprocess.run([sys.executable, B.__file__, "--controller", str(B.COLLECTIONS), str(path), "--hosts", "2",
                           "--repeat", "3"], capture_output=True, text=True, check=True, timeout=300)
    row = json.loads(done.stdout.strip().splitlines()[-1])
    # this tree's rdma_facts prints the facts as one JSON string for the audit (facts_json), compressed as the role
    # asks (compress): the bench measures that
    shaped = dict(result)
    shaped["rdma_facts_json_zlib"] = _facts_text.deflate(json.dumps(shaped.pop("ansible_facts")["rdma"],
                                                                    separators=(",", ":")))
    assert row["result_bytes"] == len(json.dumps(shaped)) and row["checks_per_host"] > 0
    assert all(row[key] > 0 for key in ("result_ms", "callback_ms", "audit_ms", "audit_result_ms", "report_ms"))
