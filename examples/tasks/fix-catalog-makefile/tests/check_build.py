"""Exercise the agent's Makefile on a fresh copy of the sources and compare with a reference build."""

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MAKEFILE = Path("/app/catalog/Makefile")
PRISTINE = Path("/tests/catalog_src")


def expected(project: Path) -> tuple[dict, str]:
    parts = []
    index = []
    for csv_path in sorted((project / "src/parts").glob("*.csv")):
        with csv_path.open(newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                parts.append({
                    "sku": r["sku"],
                    "name": r["name"],
                    "category": csv_path.stem,
                    "price_cents": int(r["price_cents"]),
                    "qty": int(r["qty"]),
                })
                index.append(f"{r['sku']}\t{r['name']}\n".encode())
    parts.sort(key=lambda r: r["sku"])
    catalog = {
        "count": len(parts),
        "total_value_cents": sum(r["price_cents"] * r["qty"] for r in parts),
        "parts": parts,
    }
    return catalog, b"".join(sorted(index)).decode()


def make(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C", "HOME": "/root"}
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=60, check=False,
    )


def outputs_match(project: Path, step: str) -> list[str]:
    want_catalog, want_index = expected(project)
    problems = []
    try:
        got = json.loads((project / "build/catalog.json").read_text(encoding="utf-8"))
        if got != want_catalog:
            problems.append(f"{step}: build/catalog.json differs from the expected catalog")
    except (OSError, ValueError) as exc:
        problems.append(f"{step}: build/catalog.json unreadable: {exc}")
    try:
        if (project / "build/index.txt").read_text(encoding="utf-8") != want_index:
            problems.append(f"{step}: build/index.txt differs from the expected index")
    except OSError as exc:
        problems.append(f"{step}: build/index.txt unreadable: {exc}")
    for csv_path in (project / "src/parts").glob("*.csv"):
        if not (project / "build/parts" / (csv_path.stem + ".json")).is_file():
            problems.append(f"{step}: build/parts/{csv_path.stem}.json was not built")
    return problems


def step_make(project: Path, step: str, *args: str) -> list[str]:
    proc = make(project, *args)
    if proc.returncode != 0:
        return [f"{step}: make {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-300:]}"]
    return outputs_match(project, step)


def touch_later(path: Path) -> None:
    # Filesystems with coarse timestamps must still see the edit as newer than the outputs.
    later = time.time() + 2
    os.utime(path, (later, later))


def run_checks(project: Path) -> list[str]:
    problems = step_make(project, "clean build")
    if problems:
        return problems
    proc = make(project)
    ran = [line for line in proc.stdout.splitlines() if "python3" in line or "awk" in line or "mkdir" in line]
    if proc.returncode != 0 or ran:
        return [f"second make with nothing changed ran commands: {ran[:3]} (exit {proc.returncode})"]

    nuts = project / "src/parts/nuts.csv"
    nuts.write_text(nuts.read_text(encoding="utf-8") + "N-M10,flange nut M10,27,240\n", encoding="utf-8")
    touch_later(nuts)
    problems = step_make(project, "after editing nuts.csv")
    if problems:
        return problems

    springs = project / "src/parts/springs.csv"
    springs.write_text("sku,name,price_cents,qty\nS-C12,compression spring 12mm,44,90\n", encoding="utf-8")
    touch_later(springs)
    problems = step_make(project, "after adding springs.csv")
    if problems:
        return problems

    proc = make(project, "clean")
    if proc.returncode != 0 or (project / "build").exists():
        return ["make clean did not remove build/"]
    return step_make(project, "parallel clean build", "-j4")


def main() -> int:
    if not MAKEFILE.is_file():
        print(f"FAIL: {MAKEFILE} does not exist")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "catalog"
        shutil.copytree(PRISTINE, project)
        shutil.copy(MAKEFILE, project / "Makefile")
        problems = run_checks(project)
    for p in problems:
        print("FAIL:", p)
    print("PASS" if not problems else "build checks failed")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
