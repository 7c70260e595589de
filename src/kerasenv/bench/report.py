"""The benchmark report: `<DIR>/report.md` and `<DIR>/charts/*.png`, generated from
every `<DIR>/results/bench-*.json` (written by `kerasenv bench`) and
`<DIR>/results/sizes.json` (written by `kerasenv size --json`).

It shows only what those files hold. Where no GPU was measured, the GPU charts are not
drawn and the report says which targets are therefore "not measured".
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

# Published sizes of other images (uncompressed), with where each number comes from.
ANCHORS = (
    {"name": "tensorflow/tensorflow GPU (official)", "kind": "gpu", "gb": 6.6, "low_gb": 6.52, "high_gb": 6.63,
     "source": "tensorflow/tensorflow PR #59682 (2023): `gpu.Dockerfile` 6.63 GB -> 6.52 GB "
               "(https://github.com/tensorflow/tensorflow/pull/59682); \"about 6.6 GB\" in "
               "shared/reference/anchors.md section 1.1"},
    {"name": "tensorflow/tensorflow CPU (official)", "kind": "cpu", "gb": 2.1, "low_gb": 1.76, "high_gb": 2.1,
     "source": "same PR: `cpu.Dockerfile` 2.07 GB -> 1.76 GB; \"about 2.1 GB\" for the published image in "
               "shared/reference/anchors.md section 1.1"},
    {"name": "AWS Deep Learning Container, TF GPU (EC2, TF 2.18)", "kind": "gpu", "gb": 9.307,
     "low_gb": 9.307, "high_gb": 9.307,
     "source": "aws/deep-learning-containers `image_size_baseline` for the TF 2.18 EC2 images: GPU 9,307 MB, "
               "CPU 4,489 MB (shared/reference/anchors.md section 1.3)"},
)
TARGETS = {"gpu_cpu_speedup": 10.0, "mixed_precision_speedup": 1.5, "gpu_utilization": 90.0}
CHART_NAMES = ("throughput-conv.png", "throughput-mlp.png", "gpu-cpu-speedup.png",
               "mixed-precision-speedup.png", "image-sizes.png")
PARTS = ("base", "python", "cuda", "framework", "kerasenv")
PART_LABEL = {"base": "base (Debian)", "python": "Python (apt)", "cuda": "CUDA stack",
              "framework": "framework venv", "kerasenv": "ours"}


# --- loading -----------------------------------------------------------------------------

def load_results(results_dir: Path) -> tuple[list[dict], list[str]]:
    docs, problems = [], []
    for path in sorted(Path(results_dir).glob("bench-*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{path.name}: unreadable ({exc})")
            continue
        if doc.get("kind") != "kerasenv-bench" or not isinstance(doc.get("results"), list):
            problems.append(f"{path.name}: not a kerasenv bench result")
            continue
        doc["_file"] = path.name
        docs.append(doc)
    return docs, problems


def load_sizes(results_dir: Path) -> dict | None:
    path = Path(results_dir) / "sizes.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# --- tables of numbers --------------------------------------------------------------------

def device_label(doc: dict, with_variant: bool = False) -> str:
    d = doc.get("device") or {}
    if d.get("kind") == "gpu":
        label = f"{d.get('id', 'gpu').upper()} {d.get('name') or 'GPU'}"
        if d.get("compute_capability"):
            label += f" (cc {d['compute_capability']})"
    else:
        cores = d.get("cores") or (doc.get("host") or {}).get("cpu_cores")
        label = f"CPU {d.get('name') or (doc.get('host') or {}).get('cpu_model') or ''}".rstrip()
        if cores:
            label += f" ({cores} cores)"
    return f"{label} [{doc.get('variant')}]" if with_variant else label


def rows(docs: list[dict]) -> list[dict]:
    many_variants = len({d.get("variant") for d in docs}) > 1
    out = []
    for doc in docs:
        d = doc.get("device") or {}
        for r in doc["results"]:
            gpu = r.get("gpu") or {}
            out.append({
                "file": doc.get("_file"), "variant": doc.get("variant"), "device_id": d.get("id"),
                "kind": d.get("kind"), "device": device_label(doc, many_variants),
                "compute_capability": d.get("compute_capability"),
                "model": r.get("model"), "batch_size": r.get("batch_size"), "jit": r.get("jit"),
                "precision": r.get("precision"), "status": r.get("status"), "reason": r.get("reason"),
                "samples_per_second": r.get("samples_per_second") if r.get("status") == "ok" else None,
                "time_to_first_step_s": r.get("time_to_first_step_s") if r.get("status") == "ok" else None,
                "gpu_util": gpu.get("utilization_gpu_mean"), "gpu_samples": gpu.get("samples"),
                "gpu_memory_mib": gpu.get("memory_used_mib_max"),
            })
    return out


def _ok(rs):
    return [r for r in rs if r["status"] == "ok" and r["samples_per_second"]]


def _best(rs, **match):
    """The fastest ok row matching all fields (any jit unless given)."""
    hits = [r for r in _ok(rs) if all(r[k] == v for k, v in match.items())]
    return max(hits, key=lambda r: r["samples_per_second"]) if hits else None


def gpu_cpu_speedups(rs: list[dict]) -> list[dict]:
    """GPU samples/s over CPU samples/s, same model and batch size, both float32 (precision
    off), each at its faster jit setting; CPU results of the same image preferred."""
    out = []
    for g in sorted({(r["variant"], r["device_id"], r["device"]) for r in _ok(rs) if r["kind"] == "gpu"}):
        variant, gid, glabel = g
        for model in sorted({r["model"] for r in rs}):
            for batch in sorted({r["batch_size"] for r in rs}):
                gpu = _best(rs, device_id=gid, variant=variant, model=model, batch_size=batch, precision="off")
                cpu = (_best(rs, kind="cpu", variant=variant, model=model, batch_size=batch, precision="off")
                       or _best(rs, kind="cpu", model=model, batch_size=batch, precision="off"))
                if gpu and cpu:
                    out.append({"gpu": glabel, "gpu_id": gid.upper(), "cpu": cpu["device"], "model": model,
                                "batch_size": batch,
                                "gpu_sps": gpu["samples_per_second"], "cpu_sps": cpu["samples_per_second"],
                                "speedup": gpu["samples_per_second"] / cpu["samples_per_second"],
                                "gpu_jit": gpu["jit"], "cpu_jit": cpu["jit"]})
    return out


def mixed_precision_speedups(rs: list[dict]) -> list[dict]:
    """Mixed precision over float32 on the same device, model, batch size and jit setting."""
    out = []
    for r in _ok(rs):
        if r["precision"] == "off":
            continue
        base = _best(rs, variant=r["variant"], device_id=r["device_id"], model=r["model"],
                     batch_size=r["batch_size"], jit=r["jit"], precision="off")
        if base:
            out.append({"device": r["device"], "device_id": (r["device_id"] or "").upper(), "kind": r["kind"],
                        "compute_capability": r["compute_capability"],
                        "model": r["model"], "batch_size": r["batch_size"], "jit": r["jit"],
                        "precision": r["precision"], "sps": r["samples_per_second"],
                        "base_sps": base["samples_per_second"], "speedup": r["samples_per_second"] / base["samples_per_second"]})
    return out


def _cc_at_least(cc, minimum: tuple[int, int]) -> bool:
    try:
        major, minor = (int(x) for x in str(cc).split("."))
    except (TypeError, ValueError):
        return False
    return (major, minor) >= minimum


def targets(rs: list[dict]) -> list[dict]:
    """The issue's GPU targets, each measured (met / not met) or "not measured"."""
    has_gpu = any(r["kind"] == "gpu" for r in _ok(rs))
    no_gpu = "not measured: no GPU result in results/"
    out = []
    speed = [s for s in gpu_cpu_speedups(rs) if s["model"] == "conv"]
    if speed:
        largest = max(s["batch_size"] for s in speed)
        at = [s for s in speed if s["batch_size"] == largest]
        worst = min(at, key=lambda s: s["speedup"])
        out.append({"target": f"GPU vs CPU speedup, conv net >= {TARGETS['gpu_cpu_speedup']:.0f}x",
                    "value": f"{worst['speedup']:.1f}x ({worst['gpu']} vs {worst['cpu']}, batch {largest})",
                    "status": "met" if worst["speedup"] >= TARGETS["gpu_cpu_speedup"] else "not met"})
    else:
        out.append({"target": f"GPU vs CPU speedup, conv net >= {TARGETS['gpu_cpu_speedup']:.0f}x",
                    "value": no_gpu if not has_gpu else "not measured: no CPU result to compare with",
                    "status": "not measured"})
    mixed = [m for m in mixed_precision_speedups(rs) if m["kind"] == "gpu" and m["precision"] == "float16"
             and _cc_at_least(m["compute_capability"], (7, 0)) and m["model"] == "conv"]
    if mixed:
        largest = max(m["batch_size"] for m in mixed)
        best = max((m for m in mixed if m["batch_size"] == largest), key=lambda m: m["speedup"])
        out.append({"target": f"mixed-precision speedup on tensor-core GPUs >= {TARGETS['mixed_precision_speedup']}x",
                    "value": f"{best['speedup']:.2f}x ({best['device']}, conv, batch {largest}, jit {best['jit']}, float16)",
                    "status": "met" if best["speedup"] >= TARGETS["mixed_precision_speedup"] else "not met"})
    else:
        out.append({"target": f"mixed-precision speedup on tensor-core GPUs >= {TARGETS['mixed_precision_speedup']}x",
                    "value": no_gpu if not has_gpu else "not measured: no float16 result on a GPU with compute capability >= 7.0",
                    "status": "not measured"})
    gpu_rows = [r for r in _ok(rs) if r["kind"] == "gpu" and r["gpu_util"] is not None]
    if gpu_rows:
        worst_value, details = None, []
        for dev in sorted({r["device"] for r in gpu_rows}):
            mine = [r for r in gpu_rows if r["device"] == dev]
            largest = max(r["batch_size"] for r in mine)
            best = max((r for r in mine if r["batch_size"] == largest), key=lambda r: r["gpu_util"])
            details.append(f"{dev}: {best['gpu_util']:.0f}% ({best['model']}, batch {largest}, jit {best['jit']}, "
                           f"{best['precision']}, {best['gpu_samples']} samples)")
            worst_value = best["gpu_util"] if worst_value is None else min(worst_value, best["gpu_util"])
        out.append({"target": f"steady-state GPU utilisation at the largest batch >= {TARGETS['gpu_utilization']:.0f}%",
                    "value": "; ".join(details),
                    "status": "met" if worst_value >= TARGETS["gpu_utilization"] else "not met"})
    else:
        out.append({"target": f"steady-state GPU utilisation at the largest batch >= {TARGETS['gpu_utilization']:.0f}%",
                    "value": no_gpu if not has_gpu else "not measured: nvidia-smi sampling gave no value",
                    "status": "not measured"})
    return out


# --- charts ---------------------------------------------------------------------------

def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def throughput_chart(rs: list[dict], model: str, path: Path) -> bool:
    series: dict[str, list[tuple[int, float]]] = {}
    for r in _ok(rs):
        if r["model"] == model:
            key = f"{r['device']}, jit {r['jit']}, {'float32' if r['precision'] == 'off' else r['precision']}"
            series.setdefault(key, []).append((r["batch_size"], r["samples_per_second"]))
    if not series:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.5, 5), dpi=110)
    markers = "os^Dv<>ph"
    top = {}  # the highest value at each batch size gets its label above the point, the others below
    for points in series.values():
        for x, y in points:
            top[x] = max(top.get(x, y), y)
    for i, (key, points) in enumerate(sorted(series.items())):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=markers[i % len(markers)], label=key)
        for x, y in points:
            ax.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=(0, 6 if y == top[x] else -13),
                        ha="center", fontsize=7)
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log", base=2)
    values = [p[1] for pts in series.values() for p in pts]
    log_y = max(values) / min(values) > 8
    if log_y:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax.set_ylim(0, max(values) * 1.15)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}"))
    batches = sorted({p[0] for pts in series.values() for p in pts})
    ax.set_xticks(batches)
    ax.set_xticklabels([str(b) for b in batches])
    ax.set_xlabel("batch size")
    ax.set_ylabel("training samples/s (steady state" + (", log scale)" if log_y else ")"))
    ax.set_title(f"{model}: training throughput by batch size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def _bar_chart(labels: list[str], values: list[float], title: str, ylabel: str, target: float | None,
               path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(labels) + 2), 5.2), dpi=110)
    bars = ax.bar(range(len(values)), values, color="#4c72b0")
    for bar, value in zip(bars, values):
        ax.annotate(f"{value:.2f}x" if value < 10 else f"{value:.0f}x", (bar.get_x() + bar.get_width() / 2, value),
                    textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    if target:
        ax.axhline(target, color="#c44e52", linestyle="--", linewidth=1, label=f"target {target:g}x")
        ax.legend(fontsize=8)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30 if len(labels) > 6 else 0, ha="right" if len(labels) > 6 else "center",
                       fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def size_chart(sizes: dict | None, path: Path) -> bool:
    plt = _plt()
    images = (sizes or {}).get("images") or []
    labels, stacks, budgets = [], [], []
    for img in images:
        labels.append(img["ref"])
        stacks.append([img.get("parts", {}).get(p, 0) / 1e9 for p in PARTS])
        budgets.append(img.get("budget_bytes") / 1e9 if img.get("budget_bytes") else None)
    anchor_labels = [a["name"] for a in ANCHORS]
    all_labels = labels + anchor_labels
    fig, ax = plt.subplots(figsize=(11, 0.55 * len(all_labels) + 1.8), dpi=110)
    colors = ["#8c8c8c", "#64b5cd", "#55a868", "#4c72b0", "#dd8452"]
    for i, stack in enumerate(stacks):
        left = 0.0
        for j, part in enumerate(stack):
            ax.barh(i, part, left=left, color=colors[j], label=PART_LABEL[PARTS[j]] if i == 0 else None)
            left += part
        ax.annotate(f"{left:.2f} GB", (max(left, budgets[i] or 0), i), textcoords="offset points", xytext=(5, -3),
                    fontsize=8)
        if budgets[i]:
            ax.plot([budgets[i], budgets[i]], [i - 0.4, i + 0.4], color="#c44e52", linewidth=2,
                    label="budget (images/matrix.toml)" if i == 0 else None)
    for k, a in enumerate(ANCHORS):
        y = len(stacks) + k
        ax.barh(y, a["gb"], color="#d0d0d0", edgecolor="#707070", hatch="//",
                label="published size of another image" if k == 0 else None)
        if a["low_gb"] != a["high_gb"]:
            ax.plot([a["low_gb"], a["high_gb"]], [y, y], color="#404040", linewidth=2)
        ax.annotate(f"{a['gb']:.1f} GB" if a["low_gb"] == a["high_gb"] else f"{a['low_gb']:.2f}-{a['high_gb']:.2f} GB",
                    (a["gb"], y), textcoords="offset points", xytext=(4, -3), fontsize=8)
    ax.set_yticks(range(len(all_labels)))
    ax.set_yticklabels(all_labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("uncompressed size, GB (decimal)")
    title = "Image sizes: kerasenv by part vs. published images"
    if not images:
        title += "\n(no kerasenv sizes measured: run `kerasenv size --json`)"
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    widest = max([sum(s) for s in stacks] + [b or 0 for b in budgets] + [a["high_gb"] for a in ANCHORS])
    ax.set_xlim(0, widest * 1.18)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


# --- markdown -----------------------------------------------------------------------------

def _fmt(value, spec: str, none: str = "-") -> str:
    return none if value is None or (isinstance(value, float) and not math.isfinite(value)) else format(value, spec)


def _mb(n) -> str:
    if not n:
        return "-"
    return f"{n / 1e6:,.0f} MB" if n >= 10e6 else f"{n / 1e6:.2f} MB"


def _gib(n) -> str:
    return f"{n / 2**30:.0f} GiB" if n else "-"


def markdown(docs: list[dict], rs: list[dict], sizes: dict | None, charts: dict[str, bool], problems: list[str]) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    L = ["# Benchmark report", "",
         f"Generated by `kerasenv bench-report` on {now} from {len(docs)} result file(s) in "
         "[`results/`](results/). Do not edit: rerun `make bench` (measure) or `make bench-report` (redraw).", ""]
    if problems:
        L += ["Skipped files: " + "; ".join(problems), ""]
    has_gpu = any(r["kind"] == "gpu" for r in _ok(rs))
    if not has_gpu:
        gpu_hosts = any((d.get("host") or {}).get("gpus") for d in docs)
        why = ("the GPU host's runs were CPU-only (`--gpus none`) or failed" if gpu_hosts
               else "every result comes from a machine without an NVIDIA GPU")
        L += [f"**No GPU was measured**: {why}. So there are no GPU figures, no GPU/CPU speedup and no GPU "
              "utilisation below, and the GPU targets are listed as *not measured*. Run `make bench` on a GPU host "
              "to fill them in.", ""]
    L += ["## Machines and images", "",
          "| result file | image | framework / Keras | device | host CPU | cores | memory | GPUs on host | measured | wall time |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for doc in docs:
        h, v = doc.get("host") or {}, doc.get("versions") or {}
        gpus = ", ".join(f"{g.get('index')}: {g.get('name')}" for g in h.get("gpus") or []) or "none"
        # Results from before the backends carry no versions.backend: they are TensorFlow's.
        backend = v.get("backend") or "tensorflow"
        L.append(f"| `{doc['_file']}` | `{(doc.get('image') or {}).get('ref')}` | {backend} {v.get(backend)} / {v.get('keras')} "
                 f"| {device_label(doc)} | {h.get('cpu_model') or '-'} | {h.get('cpu_cores') or '-'} "
                 f"| {_gib(h.get('memory_bytes'))} | {gpus} | {doc.get('created_at', '-')} "
                 f"| {_fmt(doc.get('wall_seconds'), '.0f')} s |")
    L += ["", "## GPU targets", "", "| target | measured | status |", "| --- | --- | --- |"]
    for t in targets(rs):
        L.append(f"| {t['target']} | {t['value']} | **{t['status']}** |")
    L += ["", "## Training throughput", ""]
    for model in ("conv", "mlp"):
        if charts.get(f"throughput-{model}.png"):
            L += [f"![{model}: samples/s by batch size](charts/throughput-{model}.png)", ""]
    models = {}
    for doc in docs:
        models.update(doc.get("models") or {})
    for name, text in sorted(models.items()):
        L.append(f"- `{name}`: {text}")
    L += ["", "| device | model | batch | jit | precision | samples/s | first step | GPU util (steady mean) | GPU memory max | status |",
          "| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    order = sorted(rs, key=lambda r: (r["variant"] or "", r["kind"] != "cpu", r["device_id"] or "", r["model"] or "",
                                       r["precision"] or "", r["jit"] or "", r["batch_size"] or 0))
    for r in order:
        util = _fmt(r["gpu_util"], ".0f") + "%" if r["gpu_util"] is not None else ("n/a (CPU)" if r["kind"] == "cpu" else "-")
        mem = f"{r['gpu_memory_mib']:.0f} MiB" if r["gpu_memory_mib"] is not None else "-"
        status = "ok" if r["status"] == "ok" else f"FAILED: {r['reason']}"
        precision = "float32" if r["precision"] == "off" else f"mixed {r['precision']}"
        L.append(f"| {r['device']} | {r['model']} | {r['batch_size']} | {r['jit']} | {precision} "
                 f"| {_fmt(r['samples_per_second'], ',.0f')} | {_fmt(r['time_to_first_step_s'], '.2f')} s "
                 f"| {util} | {mem} | {status} |")
    L += ["", "## GPU vs CPU speedup", ""]
    speed = gpu_cpu_speedups(rs)
    if speed:
        if charts.get("gpu-cpu-speedup.png"):
            L += ["![GPU/CPU speedup](charts/gpu-cpu-speedup.png)", ""]
        L += ["| GPU | CPU | model | batch | GPU samples/s | CPU samples/s | speedup |", "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
        for s in speed:
            L.append(f"| {s['gpu']} (jit {s['gpu_jit']}) | {s['cpu']} (jit {s['cpu_jit']}) | {s['model']} | {s['batch_size']} "
                     f"| {s['gpu_sps']:,.0f} | {s['cpu_sps']:,.0f} | {s['speedup']:.1f}x |")
    else:
        L.append("Not measured: there is no GPU result next to a CPU result in `results/`, so no speedup is shown "
                 "(no chart is drawn rather than an empty or made-up one).")
    L += ["", "## Mixed-precision speedup", ""]
    mixed = mixed_precision_speedups(rs)
    if mixed:
        if charts.get("mixed-precision-speedup.png"):
            L += ["![mixed-precision speedup](charts/mixed-precision-speedup.png)", ""]
        L += ["| device | model | batch | jit | precision | samples/s | float32 samples/s | speedup |",
              "| --- | --- | ---: | --- | --- | ---: | ---: | ---: |"]
        for m in mixed:
            L.append(f"| {m['device']} | {m['model']} | {m['batch_size']} | {m['jit']} | {m['precision']} "
                     f"| {m['sps']:,.0f} | {m['base_sps']:,.0f} | {m['speedup']:.2f}x |")
        if not any(m["kind"] == "gpu" for m in mixed):
            L += ["", "These are CPU figures only; the tensor-core (GPU) mixed-precision target is not measured."]
    else:
        L.append("Not measured: every result here is float32. On a GPU, `kerasenv bench` adds float16 "
                 "(compute capability >= 7.0) and bfloat16 (>= 8.0) by itself; on a CPU with native "
                 "bfloat16 (AMX-BF16 / AVX512-BF16) it adds bfloat16, elsewhere ask for "
                 "`--precision off,bfloat16`.")
    skipped = [(f"{(doc.get('device') or {}).get('kind', '?').upper()} {(doc.get('device') or {}).get('name') or ''}"
                .strip(), p, why)
               for doc in docs
               for p, why in (((doc.get("settings") or {}).get("container") or {})
                              .get("precisions_skipped") or {}).items()]
    if skipped:
        L += ["", "Precisions left out, and why:", ""]
        L += [f"- {device}: {p}: {why}" for device, p, why in skipped]
    L += ["", "## Image sizes", ""]
    if charts.get("image-sizes.png"):
        L += ["![image sizes](charts/image-sizes.png)", ""]
    images = (sizes or {}).get("images") or []
    if images:
        L += [f"Measured by `kerasenv size --json` on {(sizes or {}).get('created_at', '?')} (uncompressed, decimal GB).", "",
              "| image | total | budget | within budget | " + " | ".join(PART_LABEL[p] for p in PARTS) + " |",
              "| --- | ---: | ---: | --- | " + " | ".join("---:" for _ in PARTS) + " |"]
        for img in images:
            budget = f"{img['budget_bytes'] / 1e9:.2f} GB" if img.get("budget_bytes") else "-"
            within = "-" if img.get("within_budget") is None else ("yes" if img["within_budget"] else "**no**")
            parts = " | ".join(_mb(img.get("parts", {}).get(p)) for p in PARTS)
            L.append(f"| `{img['ref']}` | {img['total_bytes'] / 1e9:.2f} GB | {budget} | {within} | {parts} |")
        shared = (sizes or {}).get("shared") or []
        if shared:
            L += ["", "Bytes shared between images (identical layers, stored and pulled once):", ""]
            L += [f"- `{s['a']}` and `{s['b']}`: {s['bytes'] / 1e9:.2f} GB" for s in shared]
    else:
        L.append("No kerasenv sizes measured yet: `kerasenv size --json benchmarks/results/sizes.json` (`make bench` runs it).")
    L += ["", "Published sizes of other images, for comparison (uncompressed; `shared/reference/` is the project's "
          "shared reference folder, `../shared/reference/` from the repository root):", "",
          "| image | size | source |", "| --- | ---: | --- |"]
    for a in ANCHORS:
        size = f"{a['gb']:.1f} GB" if a["low_gb"] == a["high_gb"] else f"{a['low_gb']:.2f}-{a['high_gb']:.2f} GB (about {a['gb']:.1f} GB)"
        L.append(f"| {a['name']} | {size} | {a['source']} |")
    L += ["", "## How it is measured", "",
          "- One container per device, started by `kerasenv bench` from the project's image; the CPU run gets no GPU. "
          "It runs the image's own bench, `python -m kerasenv_image.bench`.",
          "- Synthetic data: one batch held in memory and repeated, so the figures are the training step, not an input pipeline.",
          "- Time to first step: model build + compile + the first `fit` step (tracing, XLA compilation with jit on).",
          "- Steady state: after the first step and the warm-up steps, at least `min_steps` timed steps and until the "
          "time box has passed; samples/s = timed steps x batch / their wall time. Each step waits for its loss, "
          "so asynchronous dispatch cannot inflate the figure.",
          "- GPU utilisation: `nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,memory.total "
          "--format=csv,noheader,nounits -lms 200 -i N` on the host; the mean of the samples inside each "
          "configuration's timed window, minus its first quarter (at most 1 s), because each utilisation sample "
          "averages the preceding 1/6-1 s.",
          "- A configuration that fails (e.g. out of memory at a large batch) is listed with its reason; the others still run.",
          ""]
    return "\n".join(L)


def generate(root: Path) -> dict[str, Path]:
    """Regenerate <root>/report.md and <root>/charts/*.png from <root>/results/."""
    root = Path(root)
    results_dir, charts_dir = root / "results", root / "charts"
    charts_dir.mkdir(parents=True, exist_ok=True)
    docs, problems = load_results(results_dir)
    sizes = load_sizes(results_dir)
    rs = rows(docs)
    made: dict[str, bool] = {}
    for model in ("conv", "mlp"):
        made[f"throughput-{model}.png"] = throughput_chart(rs, model, charts_dir / f"throughput-{model}.png")
    speed = gpu_cpu_speedups(rs)
    if speed:
        gpus = "; ".join(sorted({s["gpu"] for s in speed}))
        cpus = "; ".join(sorted({s["cpu"] for s in speed}))
        _bar_chart([f"{s['model']}, batch {s['batch_size']}\n{s['gpu_id']}" for s in speed], [s["speedup"] for s in speed],
                   f"GPU vs CPU training samples/s (float32, faster jit setting of each)\n{gpus}\nvs {cpus}",
                   "speedup (x)", TARGETS["gpu_cpu_speedup"], charts_dir / "gpu-cpu-speedup.png")
        made["gpu-cpu-speedup.png"] = True
    mixed = mixed_precision_speedups(rs)
    if mixed:
        devices = "; ".join(sorted({m["device"] for m in mixed}))
        _bar_chart([f"{m['model']}, batch {m['batch_size']}\njit {m['jit']}, {m['precision']}\n{m['device_id']}"
                    for m in mixed], [m["speedup"] for m in mixed],
                   f"Mixed precision vs float32, same device, model, batch and jit: samples/s ratio\n{devices}",
                   "speedup (x)",
                   TARGETS["mixed_precision_speedup"] if any(m["kind"] == "gpu" for m in mixed) else None,
                   charts_dir / "mixed-precision-speedup.png")
        made["mixed-precision-speedup.png"] = True
    made["image-sizes.png"] = size_chart(sizes, charts_dir / "image-sizes.png")
    for name in CHART_NAMES:  # a chart not drawn this time must not survive from an older run
        if not made.get(name) and (charts_dir / name).exists():
            (charts_dir / name).unlink()
    report = root / "report.md"
    tmp = report.with_name(report.name + ".tmp")
    tmp.write_text(markdown(docs, rs, sizes, made, problems))
    tmp.replace(report)
    written = {"report": report}
    written.update({name: charts_dir / name for name, ok in made.items() if ok})
    return written


# --- sizes.json (`kerasenv size --json`) ---------------------------------------------------

def sizes_document(variants, measured: dict, shared: list[tuple[str, str, int]]) -> dict:
    images = []
    for v in variants:
        m = measured[v.id]
        budget = v.size_budget_mb * 1_000_000 if v.size_budget_mb else None
        images.append({"id": v.id, "ref": v.image_ref, "family": v.family, "total_bytes": m.total,
                       "budget_bytes": budget, "within_budget": None if budget is None else m.total <= budget,
                       "parts": dict(m.parts)})
    return {"kind": "kerasenv-sizes", "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "units": "bytes, uncompressed (docker image size)", "images": images,
            "shared": [{"a": a, "b": b, "bytes": n} for a, b, n in shared], "anchors": list(ANCHORS)}
