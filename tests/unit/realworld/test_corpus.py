"""The real-world fixture corpus (tests/fixtures/realworld) is well-formed.

INDEX.md lists every file once with its source, the directory holds exactly the listed files, and every
structured file parses with the loader its suffix names (.json -> json, .yaml/.yml -> yaml.safe_load,
.toml -> tomllib). Templates (.j2, .tmpl) are published text with placeholders and are not parsed.
A fixture whose verbatim content fails the repository's own YAML linters is stored as <name>.raw and is
parsed by the suffix of <name>.
"""

import json
import pathlib
import re
import tomllib

import pytest
import yaml

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "realworld"
INDEX = CORPUS / "INDEX.md"
COLUMNS = ["fixture", "node", "writer", "source", "licence", "form"]
ROW = re.compile(r"^\| `([^`]+)` \|")


def _cells(line):
    """Split a Markdown table row on unescaped pipes."""
    parts = re.split(r"(?<!\\)\|", line.strip())
    return [p.strip() for p in parts[1:-1]]


def _rows():
    rows = []
    for line in INDEX.read_text(encoding="utf-8").splitlines():
        if ROW.match(line):
            cells = _cells(line)
            assert len(cells) == len(COLUMNS), line
            row = dict(zip(COLUMNS, cells))
            row["fixture"] = row["fixture"].strip("`")
            rows.append(row)
    return rows


ROWS = _rows()
LISTED = [r["fixture"] for r in ROWS]
ON_DISK = sorted(
    str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.is_file() and p != INDEX
)


def test_index_lists_files():
    assert len(ROWS) >= 25


def test_index_has_no_duplicates():
    assert len(LISTED) == len(set(LISTED))


def test_every_listed_file_exists():
    missing = [f for f in LISTED if not (CORPUS / f).is_file()]
    assert missing == []


def test_every_file_is_listed():
    unlisted = sorted(set(ON_DISK) - set(LISTED))
    assert unlisted == []


@pytest.mark.parametrize("row", ROWS, ids=LISTED)
def test_row_is_complete(row):
    for column in ("node", "writer", "source", "licence", "form"):
        assert row[column], f"{row['fixture']}: empty {column}"


def _format(fixture):
    """The parser a fixture needs: its suffix, or the suffix before a trailing .raw."""
    path = pathlib.PurePath(fixture)
    if path.suffix == ".raw":
        path = path.with_suffix("")
    return path.suffix


def _load(path):
    suffix = _format(path)
    if suffix == ".json":
        return json.loads(path.read_bytes())
    if suffix in (".yaml", ".yml"):
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    if suffix == ".toml":
        return tomllib.loads(path.read_text(encoding="utf-8"))
    raise AssertionError(suffix)


STRUCTURED = [f for f in LISTED if _format(f) in (".json", ".yaml", ".yml", ".toml")]


@pytest.mark.parametrize("fixture", STRUCTURED)
def test_structured_file_parses(fixture):
    data = _load(CORPUS / fixture)
    assert data is not None


def test_structured_files_present():
    kinds = {_format(f) for f in STRUCTURED}
    assert {".json", ".yaml", ".toml"} <= kinds


def test_raw_files_keep_a_node_suffix():
    """.raw is only ever appended to a real node file name that has a suffix of its own."""
    for fixture in LISTED:
        if fixture.endswith(".raw"):
            assert _format(fixture) in (".json", ".yaml", ".yml", ".toml"), fixture


def test_nodeadm_kubelet_dropin_is_json_despite_conf_name():
    """nodeadm writes JSON into config.json.d/40-nodeadm.conf; the corpus keeps that name."""
    path = CORPUS / "eks-al2023/etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf"
    data = json.loads(path.read_bytes())
    assert data["kind"] == "KubeletConfiguration"
