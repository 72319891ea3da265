"""What cn3's Triton kernels (:mod:`cn3.layers.fused_energy`, :mod:`cn3.layers.onlstm_triton`) share:
the ``tanh`` forms, tile and mask helpers, the products' precision, the interpreter switch and the
autotuning wrapper with its register-spill filter.

Interpreter: ``TRITON_INTERPRET=1`` set before ``triton`` is first imported (read once per process)
runs every kernel on CPU tensors, one program at a time. It runs neither inline PTX nor
``libdevice``, so there ``tanh`` is always the exact ``2 sigmoid(2x) - 1`` (:func:`default_tanh`), and
:func:`autotune` gives each kernel one fixed small config instead of timing several.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch
import triton
import triton.language as tl
from torch import Tensor
from triton.language.extra import libdevice

#: True when Triton runs kernels in its interpreter (``TRITON_INTERPRET=1`` before import).
INTERPRETING = (triton.knobs.runtime.interpret if hasattr(triton, "knobs")
                else os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"))

#: ``tanh=`` names and the kernels' ``TANH`` code:
#:
#: * ``sigmoid``: ``2 sigmoid(2x) - 1``, exact to fp32 rounding; the only form the interpreter runs.
#: * ``libdevice``: CUDA's ``tanhf`` (exact to 2 ulp, about 20 instructions).
#: * ``approx``: the special-function unit's ``tanh.approx.f32``, one instruction; maximum relative
#:   error ``2^-10.987`` (PTX ISA).
#: * ``approx_bf16``: ``tanh.approx.bf16x2``, two values per instruction, rounded to bf16 (relative
#:   error ``2^-8``: bf16's own resolution).
TANH_FORMS = {"sigmoid": 0, "libdevice": 1, "approx": 2, "approx_bf16": 3}

#: The documented maximum relative error of ``tanh.approx.f32`` (PTX ISA, "tanh").
APPROX_TANH_REL_ERROR = 2.0 ** -10.987


@triton.jit
def tanh(x, TANH: tl.constexpr):
    """``tanh(x)`` of fp32 ``x`` in the form ``TANH`` (:data:`TANH_FORMS`), fp32."""
    if TANH == 0:
        y = 2.0 * tl.sigmoid(2.0 * x) - 1.0  # tanh x = 2 sigmoid(2x) - 1
    elif TANH == 1:
        y = libdevice.tanh(x)
    elif TANH == 2:
        y = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                      is_pure=True, pack=1)
    else:  # two bf16 lanes in one 32-bit register per instruction
        y = tl.inline_asm_elementwise("tanh.approx.bf16x2 $0, $1;", "=r,r", [x.to(tl.bfloat16)],
                                      dtype=tl.bfloat16, is_pure=True, pack=2).to(tl.float32)
    return y


@triton.jit
def block(start, BLOCK: tl.constexpr, limit):
    """Offsets ``start : start + BLOCK`` and which of them are below ``limit``."""
    offs = start + tl.arange(0, BLOCK)
    return offs, offs < limit


@triton.jit
def load_tile(ptr, rows, cols, row_stride, ok_rows, ok_cols):
    """The ``(len(rows), len(cols))`` tile ``ptr[rows * row_stride + cols]`` (unit column stride),
    zero where a row or column is off, in fp32."""
    return tl.load(ptr + rows[:, None] * row_stride + cols[None, :], mask=ok_rows[:, None] & ok_cols[None, :],
                   other=0.0).to(tl.float32)


#: The least CUDA compute capability each hardware form compiles for (PTX ISA, "tanh"): ptxas rejects
#: ``tanh.approx.bf16x2`` below sm_90 and ``tanh.approx.f32`` below sm_75.
TANH_MIN_CAPABILITY = {"approx": (7, 5), "approx_bf16": (9, 0)}


def device_capability(device: torch.device) -> tuple[int, int] | None:
    """``(major, minor)`` of a CUDA ``device``; None for any other device."""
    return torch.cuda.get_device_capability(device) if device.type == "cuda" else None


def default_tanh(dtype: torch.dtype, capability: tuple[int, int] | None = None) -> str:
    """The ``tanh`` form for tiles of ``dtype`` on a GPU of compute ``capability``: ``sigmoid`` in the
    interpreter (the only form it runs); else the special-function unit where the GPU has the
    instruction (``approx_bf16`` for bf16 tiles from sm_90, ``approx`` for fp32/fp16 tiles from
    sm_75) and the exact ``libdevice`` form elsewhere (bf16 below sm_90, fp64, older GPUs, or an
    unknown ``capability``).
    """
    if INTERPRETING:
        return "sigmoid"
    form = {torch.bfloat16: "approx_bf16", torch.float32: "approx", torch.float16: "approx"}.get(dtype)
    if form is None or capability is None or tuple(capability) < TANH_MIN_CAPABILITY[form]:
        return "libdevice"
    return form


def check_tanh(tanh: str, capability: tuple[int, int] | None = None) -> None:
    """Raises ``ValueError`` unless ``tanh`` is a form this process can run (:data:`TANH_FORMS`) on a GPU
    of compute ``capability`` (None: not checked; :data:`TANH_MIN_CAPABILITY`)."""
    if tanh not in TANH_FORMS or (INTERPRETING and tanh != "sigmoid"):
        raise ValueError(f"tanh must be one of {sorted(TANH_FORMS)} (only 'sigmoid' in the interpreter), got {tanh!r}")
    need = TANH_MIN_CAPABILITY.get(tanh)
    if need is not None and capability is not None and tuple(capability) < need:
        raise ValueError(f"tanh={tanh!r} needs a GPU of compute capability sm_{need[0]}{need[1]} or newer; this one "
                         f"is sm_{capability[0]}{capability[1]}: use 'libdevice' (exact) or leave tanh unset")


def dot_precision(dtype: torch.dtype) -> str:
    """``tl.dot``'s input precision for operands of ``dtype``: fp32 as torch's own matmuls (TF32,
    on the tensor cores, where ``torch.backends.cuda.matmul.allow_tf32``, e.g. after
    ``torch.set_float32_matmul_precision("high")``; IEEE otherwise), fp64 exact; 16-bit operands
    ignore it (bf16/fp16 tensor-core products with fp32 sums)."""
    if dtype == torch.float64 or (dtype == torch.float32 and not torch.backends.cuda.matmul.allow_tf32):
        return "ieee"
    return "tf32"


def mask_bytes(mask: Tensor | None, device: torch.device) -> Tensor:
    """The bool mask as contiguous uint8 (what the kernels load), or a one-byte placeholder."""
    if mask is None:
        return torch.ones(1, 1, dtype=torch.uint8, device=device)
    return mask.contiguous().view(torch.uint8)


def ends(mask: Tensor | None, batch: int, n: int, device: torch.device) -> Tensor:
    """``(B,)`` int32: one past each row's last True (``n`` without a mask), so that kernels stop at
    the padding instead of masking it tile by tile."""
    if mask is None or n == 0:  # (amax refuses an empty axis)
        return torch.full((batch,), n, dtype=torch.int32, device=device)
    position = torch.arange(1, n + 1, dtype=torch.int32, device=device)
    return (mask.to(torch.int32) * position).amax(dim=-1).to(torch.int32)


def length_bucket(n: int) -> int:
    """The autotuning key of a length: the next power of two from 16 up to 4096 (one tuning per
    bucket, not per length)."""
    return min(4096, triton.next_power_of_2(max(n, 16)))


def _spill_free(jit_fn):
    """An ``early_config_prune`` that compiles each config for the current GPU (as the launch would:
    the compile is cached for it) and keeps those whose compiled kernel spills no registers; all of
    them if every one spills. ``jit_fn``: the ``@triton.jit`` kernel."""
    def prune(configs, named_args, **kwargs):
        launch = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
        kept = []
        for config in configs:
            compiled = jit_fn.warmup(**named_args, **launch, **config.all_kwargs(), grid=(1,))
            compiled._init_handles()  # loads the binary: the driver reports registers and spills
            if compiled.n_spills == 0:
                kept.append(config)
        return kept or list(configs)
    return prune


def tune_key(fn, key: list[str], configs: list[triton.Config]) -> list[str]:
    """``key`` and every ``tl.constexpr`` parameter of the ``@triton.jit`` ``fn`` that the configs do
    not set (masks present, ``NEED_ALPHA``, widths, ...): each changes the compiled kernel, so a tile
    timed for one variant must not serve another."""
    tiles = {name for config in configs for name in config.kwargs}
    constexprs = [p.name for p in fn.params if p.is_constexpr and p.name not in tiles]
    return list(dict.fromkeys([*key, *constexprs]))


def autotune(configs: list[triton.Config], key: list[str], interpreter: dict, reset_to_zero: list[str] | None = None):
    """``triton.autotune`` over ``configs`` keyed by ``key`` and every other constexpr of the kernel
    (:func:`tune_key`; and, as Triton always does, the tensor arguments' dtypes), pruned to the configs
    that compile without register spills on the GPU at hand (:func:`_spill_free`), its picks cached on
    disk in Triton's cache directory (``cache_results``: a later process, test or resumed run reads the
    pick instead of timing again; the disk key holds Triton's version, the kernel's source, the key and
    the configs). In the interpreter: the single config ``interpreter`` (tile constexprs), so nothing is
    timed or compiled. ``reset_to_zero``: outputs that the kernel accumulates into, zeroed before each
    timed trial."""
    def wrap(fn):
        if INTERPRETING:
            return triton.autotune([triton.Config(interpreter)], key=key)(fn)
        cache = {"cache_results": True} if "cache_results" in inspect.signature(triton.autotune).parameters else {}
        return triton.autotune(configs, key=tune_key(fn, key, configs), reset_to_zero=reset_to_zero,
                               prune_configs_by={"early_config_prune": _spill_free(fn)}, **cache)(fn)
    return wrap


def sm90_usage(fn, signature: dict[str, str], constexprs: dict, num_warps: int, num_stages: int) -> dict:
    """Compile the ``@triton.jit`` function ``fn`` for sm_90 (Hopper) without a GPU and read its
    resource use with Triton's bundled ``cuobjdump``: ``{"registers": int, "stack": bytes, "local":
    bytes}``; a stack frame or local memory above 0 is a register spill. Raises ``RuntimeError``
    without the NVIDIA backend."""
    from triton.backends.compiler import GPUTarget  # noqa: PLC0415
    from triton.compiler import ASTSource  # noqa: PLC0415

    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not cuobjdump.is_file():
        cuobjdump = Path(shutil.which("cuobjdump") or cuobjdump)
    if not cuobjdump.is_file():
        raise RuntimeError("Triton's NVIDIA backend (its cuobjdump) is not installed")
    compiled = triton.compile(ASTSource(fn, signature, constexprs=constexprs), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([str(cuobjdump), "-res-usage", str(cubin)], capture_output=True, text=True,
                               check=True).stdout
    fields = dict(part.split(":", 1) for part in usage.split() if ":" in part and part.split(":", 1)[1].isdigit())
    return {"registers": int(fields["REG"]), "stack": int(fields["STACK"]), "local": int(fields.get("LOCAL", 0))}
