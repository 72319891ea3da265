"""Compile every autotune config of the fused CN3 attention kernels for sm_90 (H100/H200) without a GPU
and print each one's registers and spills, in IEEE fp32, TF32 and bf16 products.

The shape is the bench's (``e`` 100, ``d`` 300, one head, edge types, key and query masks, no
``alpha``), the ``tanh`` the one :func:`cn3.layers.triton_common.default_tanh` gives each dtype on
sm_90. A config spills when its stack frame or local memory is above 0 bytes (``cuobjdump
-res-usage``; ptxas caps a thread at 255 registers and spills the rest). At run time the autotuner
compiles each config for the GPU at hand and times only those that do not spill
(:func:`cn3.layers.triton_common.autotune`), all of them only when every one spills: so a kernel and
precision with at least one spill-free config is timed spill-free. Exit status 1 when one has none,
or when ``--strict`` names a kernel with any spilling config.

Run with this checkout's Triton (no GPU needed, Triton's NVIDIA backend brings ``ptxas``)::

    .venv/bin/python scripts/sm90_spills.py [--precision ieee tf32 bf16] [--json OUT.json]

or with another Triton, e.g. the GPU machine's 3.6, from a scratch venv that sees this venv's torch
(the ``.pth`` line is appended after the scratch venv's own packages, so its Triton wins)::

    python -m venv /tmp/t36 && /tmp/t36/bin/pip install triton==3.6.0
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/t36/lib/python3.11/site-packages/cn3_venv.pth
    /tmp/t36/bin/python scripts/sm90_spills.py
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Product precisions: the tiles' dtype, ``tl.dot``'s input precision and the ``tanh`` form
#: (:data:`cn3.layers.triton_common.TANH_FORMS`) each runs with on sm_90.
PRECISIONS = {"ieee": ("fp32", "ieee", 2), "tf32": ("fp32", "tf32", 2), "bf16": ("bf16", "tf32", 3)}

#: Integer (not pointer) arguments of the kernels, and the pointers that are not fp32 tensors.
_INTS = {"N_Q", "N_K", "H", "et_sb", "de_slot", "LEN_BUCKET"}
_POINTERS = {"ET": "*i64", "KMASK": "*u8", "QMASK": "*u8", "KEND": "*i32", "QEND": "*i32"}
_TILES = {"Q", "K", "EV", "V", "OUT", "DOUT"}  # in the tiles' dtype; every other pointer is fp32


def signature(fn, dtype: str) -> dict[str, str]:
    """Argument types of a fused kernel's ``@triton.jit`` function ``fn`` for tiles of ``dtype``."""
    def kind(name: str) -> str:
        if name in _INTS:
            return "i32"
        return _POINTERS.get(name) or (f"*{dtype}" if name in _TILES else "*fp32")
    return {p.name: "constexpr" if p.is_constexpr else kind(p.name) for p in fn.params}


def kernels() -> dict:
    """``{name: (autotuned kernel, constexprs besides the shape's and the tile's)}`` at the bench's use."""
    from cn3.layers import fused_energy as fe  # noqa: PLC0415

    backward = dict(HAS_KMASK=True, HAVE_P=False, DC=fe.value_chunk(fe.value_parts(300)["DP"]))
    return {"_attn_fwd": (fe._attn_fwd, dict(HAS_KMASK=True, HAS_QMASK=True, NEED_ALPHA=False)),
            "_attn_bwd_kv": (fe._attn_bwd_kv, backward),
            "_attn_bwd_q": (fe._attn_bwd_q, dict(backward, SLOTS=fe.SLOTS))}


def usage(name: str, precision: str) -> list[dict]:
    """One row per config of kernel ``name`` in ``precision`` (:data:`PRECISIONS`): the tile (as
    ``BMxBNxBE`` and each constexpr), warps, stages, registers, stack and local bytes, and whether it
    spills."""
    from cn3.layers import fused_energy as fe  # noqa: PLC0415
    from cn3.layers.triton_common import sm90_usage  # noqa: PLC0415

    kernel, flags = kernels()[name]
    dtype, prec, tanh = PRECISIONS[precision]
    shape = dict(EH=100, DH=300, **fe.value_parts(300), HAS_EDGE=True, TANH=tanh, DOT_PREC=prec, **flags)
    params = {p.name for p in kernel.fn.params}
    rows = []
    for config in kernel.configs:
        constexprs = {k: v for k, v in {**shape, **config.kwargs}.items() if k in params}
        use = sm90_usage(kernel.fn, signature(kernel.fn, dtype), constexprs, config.num_warps, config.num_stages)
        rows.append({"kernel": name, "precision": precision, "tile": "x".join(map(str, config.kwargs.values())),
                     **config.kwargs, "warps": config.num_warps, "stages": config.num_stages, **use,
                     "spills": use["stack"] > 0 or use.get("local", 0) > 0})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", nargs="+", choices=list(PRECISIONS), default=list(PRECISIONS))
    parser.add_argument("--kernel", nargs="+", choices=["_attn_fwd", "_attn_bwd_kv", "_attn_bwd_q"],
                        default=["_attn_fwd", "_attn_bwd_kv", "_attn_bwd_q"])
    parser.add_argument("--strict", nargs="*", default=[], metavar="KERNEL",
                        help="kernels of which every config must be spill-free (not only one)")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)
    import triton  # noqa: PLC0415

    print(f"Triton {triton.__version__}, sm_90, e 100, d 300, one head, edge types", flush=True)
    rows, failed = [], []
    for precision in args.precision:
        for name in args.kernel:
            start = time.time()
            found = usage(name, precision)
            rows += found
            cells = [f"{r['tile']}/{r['warps']}: {r['registers']}" + (f" +{r['stack']}B" if r["spills"] else "")
                     for r in found]
            print(f"{precision:5} {name:13} {time.time() - start:5.1f} s  " + "  ".join(cells), flush=True)
            if all(r["spills"] for r in found) or (name in args.strict and any(r["spills"] for r in found)):
                failed.append(f"{name} {precision}")
    if args.json:
        args.json.write_text(json.dumps({"triton": triton.__version__, "rows": rows}, indent=1))
    print("spilling (the autotuner would time these):" if failed else "ok: every kernel has a spill-free config",
          *failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
