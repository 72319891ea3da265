"""Forest plots of the papers' claims: one PNG per paper, one row per sub-claim of
:func:`cn3.stats.claims.judged`.

    python -m cn3.stats.forest [OUT_DIR]      # docs/figures/forest-<paper>.png (default OUT_DIR)

Each row: cn3's effect (dot) with its item-level interval (thick) and seed-level interval (thin), the
paper's effect (open diamond; none for a claim stated without a number), the verdict at the right; the
x range covers the item-level intervals and the paper's effects (:func:`limits`). The
figure is drawn on its own Agg canvas with fixed metadata (no software version, no date), so the same
records and the same matplotlib give the same bytes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from cn3.stats.claims import PAPERS, ROOT, Claim, judged

COLOURS = {"holds": "#1b7837", "holds on items": "#5aae61", "does not hold": "#b2182b",
           "does not hold on items": "#ef8a62", "undecided": "#636363", "no signal": "#878787", "waits": "#2166ac"}
#: PNG metadata written: matplotlib's Software key (its version) removed, nothing dated.
METADATA = {"Software": None}


def draw(claims: Sequence[Claim], title: str, path: Path) -> None:
    """Draw ``claims`` as a forest plot into ``path`` (PNG, 110 dpi)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.5, 0.34 * len(claims) + 1.2), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.33, 0.9 / (0.34 * len(claims) + 1.2), 0.5, 1 - 1.25 / (0.34 * len(claims) + 1.2)))
    for y, claim in enumerate(reversed(claims)):
        colour = COLOURS[claim.verdict.verdict]
        if claim.seed is not None:
            ax.plot(claim.seed.ci, (y, y), color=colour, linewidth=1.0, solid_capstyle="butt")
        if claim.item is not None:
            ax.plot(claim.item.ci, (y, y), color=colour, linewidth=4.0, solid_capstyle="butt")
        level = claim.item or claim.seed
        if level is not None:
            ax.plot(level.difference, y, "o", color=colour, markersize=4)
        if claim.paper is not None:
            ax.plot(claim.paper, y, "D", markerfacecolor="none", markeredgecolor="black", markersize=6)
        ax.annotate(claim.verdict.verdict, (1.01, y), xycoords=("axes fraction", "data"), va="center", fontsize=7.5,
                    color=colour)
    ax.axvline(0.0, color="0.6", linewidth=0.8, zorder=0)
    ax.set_xlim(*limits(claims))
    ax.set_yticks(range(len(claims)))
    ax.set_yticklabels([f"{c.entry['ref']}: {c.entry['claim']}" for c in reversed(claims)], fontsize=7.5)
    ax.set_ylim(-0.7, len(claims) - 0.3)
    ax.set_xlabel("cn3's effect A − B, points (thick: items 95%, thin: seeds 95%, clipped at the axes; "
                  "◇ the paper's)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7.5)
    ax.set_title(title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, format="png", metadata=METADATA)
    tmp.replace(path)


def limits(claims: Sequence[Claim]) -> tuple[float, float]:
    """The x range: every item-level interval, effect and paper's effect, and zero, padded by a tenth;
    seed-level intervals wider than that run off the axes (they are clipped there)."""
    xs = [0.0]
    for c in claims:
        xs += [*c.item.ci] if c.item else [*c.seed.ci] if c.seed else []
        xs += [c.paper] if c.paper is not None else []
    pad = 0.1 * (max(xs) - min(xs) or 1.0)
    return min(xs) - pad, max(xs) + pad


def draw_all(out: Path = ROOT / "docs" / "figures") -> list[Path]:
    """One forest plot per paper into ``out``: ``forest-liu.png``, ``forest-xu.png``, ``forest-hao.png``."""
    claims = judged()
    paths = []
    for key, name in PAPERS.items():
        path = out / f"forest-{key.lower()}.png"
        draw([c for c in claims if c.entry["paper"] == key], f"{name}: the claims on cn3's records", path)
        paths.append(path)
    return paths


def main(argv: Sequence[str] = ()) -> int:
    for path in draw_all(Path(argv[0]) if argv else ROOT / "docs" / "figures"):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
