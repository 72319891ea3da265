"""First-contact GPU checks for cn3's Triton kernels and compiled step (run by
``scripts/gpu_first_contact.sh``), each part under its own watchdog so that a hang (a spin barrier whose
programs are not co-resident) is reported instead of eating the lease.

    python3 scripts/gpu_first_contact.py OUT.json [--parts=B,C,D,E,F]             # GPU machine, repo root as cwd
    TRITON_INTERPRET=1 python scripts/gpu_first_contact.py OUT.json --cpu-smoke    # tiny sizes on the CPU

Parts (each writes OUT.json as it finishes, and every measured row as it is measured, so a later
timeout or watchdog loses nothing before it):
  A  environment: torch, triton, device, SMs, capability, TF32 flags
  B  ON-LSTM Triton scan (spin barrier, cooperative launch) against the plain scan and cuDNN nn.LSTM at the
     sizes `auto` gives it: max |diff| of outputs and gradients, ms fwd+bwd, grid, registers / spills
  C  a deliberately oversized cooperative grid: must raise (cooperative launch too large), not hang
  D  fused CN3 attention against the dense path, fp32 and bf16, d 300 e 100: first-call seconds
     (compile + autotune), ms, max |diff|, the autotuner's pick per key and its tuning seconds
  E  the fused op under torch.compile(mode="reduce-overhead"): warm-up, record, replay at two length
     buckets (autotuning must not run inside capture); gradients against eager; cudagraph skip counters
  F  the BiLSTM context (cn3.layers.context.BiLSTMContext, padded path) under the compiled step's settings
     (reduce-overhead, allow_rnn): compile seconds and graphs per length (its directions run eagerly,
     torch.compiler.disable: the graphs must not grow with the length) and ms against eager
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path

sys.path.insert(0, os.getcwd())
import torch  # noqa: E402

OUT = Path(sys.argv[1])
CPU_SMOKE = "--cpu-smoke" in sys.argv
PARTS = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--parts=")), "A,B,C,D,E,F").split(",")
DEV = torch.device("cpu" if CPU_SMOKE else "cuda")
REPORT: dict = {"parts": {}}


def save():
    OUT.write_text(json.dumps(REPORT, indent=1, default=str) + "\n")


def part(name: str, limit_s: float):
    """Decorator: run the part under a watchdog; record result / error / hang, and save."""
    def wrap(fn):
        if name not in PARTS:
            return fn
        print(f"== part {name} (watchdog {limit_s:.0f} s)", flush=True)
        began = time.time()

        def hang():
            REPORT["parts"][name] = {"status": "TIMEOUT (watchdog: a hang, or just too slow)",
                                     "seconds": round(time.time() - began, 1), "partial": REPORT.get("current")}
            save()
            print(f"!! part {name} still running after {limit_s} s: reported as TIMEOUT, exiting", flush=True)
            os._exit(3)
        timer = threading.Timer(limit_s, hang)
        timer.daemon = True
        timer.start()
        try:
            result = fn()
            REPORT["parts"][name] = {"status": "ok", "seconds": round(time.time() - began, 1), "result": result}
        except Exception as error:  # noqa: BLE001 - reported
            REPORT["parts"][name] = {"status": "error", "seconds": round(time.time() - began, 1),
                                     "error": f"{type(error).__name__}: {error}"[:2000],
                                     "trace": traceback.format_exc()[-3000:], "partial": REPORT.get("current")}
        finally:
            timer.cancel()
            REPORT.pop("current", None)
        print(json.dumps({name: REPORT["parts"][name]}, default=str)[:3000], flush=True)
        save()
        return fn
    return wrap


def progress(row: dict) -> None:
    """Keep a measured row in OUT.json at once (a watchdog or timeout later loses nothing before it)."""
    REPORT.setdefault("rows_so_far", []).append(row)
    save()


def sync():
    if DEV.type == "cuda":
        torch.cuda.synchronize()


def time_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        if DEV.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def kernel_usage(jit_fn) -> list[dict]:
    """Registers, spills, shared memory and launch options of every compiled variant of a @triton.jit."""
    out = []
    for cache in getattr(jit_fn, "device_caches", {}).values():
        for k in cache[0].values():
            try:
                k._init_handles()
                out.append({"regs": k.n_regs, "spills": k.n_spills, "shared": k.metadata.shared,
                            "warps": k.metadata.num_warps,
                            "coop": getattr(k.metadata, "launch_cooperative_grid", None)})
            except Exception as error:  # noqa: BLE001
                out.append({"error": str(error)[:200]})
    return out


@part("A", 20)
def env():
    import triton
    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__,
            "interpret": os.environ.get("TRITON_INTERPRET"), "threads": torch.get_num_threads()}
    if DEV.type == "cuda":
        p = torch.cuda.get_device_properties(0)
        info.update(device=p.name, sms=p.multi_processor_count, capability=f"{p.major}.{p.minor}",
                    mem_gib=round(p.total_memory / 2**30, 1), allow_tf32=torch.backends.cuda.matmul.allow_tf32)
    return info


def onlstm_case(b, n, hidden, padded, repeats):
    from cn3.layers import onlstm_triton as ol
    from cn3.layers.attention import padding_mask
    from cn3.layers.onlstm import ONLSTM
    REPORT["current"] = {"onlstm": [b, n, hidden, padded]}
    print(f"  onlstm B={b} N={n} H={hidden} padded={padded}", flush=True)
    torch.manual_seed(0)
    layer = ONLSTM(hidden, hidden, chunk_size=8).to(DEV)
    x = torch.randn(b, n, hidden, device=DEV, requires_grad=True)
    lengths = torch.randint(1, n + 1, (b,)) if padded else torch.full((b,), n)
    if padded and b > 1:
        lengths[0] = n
    mask = padding_mask(lengths, n).to(DEV)

    def run(kernel):
        layer.kernel = kernel
        layer.zero_grad(set_to_none=True)
        x.grad = None
        out, (h, c) = layer(x, mask)
        (out.square().sum() + h.sum() + c.sum()).backward()
        return [out.detach(), h.detach(), c.detach(), x.grad.clone()] + [p.grad.clone() for p in layer.parameters()]

    want = run("scan")
    t0 = time.time()
    got = run("triton")
    sync()
    first = time.time() - t0
    diff = max(float((g - w).abs().max()) for g, w in zip(got, want))
    scale = max(float(w.abs().max()) for w in want)
    grid = None if CPU_SMOKE else list(ol.plan(b, hidden, ol.FWD_TILE, DEV)[0])
    row = {"B": b, "N": n, "H": hidden, "padded": padded, "grid": grid, "first_call_s": round(first, 2),
           "max_abs_diff": diff, "max_abs_ref": scale}
    if DEV.type == "cuda":
        row["triton_ms"] = time_ms(lambda: run("triton"), repeats)
        row["scan_ms"] = time_ms(lambda: run("scan"), repeats)
        lstm = torch.nn.LSTM(hidden, hidden, batch_first=True).to(DEV)
        row["cudnn_lstm_ms"] = time_ms(lambda: lstm(x)[0].sum().backward(), repeats)
    print(f"    {row}", flush=True)
    progress(row)
    return row


@part("B", 55 if not CPU_SMOKE else 600)
def onlstm_barrier():
    cases = ([(3, 5, 16, True)] if CPU_SMOKE else
             [(20, 13, 96, True), (64, 25, 256, False), (32, 50, 512, True), (1, 50, 1024, False),
              (128, 30, 1024, True), (8, 200, 512, True)])
    rows = [onlstm_case(*c, repeats=5) for c in cases]
    from cn3.layers import onlstm_triton as ol
    return {"rows": rows, "fwd_kernels": kernel_usage(ol._onlstm_fwd), "bwd_kernels": kernel_usage(ol._onlstm_bwd)}


@part("C", 15)
def cooperative_too_large():
    if DEV.type != "cuda":
        return "skipped on the CPU"
    from cn3.layers import onlstm_triton as ol
    b, hidden, nc, n = 800, 1024, 128, 4  # 100 row blocks x 32 column programs = 3,200 programs
    pre = torch.randn(n, b, 2 * nc + 4 * hidden, device=DEV)
    wt = torch.randn(hidden, 2 * nc + 4 * hidden, device=DEV) * 0.01
    h0 = torch.zeros(b, hidden, device=DEV)
    REPORT["current"] = {"coop": "launching 3,200 cooperative programs"}
    try:
        with warnings.catch_warnings():  # the refused launch's fallback warning raised, to be seen here
            warnings.simplefilter("error", RuntimeWarning)
            ol.scan_forward(pre, wt, h0, h0.clone(), None, nc, False, columns=32)
        sync()
    except Exception as error:  # noqa: BLE001
        msg = f"{type(error).__name__}: {error}"
        ok = torch.cuda.is_available()
        torch.zeros(1, device=DEV).add_(1).item()  # the context survives
        return {"raised": msg[:500], "context_ok_after": ok}
    return {"raised": None, "note": "no error: the oversized grid ran (co-resident, or the flag was ignored)"}


@part("D", 65 if not CPU_SMOKE else 600)
def fused_vs_dense():
    from cn3.layers import DynamicGraphLayer
    from cn3.layers import fused_energy as fe
    shapes = [(2, 12)] if CPU_SMOKE else [(64, 20), (8, 200), (1, 1000)]
    d, e = (32, 16) if CPU_SMOKE else (300, 100)
    rows = []
    for b, n in shapes:
        for dtype in ([torch.float32] if CPU_SMOKE else [torch.float32, torch.bfloat16]):
            REPORT["current"] = {"fused": [b, n, str(dtype)]}
            torch.manual_seed(0)
            fused = DynamicGraphLayer(d, energy_dim=e, impl="fused").to(DEV)
            dense = DynamicGraphLayer(d, energy_dim=e, impl="dense").to(DEV)
            dense.load_state_dict(fused.state_dict())
            x = torch.randn(b, n, d, device=DEV, requires_grad=True)
            mask = torch.ones(b, n, dtype=torch.bool, device=DEV)
            if b > 1:  # one row padded after a third of its positions
                mask[1, n // 3:] = False

            def step(layer):
                def run():
                    layer.zero_grad(set_to_none=True)
                    x.grad = None
                    with torch.autocast(DEV.type, dtype=dtype, enabled=dtype != torch.float32):
                        out = layer(x, mask, need_alpha=False)[0]
                    out.float().sum().backward()
                    return out.float().detach()
                return run
            t0 = time.time()
            out_f = step(fused)()
            sync()
            first = time.time() - t0
            gx_f = x.grad.clone()
            out_d = step(dense)()
            gx_d = x.grad.clone()
            row = {"B": b, "N": n, "dtype": str(dtype).split(".")[-1], "first_call_s": round(first, 2),
                   "max_abs_diff_out": float((out_f - out_d).abs().max()),
                   "rel_diff_grad_x": float((gx_f - gx_d).norm() / gx_d.norm())}
            if DEV.type == "cuda":
                row["fused_ms"] = time_ms(step(fused), 10)
                row["dense_ms"] = time_ms(step(dense), 10)
            print(f"    {row}", flush=True)
            progress(row)
            rows.append(row)
    picks = {}
    for kernel in (fe._attn_fwd, fe._attn_bwd_kv, fe._attn_bwd_q):
        picks[getattr(getattr(kernel, "base_fn", None), "__name__", str(kernel))] = {
            "picks": {str(k): str(v) for k, v in getattr(kernel, "cache", {}).items()},
            "last_bench_s": getattr(kernel, "bench_time", None), "variants": kernel_usage(kernel.fn)}
    return {"rows": rows, "autotune": picks}


@part("E", 35 if not CPU_SMOKE else 600)
def fused_under_cudagraphs():
    from torch._dynamo.utils import counters

    from cn3.layers.fused_energy import fused_additive_attention
    torch._dynamo.reset()
    counters.clear()
    e, d = (16, 32) if CPU_SMOKE else (100, 300)
    u = torch.randn(e, device=DEV, requires_grad=True)

    def loss_fn(q, k, v, mask):
        return fused_additive_attention(q, k, u, v, mask, mask, need_alpha=False)[0].square().mean()

    mode = None if CPU_SMOKE else "reduce-overhead"
    compiled = torch.compile(loss_fn, mode=mode, backend="aot_eager" if CPU_SMOKE else "inductor", dynamic=False)
    rows = []
    for n in ((9,) if CPU_SMOKE else (37, 70)):  # length buckets 64 and 128: new autotune keys
        torch.manual_seed(n)
        q, k = (torch.randn(4, n, e, device=DEV, requires_grad=True) for _ in range(2))
        v = torch.randn(4, n, d, device=DEV, requires_grad=True)
        mask = torch.ones(4, n, dtype=torch.bool, device=DEV)
        mask[1, n // 2:] = False
        ref = loss_fn(q, k, v, mask)
        want = torch.autograd.grad(ref, [q, k, v, u])
        for call in range(2 if CPU_SMOKE else 4):  # warm-up, record, replay, replay (the interpreter: 7 s a call)
            REPORT["current"] = {"compiled": [n, call]}
            t0 = time.time()
            if DEV.type == "cuda":
                torch.compiler.cudagraph_mark_step_begin()
            out = compiled(q, k, v, mask)
            got = torch.autograd.grad(out, [q, k, v, u])
            sync()
            rows.append({"N": n, "call": call, "seconds": round(time.time() - t0, 2),
                         "loss_diff": float((out - ref).detach().abs()),
                         "grad_rel_diff": max(float((g - w).norm() / w.norm()) for g, w in zip(got, want))})
            print(f"    {rows[-1]}", flush=True)
            progress(rows[-1])
    return {"rows": rows, "counters": {k: dict(v) for k, v in counters.items()
                                       if k in ("inductor", "stats", "graph_break")}}


@part("F", 35 if not CPU_SMOKE else 600)
def lstm_under_compile():
    from torch._dynamo.utils import counters

    from cn3.layers.attention import padding_mask
    from cn3.layers.context import BiLSTMContext
    torch.manual_seed(0)
    context = BiLSTMContext(16 if CPU_SMOKE else 100, 8 if CPU_SMOKE else 150).to(DEV).train()
    rows = []
    for n in ((8, 32) if CPU_SMOKE else (8, 32, 128)):
        REPORT["current"] = {"lstm": n}
        torch._dynamo.reset()
        counters.clear()
        x = torch.randn(32, n, context.lstm.input_size, device=DEV, requires_grad=True)
        mask = padding_mask(torch.randint(1, n + 1, (32,)), n).to(DEV)

        def loss(x, mask):
            return context(x, mask).square().mean()
        fn = torch.compile(loss, mode=None if CPU_SMOKE else "reduce-overhead",
                           backend="aot_eager" if CPU_SMOKE else "inductor", dynamic=False)

        def step(f):
            def run():
                if f is fn and DEV.type == "cuda":
                    torch.compiler.cudagraph_mark_step_begin()
                with torch._dynamo.config.patch(allow_rnn=True):
                    out = f(x, mask)
                out.backward()
            return run
        t0 = time.time()
        step(fn)()
        sync()
        row = {"N": n, "first_call_s": round(time.time() - t0, 1),
               "graphs": counters["stats"]["unique_graphs"], "graph_breaks": sum(counters["graph_break"].values())}
        if DEV.type == "cuda":
            for _ in range(3):  # warm-up and CUDA-graph recording before timing
                step(fn)()
            row["compiled_ms"] = time_ms(step(fn), 10)
            row["eager_ms"] = time_ms(step(loss), 10)
        rows.append(row)
        print(f"    {row}", flush=True)
        progress(row)
    return rows


print(f"done: {OUT}", flush=True)
