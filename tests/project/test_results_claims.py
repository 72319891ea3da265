"""RESULTS.md's claims table is what the records give: :mod:`cn3.stats.claims` recomputes every row
(figures, Holm within each family, the verdict by :func:`cn3.stats.verdict.judge`) from the reports of
``docs/runs`` named in ``docs/runs/claims.yaml``, and the page must equal it; a verdict or a figure changed
by hand fails. Each claim's report is one ``docs/runs/regenerate.sh`` re-renders (so the records
themselves reproduce), each command letter is in the command list under the table, and the links of
RESULTS.md and docs/history.md name headings that exist.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from cn3.stats import claims

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "RESULTS.md"
REGENERATE = ROOT / "docs" / "runs" / "regenerate.sh"
ENTRIES = yaml.safe_load((ROOT / claims.CLAIMS).read_text())["claims"]


def generated_block(page: str) -> str:
    return page[page.index(claims.BEGIN):page.index(claims.END) + len(claims.END)]


@pytest.fixture(scope="module")
def block() -> str:
    return claims.table()


def test_the_claims_table_is_what_the_records_give(block):
    page = RESULTS.read_text()
    assert generated_block(page) == block, "RESULTS.md's claims table differs: run python -m cn3.stats.claims"
    assert claims.main(["--check"]) == 0


def test_one_row_per_sub_claim_with_a_verdict_of_the_vocabulary(block):
    from cn3.stats.verdict import VERDICTS

    rows = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| paper |")]
    assert len(rows) == len(ENTRIES)
    for line in rows:
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == len(claims.COLUMNS), line
        verdict = re.match(r"\*\*(.+?)\*\*", cells[claims.COLUMNS.index("verdict")]).group(1)
        assert verdict in VERDICTS, line
    for name in claims.PAPERS.values():
        assert re.search(rf"^- {re.escape(name)}: \d+ sub-claims: ", block, re.M), name


@pytest.mark.parametrize("edit", ["verdict", "figure"])
def test_a_hand_edit_is_caught(block, edit):
    """A verdict swapped for another word, or an interval's last digit moved, makes the page differ."""
    page = RESULTS.read_text()
    if edit == "verdict":
        changed = page.replace("| **does not hold** |", "| **holds** |", 1)
    else:
        match = re.search(r"\[[+\u2212]\d+\.\d(\d)", generated_block(page))
        at = page.index(claims.BEGIN) + match.start(1)
        changed = page[:at] + str((int(page[at]) + 3) % 10) + page[at + 1:]
    assert changed != page
    assert generated_block(changed) != block
    assert claims.splice(changed, block) == page  # regenerating puts the records' row back


def regenerated_reports() -> set[str]:
    """The report files docs/runs/regenerate.sh re-renders."""
    found = set()
    for line in REGENERATE.read_text().splitlines():
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"\w+=.*", words[0]):
            words = words[1:]
        if len(words) >= 3 and words[0] == "report":
            by = words[words.index("--by") + 1] if "--by" in words else None
            found.add(f"{words[1]}/{f'by-{by}.json' if by else 'report.json'}")
    return found


def test_every_claim_reads_a_regenerated_report_and_a_listed_command():
    reports = regenerated_reports()
    commands = RESULTS.read_text().split(claims.END, 1)[1]
    commands = commands[commands.index("Commands"):]
    for entry in ENTRIES:
        if "report" in entry:
            assert entry["report"] in reports, f"{entry['claim']}: {entry['report']} is not re-rendered"
        else:
            assert (ROOT / entry["probes"]).is_file() and "docs/runs/probing/tests.sh" in commands
        for letter in str(entry["command"]).split(","):
            assert re.search(rf"(^|[\s;.]){re.escape(letter.strip())} ", commands), (entry["claim"], letter)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (hyphens kept), spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    for heading in re.findall(r"^#{1,6}\s+(.*)$", re.sub(r"```.*?```", "", path.read_text(), flags=re.S), re.M):
        base = slug(heading)
        found.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
    return found


@pytest.mark.parametrize("page_path", [RESULTS, ROOT / "docs" / "history.md"], ids=lambda p: p.name)
def test_the_page_links_resolve(page_path):
    """Links of RESULTS.md and docs/history.md (their contents, the claims' pointers to sections, each
    other, the forest plots) name files that exist and headings that exist."""
    if not page_path.exists():
        pytest.skip(f"{page_path.name} not written yet")
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", page_path.read_text())):
        if re.match(r"\w+://", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page_path.parent / file).resolve() if file else page_path
        if not path.exists() or (anchor and anchor not in anchors(path)):
            broken.append(target)
    assert broken == []
