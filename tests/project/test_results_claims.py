"""RESULTS.md's claims table quotes the committed records: every figure of a claims row is found in the
reports its command letters name, at the rounding the page prints, so the page cannot drift from them.

How a row finds its records, from the page and the records alone (no figure is written here):

* the row's last column names command letters; the command list under the table gives each letter's
  commands, from which the spec (``cn3 experiment run|report SPEC``, else the previous letter's) and the
  budgets (``--budget``) are read; ``docs/runs/regenerate.sh``, which re-renders every committed report
  with RESULTS.md's commands, maps each (spec, budget) to the report folders it writes. A letter that runs
  a script (``bash docs/runs/probing/tests.sh``) reads the JSON files that script writes; one that runs
  ``docs/runs/<name>/summarize.py`` reads the ``summary.json`` beside it (per-seed graph statistics).
* each report's rows (mean, std, seeds) and tests (difference, interval, paired p, its Holm value, Welch
  p, detectable differences) are the records; Holm over a report's variants (the page's "Holm over m") is
  derived from them with :func:`cn3.stats.holm`, and a probing comparison's group means from its tasks.

What is checked (a printed figure matches a record at half a unit of its last digit, of the value or of
the report's printed form of it):

* every ``d [lo, hi]`` is a test of the row's reports (either orientation: A - B or B - A), and
  ``d [lo, hi] (a vs b)`` names that test's two means;
* every other ``mean ± std`` and ``x vs y`` of the effect and verdict columns are rows of those reports;
* the p column's numbers are paired or Welch p-values of the tests the row's intervals quote, those in
  ``(Holm ...)`` their Holm values; ``≥ x`` is the smallest p of one comparison;
* in the effect and verdict columns, a p-value (``p x``, ``Welch x``, ``paired x``, ``x / y``) belongs to
  the test its clause quotes, ``+x, p y`` is an effect with its p, ``(+x ...`` an effect or bound;
  ``detectable x`` (``paired detectable x, Welch y``, ``x-y``) is a detectable difference of the row's tests;
* the seeds column names the number of seeds every quoted test pooled;
* the paper's column's ``+e (a vs b)``: a and b are the paper's numbers the reports set beside their rows
  (the spec's references) and e = a - b (rows whose records carry none, probing, are not checked there).

A row that **waits** for cells is skipped. Numbers in other forms (the paper's effects in the verdict,
epochs, ranges in prose) are not checked; :func:`test_the_claims_rows_quote_the_records` prints how many
figures were, and :func:`test_a_figure_changed_by_hand_is_caught` changes each effect and mean to see
its row fail. The links of RESULTS.md and docs/history.md (contents, pointers) must name headings that
exist.
"""

from __future__ import annotations

import json
import re
import shlex
import statistics
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pytest

from cn3.stats import format_p, holm

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "RESULTS.md"
REGENERATE = ROOT / "docs" / "runs" / "regenerate.sh"

HEADER = "| claim (paper) |"
COLUMNS = ("claim", "paper", "effect", "p", "seeds", "verdict", "reproduce")
DEC = r"\d+\.\d+"
SDEC = rf"[+-]?{DEC}"
PRIMES = "′″‴"


# --------------------------------------------------------------------------------------------------
# The page


def normalise(text: str) -> str:
    """One spelling of minus: the page writes U+2212, the reports ASCII."""
    return unicodedata.normalize("NFC", text).replace("\u2212", "-")


@dataclass
class Row:
    index: int
    cells: dict[str, str]

    @property
    def claim(self) -> str:
        return self.cells["claim"]

    @property
    def letters(self) -> list[str]:
        return [part.strip() for part in self.cells["reproduce"].split(",") if part.strip()]

    @property
    def waits(self) -> bool:
        return "**waits**" in self.cells["verdict"]


def claims_table(text: str) -> tuple[list[Row], str]:
    """The claims rows and the command list under them (the paragraph that starts ``Commands``)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    rows, i = [], start + 2
    while i < len(lines) and lines[i].startswith("|"):
        cells = [c.strip() for c in lines[i].strip().strip("|").split(" | ")]
        assert len(cells) == len(COLUMNS), f"claims row {i + 1} has {len(cells)} cells, not {len(COLUMNS)}"
        rows.append(Row(len(rows) + 1, dict(zip(COLUMNS, cells))))
        i += 1
    rest = lines[i:]
    first = next(j for j, line in enumerate(rest) if line.startswith("Commands"))
    end = next((j for j in range(first, len(rest)) if not rest[j].strip()), len(rest))
    return rows, "\n".join(rest[first:end])


def letters_commands(commands: str) -> dict[str, str]:
    """Each letter's text in the command list: a letter (with its primes) before a code span or 'the same'."""
    marks = list(re.finditer(rf"(?:^|(?<=[;.]\s)|(?<=\n))([A-Z][{PRIMES}]?)\s+(?=`|the same)", commands))
    return {m.group(1): commands[m.end():(marks[k + 1].start() if k + 1 < len(marks) else len(commands))]
            for k, m in enumerate(marks)}


# --------------------------------------------------------------------------------------------------
# The records


@dataclass(frozen=True)
class Entry:
    """One report of docs/runs/regenerate.sh: its committed folder, spec, budget and file."""
    folder: str
    spec: str
    budget: str | None
    path: Path


def regenerate_entries() -> list[Entry]:
    entries = []
    for line in REGENERATE.read_text().splitlines():
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"\w+=.*", words[0]):  # runs=... report ...
            words = words[1:]
        if len(words) < 3 or words[0] != "report":
            continue
        folder, spec, args = words[1], words[2], words[3:]
        option = lambda name: args[args.index(name) + 1] if name in args else None  # noqa: E731
        by = option("--by")
        path = ROOT / folder / (f"by-{by}.json" if by else "report.json")
        entries.append(Entry(folder, spec, option("--budget"), path))
    return entries


@dataclass
class Comparison:
    """A test of one variant against the baseline: effect and interval, the two means, p-values (raw:
    paired and Welch; Holm-adjusted), detectable differences and the number of seeds it pooled."""
    source: str
    difference: float
    ci: tuple[float, float]
    means: tuple[float, float] | None
    seeds: int | None
    raw: list[float] = field(default_factory=list)
    adjusted: list[float] = field(default_factory=list)
    detectable: list[float] = field(default_factory=list)


@dataclass
class Records:
    tests: list[Comparison] = field(default_factory=list)
    means: list[tuple[float, float | None]] = field(default_factory=list)  # (mean, std) of every row
    minima: list[float] = field(default_factory=list)  # the smallest p of each comparison, for "≥ x"
    papers: list[float] = field(default_factory=list)  # the paper's numbers a report sets beside its rows

    def extend(self, other: Records) -> None:
        self.tests += other.tests
        self.means += other.means
        self.minima += other.minima
        self.papers += other.papers


def _values(*xs) -> list[float]:
    return [float(x) for x in xs if x is not None]


@lru_cache(maxsize=None)
def report_records(path: Path) -> Records:
    """A report's rows and tests; Holm over its variants per task (the page's "Holm over m") is added to
    each test's adjusted p-values, of the p-values and of the report's printed ones."""
    data = json.loads(path.read_text())
    records = Records()
    baseline = {(r["task"], r.get("group")): r["mean"] for r in data["rows"] if r["variant"] == data.get("baseline")}
    by_task: dict[tuple, list[tuple[Comparison, dict]]] = {}
    for row in data["rows"]:
        if row.get("mean") is not None:
            records.means.append((row["mean"], row.get("std")))
        if row.get("paper") is not None:
            records.papers.append(row["paper"])
        test = row.get("test")
        if not test or "difference" not in test:
            continue
        key = (row["task"], row.get("group"))
        name = f"{path.relative_to(ROOT)}: {row['variant']} on {row['task']} {row.get('group', '')}".rstrip()

        other = baseline.get(key)
        t = Comparison(name, test["difference"], tuple(test["ci95"]),
                       (row["mean"], other) if other is not None else None, len(test.get("seeds", [])) or None,
                       _values(test.get("p"), test.get("welch_p")), _values(test.get("p_holm")),
                       _values(test.get("detectable"), test.get("welch_detectable")))
        records.tests.append(t)
        by_task.setdefault(key, []).append((t, test))
    for pairs in by_task.values():
        for key in ("p", "welch_p"):
            have = [(t, test[key]) for t, test in pairs if test.get(key) is not None]
            if len(have) > 1:
                for (t, _), raw, printed in zip(have, holm([p for _, p in have]),
                                                holm([float(format_p(p)) for _, p in have])):
                    t.adjusted += [raw, printed]
    return records


@lru_cache(maxsize=None)
def probe_records(path: Path) -> Records:
    """A ``cn3 compare-probes`` record: per task the paired test and Welch's; per group of tasks the means
    (the page's "syntactic mean a vs b")."""
    data = json.loads(path.read_text())
    records = Records()
    groups: dict[str, list[tuple[float, float]]] = {}
    paired_p, welch_p = [], []
    for task in data["tasks"]:
        paired = task["paired"]
        records.tests.append(Comparison(
            f"{path.relative_to(ROOT)}: {task['task']}", paired["difference"], tuple(paired["ci95"]),
            (task["mean_a"], task["mean_b"]), len(paired.get("pairs", [])) or None,
            _values(paired.get("p"), task.get("welch_p")), _values(paired.get("p_holm"), task.get("welch_p_holm"))))
        records.means += [(task["mean_a"], task.get("std_a")), (task["mean_b"], task.get("std_b"))]
        groups.setdefault(task["group"], []).append((task["mean_a"], task["mean_b"]))
        paired_p.append(paired["p"])
        if task.get("welch_p") is not None:
            welch_p.append(task["welch_p"])
    for pairs in groups.values():
        records.means += [(sum(a for a, _ in pairs) / len(pairs), None), (sum(b for _, b in pairs) / len(pairs), None)]
    records.minima += [min(p) for p in (paired_p, welch_p) if p]
    return records


@lru_cache(maxsize=None)
def summary_records(path: Path) -> Records:
    """A ``summarize.py`` record (``docs/runs/collapse/summary.json``): per run group, each statistic's
    per-seed values; their mean and standard deviation, as fractions and as percentages."""
    records = Records()
    for entry in json.loads(path.read_text()).values():
        for name, values in entry.items():
            if name == "seeds" or not isinstance(values, list) or not values:
                continue
            mean = sum(values) / len(values)
            std = statistics.stdev(values) if len(values) > 1 else None
            records.means += [(mean, std), (100 * mean, None if std is None else 100 * std)]
    return records


def script_outputs(script: Path) -> list[Path]:
    """The JSON files a test script writes: its ``P=`` folder and the folder under it that ``--out`` names."""
    text = script.read_text()
    base = re.search(r"^P=(\S+)", text, re.M)
    out = re.search(r"--out \$P/([\w./-]+?)/", text)
    assert base and out, f"{script}: cannot tell where it writes its records"
    return sorted((ROOT / base.group(1) / out.group(1)).glob("*.json"))


def letter_records(text: str, spec: str | None, entries: list[Entry]) -> tuple[list[tuple[str, Records]], str | None]:
    """The records a letter's commands write (each file's, named), and the spec its text leaves current."""
    found: dict[str, Records] = {}
    specs = {e.spec for e in entries}
    for fragment in re.findall(r"`([^`]*)`", text, re.S):
        summary = re.search(r"python\s+(docs/runs/\S+)/summarize\.py", fragment)
        if summary:
            path = ROOT / summary.group(1) / "summary.json"
            found[str(path.relative_to(ROOT))] = summary_records(path)
            continue
        script = re.match(r"bash\s+(\S+\.sh)", fragment.strip())
        if script:
            for path in script_outputs(ROOT / script.group(1)):
                found[str(path.relative_to(ROOT))] = probe_records(path)
            continue
        named = re.search(r"\b(?:run|report)\s+([\w+-]+)", fragment)
        if named and named.group(1) in specs:
            spec = named.group(1)
        if spec is None:
            continue
        budget = re.search(r"--budget\s+(\S+)", fragment)
        for entry in entries:
            if entry.spec == spec and entry.budget == (budget.group(1) if budget else None):
                found[str(entry.path.relative_to(ROOT))] = report_records(entry.path)
    return list(found.items()), spec


# --------------------------------------------------------------------------------------------------
# Matching a printed figure


def decimals(printed: str) -> int:
    return len(printed.split(".")[1]) if "." in printed else 0


def as_reported(value: float) -> list[float]:
    """A value and the forms a report prints it in (two decimals; a p-value's two significant digits,
    :func:`cn3.stats.format_p`), which the page may round again."""
    return [value, round(value, 2), float(format_p(value))] if 0 < value <= 1 else [value, round(value, 2)]


def matches(printed: str, value: float) -> bool:
    """``printed`` is ``value`` at the page's rounding (half a unit of its last digit), of the value or of
    the report's printed form of it."""
    return any(abs(float(printed) - v) <= 0.5 * 10 ** -decimals(printed) + 1e-9 for v in as_reported(value))


def interval_matches(triple: tuple[str, str, str], test: Comparison) -> bool:
    d, lo, hi = triple
    if matches(d, test.difference) and matches(lo, test.ci[0]) and matches(hi, test.ci[1]):
        return True
    return matches(d, -test.difference) and matches(lo, -test.ci[1]) and matches(hi, -test.ci[0])


@dataclass
class Check:
    """The figures of one row: each (what, printed, found)."""
    row: Row
    sources: list[str]
    results: list[tuple[str, str, bool]] = field(default_factory=list)

    def add(self, what: str, printed: str, found: bool) -> None:
        self.results.append((what, printed, found))

    @property
    def failures(self) -> list[str]:
        return [f"{what} {printed}" for what, printed, found in self.results if not found]


def strip_code(text: str) -> str:
    return re.sub(r"`[^`]*`", " ", text)


INTERVAL = rf"({SDEC}) \[({SDEC}), ({SDEC})\]"
MEAN = rf"{DEC}(?: ± {DEC})?"
DETECTABLE = rf"detectable((?:\s*[,;/]?\s*(?:paired\s+|Welch\s+)?{DEC}(?:-{DEC})?)+)"
LONE_EFFECT = rf"({SDEC}), p ({DEC})(?:, Welch ({DEC}))?"
P_LIKE = rf"\b(p|Welch|paired|Holm)\s+(?:=\s*)?({DEC})|({DEC}) / ({DEC})"


def any_match(printed: str, values) -> bool:
    return any(matches(printed, v) for v in values)


def mean_matches(printed: str, mean: float, means: list[tuple[float, float | None]]) -> bool:
    """``m`` or ``m ± s`` is ``mean`` (and ``s`` the std of a row with that mean)."""
    m, _, s = printed.partition(" ± ")
    return matches(m, mean) and (not s or any(matches(m, a) and b is not None and matches(s, b) for a, b in means))


def check_row(row: Row, letters: dict[str, str], entries: list[Entry]) -> Check:
    records, sources = Records(), []
    order = list(letters)
    for letter in row.letters:
        assert letter in letters, f"row {row.index} ({row.claim}) cites command {letter}, not in the command list"
        spec = None  # the spec a letter without one continues: the previous letters'
        for earlier in order[:order.index(letter)]:
            _, spec = letter_records(letters[earlier], spec, entries)
        found, _ = letter_records(letters[letter], spec, entries)
        assert found, f"row {row.index} ({row.claim}): command {letter} names no committed report"
        for source, part in found:
            if source not in sources:
                records.extend(part)
                sources.append(source)
    check = Check(row, sources)
    cells = {k: strip_code(normalise(v)) for k, v in row.cells.items()}

    def hits(triple: tuple[str, str, str]) -> list[Comparison]:
        return [t for t in records.tests if interval_matches(triple, t)]

    matched: list[Comparison] = []  # every test an interval of the row quotes
    for name in ("effect", "p", "verdict"):
        for m in re.finditer(INTERVAL, cells[name]):
            found = hits(m.groups())
            check.add("interval", m.group(0), bool(found))
            matched += [t for t in found if t not in matched]
    for name in ("effect", "verdict"):
        text = cells[name]
        # detectable differences (a list may run over a semicolon): of the row's tests
        for m in re.finditer(DETECTABLE, text):
            for printed in re.findall(DEC, m.group(1)):
                check.add("detectable", printed,
                          any_match(printed, [d for t in matched or records.tests for d in t.detectable]))
        text = re.sub(DETECTABLE, " § ", text)
        # "d [lo, hi] (a vs b)": the means of that test
        for m in re.finditer(rf"{INTERVAL}[^(;]*\(({MEAN}) vs ({MEAN})\b", text):
            a, b = m.group(4), m.group(5)
            ok = any(t.means and any(mean_matches(a, x, records.means) and mean_matches(b, y, records.means)
                                     for x, y in (t.means, t.means[::-1]))
                     for t in hits(m.groups()[:3]))
            check.add("means of the test", f"{a} vs {b}", ok)
            text = text.replace(f"{a} vs {b}", " § ", 1)
        for clause in text.split(";"):
            own = [t for m in re.finditer(INTERVAL, clause) for t in hits(m.groups())]
            clause = re.sub(INTERVAL, " § ", clause)
            for m in re.finditer(rf"({MEAN}) vs ({MEAN})", clause):
                for printed in m.groups():
                    check.add("mean", printed,
                              any(mean_matches(printed, mean, records.means) for mean, _ in records.means))
            clause = re.sub(rf"{MEAN} vs {MEAN}", " § ", clause)
            for m in re.finditer(rf"{DEC} ± {DEC}", clause):
                check.add("mean ± std", m.group(0),
                          any(mean_matches(m.group(0), mean, records.means) for mean, _ in records.means))
            clause = re.sub(rf"{DEC} ± {DEC}", " § ", clause)
            for m in re.finditer(rf"≥\s*({DEC})", clause):
                check.add("smallest p", m.group(1), any_match(m.group(1), records.minima))
            clause = re.sub(rf"≥\s*{DEC}", " § ", clause)
            # "+x, p y, Welch z": a test of the row's reports with that effect and those p-values
            for m in re.finditer(LONE_EFFECT, clause):
                d, p, welch = m.groups()
                ok = any((matches(d, t.difference) or matches(d, -t.difference)) and any_match(p, t.raw)
                         and (welch is None or any_match(welch, t.raw)) for t in records.tests)
                check.add("effect with its p", m.group(0), ok)
            clause = re.sub(LONE_EFFECT, " § ", clause)
            # "(+x over ...", "(+x)": an effect or interval bound of the row's reports (the paper's are named so)
            for m in re.finditer(rf"(?<!paper's )\(({SDEC})\b(?![\d.])", clause):
                if m.group(1)[0] in "+-":
                    check.add("effect", m.group(1), any(matches(m.group(1), v) or matches(m.group(1), -v)
                                                        for t in records.tests for v in (t.difference, *t.ci)))
            # p-values: of the clause's test, else of the row's reports
            tests = own or records.tests
            for m in re.finditer(P_LIKE, clause):
                if m.group(1) == "Holm":
                    check.add("Holm p", m.group(2), any_match(m.group(2), [p for t in tests for p in t.adjusted]))
                for printed in filter(None, (m.group(2) if m.group(1) != "Holm" else None, m.group(3), m.group(4))):
                    check.add("p", printed, any_match(printed, [p for t in tests for p in t.raw]))
    # the paper's column: "+e (a vs b)" are numbers the reports set beside their rows (the spec's
    # references), e = a - b; a row whose records carry none (probing) quotes the paper's tables
    if records.papers:
        paper = strip_code(normalise(row.cells["paper"]))
        for m in re.finditer(rf"(?:({SDEC}) \()?({DEC}) vs ({DEC})", paper):
            effect, a, b = m.groups()
            for printed in (a, b):
                check.add("paper's number", printed, any(float(printed) == v for v in records.papers))
            if effect:
                check.add("paper's effect", effect, matches(effect, float(a) - float(b)))
    # the p column: paired and Welch p of the tests the row's intervals quote; Holm's in "(Holm ...)"
    tests = matched or records.tests
    text = cells["p"]
    for m in re.finditer(rf"≥\s*({DEC})", text):
        check.add("smallest p", m.group(1), any_match(m.group(1), records.minima))
    text = re.sub(rf"≥\s*{DEC}", " § ", text)
    for m in re.finditer(r"\([^()]*Holm[^()]*\)", text):
        for printed in re.findall(DEC, m.group(0)):
            check.add("Holm p", printed, any_match(printed, [p for t in tests for p in t.adjusted]))
    for printed in re.findall(DEC, re.sub(r"\([^()]*Holm[^()]*\)", " § ", text)):
        check.add("p", printed, any_match(printed, [p for t in tests for p in t.raw]))
    # seeds: the number (outside parentheses) of seeds every quoted test pooled
    stated = {int(n) for n in re.findall(r"\d+", re.sub(r"\([^()]*\)", " ", row.cells["seeds"]))}
    for t in matched:
        if t.seeds is not None:
            check.add("seeds", f"{t.seeds} ({t.source})", t.seeds in stated)
    return check


# --------------------------------------------------------------------------------------------------
# The tests


@lru_cache(maxsize=None)
def page() -> tuple[list[Row], dict[str, str]]:
    rows, commands = claims_table(RESULTS.read_text())
    return rows, letters_commands(normalise(commands))


def _row_ids() -> list[str]:
    try:
        rows, _ = page()
    except (OSError, StopIteration):
        return ["no-claims-table"]
    return [f"{row.index}-{re.sub(r'[^A-Za-z0-9]+', '-', row.claim)[:40].strip('-')}" for row in rows]


@pytest.mark.parametrize("index", range(len(_row_ids())), ids=_row_ids())
def test_a_claims_row_quotes_its_records(index):
    rows, letters = page()
    row = rows[index]
    if row.waits:
        pytest.skip(f"row {row.index} ({row.claim}) waits for its cells")
    check = check_row(row, letters, regenerate_entries())
    assert check.results, f"row {row.index} ({row.claim}) quotes no figure this test can check"
    assert not check.failures, (f"row {row.index} ({row.claim}): not in its records: " + "; ".join(check.failures)
                                + f" (records read: {', '.join(check.sources)})")


def test_the_claims_rows_quote_the_records():
    """The whole table at once: every row that does not wait has its letters and its figures checked."""
    rows, letters = page()
    entries = regenerate_entries()
    assert all(e.path.is_file() for e in entries), [e.folder for e in entries if not e.path.is_file()]
    checked = [check_row(row, letters, entries) for row in rows if not row.waits]
    figures = sum(len(c.results) for c in checked)
    assert len(checked) >= 1 and figures >= len(checked)
    print(f"{len(checked)} claims rows, {figures} figures checked against their records "
          f"({len(rows) - len(checked)} rows wait)")


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
    other) name files that exist and headings that exist."""
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


def test_a_figure_changed_by_hand_is_caught():
    """Every effect, interval bound and mean ± std of the effect column, its last digit moved by 3, fails its row."""
    rows, letters = page()
    entries = regenerate_entries()
    tried = 0
    for row in rows:
        if row.waits:
            continue
        text = row.cells["effect"]
        for figure in re.finditer(rf"{INTERVAL}|{DEC} ± {DEC}", normalise(text)):
            for number in re.finditer(DEC, figure.group(0)):
                at = figure.start() + number.end() - 1
                changed = text[:at] + str((int(text[at]) + 3) % 10) + text[at + 1:]
                check = check_row(Row(row.index, {**row.cells, "effect": changed}), letters, entries)
                assert check.failures, (f"row {row.index}: {figure.group(0)} changed to "
                                        f"{changed[figure.start():figure.end()]} passes")

                tried += 1
    assert tried
