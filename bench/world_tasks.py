"""How Bandpass fares on the world's tasks: public Harbor and Terminal-Bench 1 task folders, measured against
Harbor 0.25's own loader (from ``.venv-harbor``).

    .venv/bin/python bench/world_tasks.py [ROOT] [--json OUT]

ROOT (default ``/work/world/tasks``) holds one folder per repository. For every task folder (``task.toml``
or ``task.yaml``) it asks Harbor — its loader for Harbor-format folders, its ``harbor task migrate`` mapper
then its loader for Terminal-Bench 1 ones — and imports the folder into a fresh Bandpass workspace. It
prints, per repository, how many tasks Harbor accepts, how many of *those* Bandpass imports (the parity
figure, ≥ 95% required), every refusal among them as its one line, what Bandpass imported with
``unsupported`` features, and the most frequent warnings. Not a speed benchmark: the wall time is printed
for reference only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bandpass.engine.core.workspace import Workspace  # noqa: E402 - imported after the sys.path set-up above
from bandpass.engine.tasks.importer import import_one  # noqa: E402 - imported after the sys.path set-up above

HARBOR_PY = REPO / ".venv-harbor" / "bin" / "python"
HARBOR_REF = REPO / "tests" / "support" / "harbor_ref.py"


def task_dirs(root: Path) -> list[Path]:
    """Every folder holding a task marker (nested ones too: Harbor's measure counts them)."""
    markers = [p for name in ("task.toml", "task.yaml") for p in root.rglob(name)]
    found = {p.parent for p in markers if ".git" not in p.parts}
    return sorted(found)


def repo_of(d: Path, root: Path) -> str:
    return d.relative_to(root).parts[0]


def harbor_reference(dirs: list[Path], tmp: Path) -> dict[Path, str]:
    res = subprocess.run(
        [str(HARBOR_PY), str(HARBOR_REF), "reference", str(tmp)],
        input="\n".join(map(str, dirs)),
        capture_output=True,
        text=True,
        check=True,
    )
    return {Path(k): v for k, v in json.loads(res.stdout).items()}


def _kind(line: str) -> str:
    """A warning's kind: its file and field, values dropped, so counts group alike warnings."""
    parts = line.split(": ")
    return ": ".join(parts[:2]) if len(parts) > 2 else parts[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default="/work/world/tasks")
    ap.add_argument("--json", type=Path, help="write every folder's two verdicts here")
    args = ap.parse_args()
    root = Path(args.root).resolve()
    if not HARBOR_PY.is_file():
        print(f"{HARBOR_PY} is missing: bash scripts/setup-harbor.sh", file=sys.stderr)
        return 1
    dirs = task_dirs(root)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bandpass-world-") as tmp:
        harbor = harbor_reference(dirs, Path(tmp) / "migrated")
        t_harbor = time.monotonic() - started
        ws = Workspace.open(Path(tmp) / "ws")
        rows = []
        for d in dirs:
            item = import_one(ws, d)
            rows.append(
                {
                    "dir": str(d),
                    "repo": repo_of(d, root),
                    "harbor": harbor[d],
                    "status": item.status,
                    "problems": item.problems,
                    "warnings": item.warnings,
                    "unsupported": item.unsupported,
                }
            )
    wall = time.monotonic() - started

    by_repo: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_repo[r["repo"]].append(r)
    imported = ("new", "new_version", "unchanged")
    total_acc = total_imp = 0
    head = ("repository", "folders", "Harbor ok", "imported", "of those", "unsupp.")
    print(f"{head[0]:<28} {head[1]:>7} {head[2]:>9} {head[3]:>8} {head[4]:>8} {head[5]:>7}")
    refusals: list[str] = []
    for repo, rs in sorted(by_repo.items()):
        acc = [r for r in rs if r["harbor"] == "ok"]
        imp = [r for r in acc if r["status"] in imported]
        total_acc += len(acc)
        total_imp += len(imp)
        unsup = sum(1 for r in rs if r["status"] in imported and r["unsupported"])
        pct = f"{100 * len(imp) / len(acc):.1f}%" if acc else "-"
        n_imp = sum(1 for r in rs if r["status"] in imported)
        print(f"{repo:<28} {len(rs):>7} {len(acc):>9} {n_imp:>8} {pct:>8} {unsup:>7}")
        for r in acc:
            if r["status"] not in imported:
                refusals.append(f"{Path(r['dir']).relative_to(root)}: {r['status']}: {r['problems'][0]}")
    pct = 100 * total_imp / total_acc if total_acc else 0.0
    print(f"{'all':<28} {len(rows):>7} {total_acc:>9} {'':>8} {pct:>7.1f}%")
    print(f"\nHarbor accepts {total_acc} folders; Bandpass imports {total_imp} of them ({pct:.1f}%).")
    print(f"Refused by Bandpass although Harbor accepts them ({len(refusals)}), one line each:")
    for line in refusals:
        print(f"  {line}")
    extra = [r for r in rows if r["harbor"] != "ok" and r["status"] in imported]
    print(f"\nImported by Bandpass although Harbor refuses them: {len(extra)}")
    for why, n in Counter(r["harbor"].split(":")[0] for r in extra).most_common(5):
        print(f"  {n:>5} {why}")
    unsup = Counter(_kind(u) for r in rows for u in r["unsupported"])
    print("\nUnsupported (imported; the audit says it could not audit them):")
    for kind, n in unsup.most_common():
        print(f"  {n:>5} {kind}")
    warns = Counter(_kind(w) for r in rows for w in r["warnings"])
    print("\nMost frequent warnings:")
    for kind, n in warns.most_common(12):
        print(f"  {n:>5} {kind}")
    print(f"\nwall {wall:.1f} s (Harbor's reference {t_harbor:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
