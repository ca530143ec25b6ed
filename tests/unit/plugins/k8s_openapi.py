"""Validate Kubernetes objects against the OpenAPI v3 schema of one pinned Kubernetes release (scripts/k8s-openapi).

The documents are the ones the Kubernetes repository publishes per release (``api/openapi-spec/v3``); their component
schemas are JSON Schema as ``jsonschema`` reads it, with two changes that make the check as strict as the API server
with field validation ``Strict`` (``kubectl apply --validate=strict``, the default since 1.27) for what a manifest may
say: an object schema that lists its ``properties`` and says nothing about others gets ``additionalProperties:
false`` (an unknown or misspelt field is an error, as kubeconform ``-strict`` does), and the object's ``apiVersion``
and ``kind`` must be those of the schema's ``x-kubernetes-group-version-kind``.
"""

import json
import os
import pathlib
import subprocess

import pytest
from jsonschema import Draft202012Validator

REPO = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "k8s-openapi"
DOCUMENTS = ("api__v1_openapi.json", "apis__apps__v1_openapi.json", "apis__rbac.authorization.k8s.io__v1_openapi.json")


def schema_dir():
    """The cached documents' directory (fetched by scripts/k8s-openapi when missing); a skip when they cannot be had,
    a failure when RDMA_REQUIRE_K8S_OPENAPI is set (scripts/test: scripts/setup fetched them)."""
    done = subprocess.run([str(SCRIPT)], capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        message = "scripts/k8s-openapi failed: %s" % done.stderr.strip()[-500:]
        if os.environ.get("RDMA_REQUIRE_K8S_OPENAPI"):
            pytest.fail(message)
        pytest.skip(message)
    return pathlib.Path(done.stdout.strip())


def _strict(node):
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict) and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            _strict(value)
    elif isinstance(node, list):
        for value in node:
            _strict(value)


class Schema:
    """Every component schema of the documents, strict; ``errors(obj)`` lists what is wrong with one object."""

    def __init__(self, directory):
        schemas = {}
        for name in DOCUMENTS:
            document = json.loads((pathlib.Path(directory) / name).read_text(encoding="utf-8"))
            schemas.update(document["components"]["schemas"])
        _strict(schemas)
        self.components = {"schemas": schemas}
        self.kinds = {}
        for name, schema in schemas.items():
            for gvk in schema.get("x-kubernetes-group-version-kind") or []:
                api_version = "%s/%s" % (gvk["group"], gvk["version"]) if gvk["group"] else gvk["version"]
                # the schema that owns the kind (not an older alias such as DeleteOptions listed under every group)
                if name.endswith("." + gvk["kind"]):
                    self.kinds[(api_version, gvk["kind"])] = name

    def errors(self, obj):
        key = (obj.get("apiVersion"), obj.get("kind"))
        if key not in self.kinds:
            return ["no schema for apiVersion %r kind %r in Kubernetes %s" % (key + (self.version,))]
        validator = Draft202012Validator({"$ref": "#/components/schemas/" + self.kinds[key],
                                          "components": self.components})
        return ["%s: %s" % ("/".join(str(p) for p in error.absolute_path) or "(object)", error.message)
                for error in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))]

    @property
    def version(self):
        return pathlib.Path(SCRIPT).read_text(encoding="utf-8").split("VERSION=", 1)[1].split()[0]
