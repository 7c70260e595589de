"""benchmarks/pull.md and charts/pull.png, made from every results/pull-*.json that
`kerasenv bench-pull` wrote: per image, gzip against zstd, side by side."""

from __future__ import annotations

import json
from pathlib import Path

from .pull import KIND

CHART = "pull.png"


def load(results_dir: Path) -> list[dict]:
    docs = []
    for path in sorted(Path(results_dir).glob("pull-*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if doc.get("kind") == KIND:
            docs.append(doc)
    return docs


def chart(docs: list[dict], path: Path) -> bool:
    if not docs:
        return False
    from .report import _plt

    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 0.9 * len(docs) + 2.6), dpi=110)
    colors = {"gzip": "#8c8c8c", "zstd": "#4c72b0"}
    for ax, key, xlabel in ((left, "pull_s", "cold pull, s (median)"),
                            (right, "compressed_bytes", "compressed size, GB")):
        for i, doc in enumerate(docs):
            for j, c in enumerate(("gzip", "zstd")):
                s = doc["median"].get(c)
                if not s:
                    continue
                value = s[key] / (1e9 if key == "compressed_bytes" else 1)
                y = i + (j - 0.5) * 0.38
                ax.barh(y, value, height=0.36, color=colors[c], label=c if i == 0 else None)
                ax.annotate(f"{value:.1f}" + (" s" if key == "pull_s" else " GB"), (value, y), textcoords="offset points",
                            xytext=(3, -3), fontsize=8)
        ax.set_yticks(range(len(docs)))
        ax.set_yticklabels([d["variant"] + (f"\n({_name(d)})" if _name(d) else "") for d in docs], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(xlabel)
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Cold pull into an empty engine, gzip vs zstd: {docs[0]['engine']}\n"
                 f"registry on loopback (no network): decompression and disk", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def markdown(docs: list[dict], charted: bool) -> str:
    L = ["# Pull to first step (`kerasenv bench-pull`)", "",
         "GENERATED from `benchmarks/results/pull-*.json` by `kerasenv bench-pull` / `kerasenv bench-report`.",
         "Each image goes to a throwaway registry on 127.0.0.1 (gzip by `docker push`, zstd by skopeo), then into",
         "an empty, throwaway containerd (`ctr image pull`: fetch and unpack), then its default command runs there",
         "(`ctr run`: the smoke training) to its verdict. Loopback, so no network: decompression and disk.", ""]
    if not docs:
        return "\n".join(L + ["No results yet: run `sudo .venv/bin/kerasenv bench-pull ID`.", ""])
    if charted:
        L += [f"![cold pull, gzip vs zstd](charts/{CHART})", ""]
    L += ["| image | uncompressed | compression | compressed | layers (largest) | push | cold pull | default command "
          "(first step) | verdict | rounds | engine | measured |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for doc in docs:
        for c, s in doc["median"].items():
            img = doc["images"][c]
            level = f" (level {doc['zstd_level']})" if c == "zstd" else ""
            runs = [r for r in doc["runs"] if r["compression"] == c]
            verdicts = sorted({r["verdict"] for r in runs})
            step = "-" if s["first_step_s"] is None else f"{s['first_step_s']:.1f} s"
            L.append(f"| `{doc['variant']}`{' (' + _name(doc) + ')' if _name(doc) else ''} | {doc['uncompressed_bytes'] / 1e9:.2f} GB | {c}{level} | "
                     f"{s['compressed_bytes'] / 1e9:.2f} GB | {img['layers']} ({img['largest_layer_bytes'] / 1e9:.2f} GB) | "
                     f"{s['push_s']:.0f} s | {s['pull_s']:.1f} s | {s['first_run_s']:.1f} s ({step}) | "
                     f"{', '.join(verdicts)} | {len(runs)} | {doc['engine']} | {doc['created_at'][:10]} |")
    L += ["", "zstd against gzip, same image, same engine:", ""]
    for doc in docs:
        r = doc.get("zstd_vs_gzip")
        if r:
            L.append(f"- `{doc['variant']}`{' (' + _name(doc) + ')' if _name(doc) else ''}: cold pull **{r['pull_s']:.2f}x**, bytes {r['compressed_bytes']:.2f}x "
                     f"({doc['host']['cpus']} CPUs)")
    return "\n".join(L + [""])


def generate(root: Path) -> dict[str, Path]:
    root = Path(root)
    docs = load(root / "results")
    charts = root / "charts"
    charts.mkdir(parents=True, exist_ok=True)
    charted = chart(docs, charts / CHART)
    if not charted and (charts / CHART).exists():
        (charts / CHART).unlink()
    out = root / "pull.md"
    out.write_text(markdown(docs, charted))
    return {"pull": out, **({CHART: charts / CHART} if charted else {})}


def _name(doc: dict) -> str:
    """What tells a result apart from the variant's own amd64 one: its label, its platform (the arm64
    image, whose default command ran under qemu on an amd64 host: those times are the emulator's)."""
    parts = [doc["label"]] if doc.get("label") else []
    if doc.get("platform", "linux/amd64") != "linux/amd64":
        parts.append(doc["platform"].split("/")[1] + ("; default command under qemu" if doc.get("emulated") else ""))
    return ", ".join(parts)
