"""Top CPU costs from py-spy's raw (collapsed) stacks: self time per file:function, inclusive time per
package and per project function.

Record a service while `erpilot bench` loads it (py-spy installs from a wheel: ``pip install py-spy``):

    py-spy record --pid <service pid> --duration 30 --rate 100 --nonblocking --format raw -o agent.txt
    python benchmarks/pyspy_top.py agent.txt [erp.txt ...] [--top 15]

py-spy leaves idle threads out by default, so the samples approximate CPU time. Shares are of all
samples of that file.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
PROJECT = ("erpilot", "erpilot_agent", "erpilot_approval", "erpilot_erp", "erpilot_gateway", "erpilot_platform",
           "erpilot_contracts")


def parse(text: str) -> list[tuple[list[tuple[str, str]], int]]:
    """[(frames root→leaf as (file, function), samples)] from py-spy's raw output."""
    out = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = []
        for part in stack.split(";"):
            match = FRAME.match(part.strip())
            if match:
                frames.append((match["file"], match["func"]))
        if frames:
            out.append((frames, int(count)))
    return out


def package(file: str) -> str:
    """The top-level package of a frame's file (py-spy shows paths below site-packages / the stdlib)."""
    head = file.split("/", 1)[0]
    return head.removesuffix(".py") if head else file


def top(stacks: list[tuple[list[tuple[str, str]], int]], n: int) -> dict[str, list[tuple[str, float]]]:
    total = sum(count for _, count in stacks) or 1
    leaf: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    project: Counter[str] = Counter()
    for frames, count in stacks:
        file, func = frames[-1]
        leaf[f"{file}:{func}"] += count
        for name in {package(f) for f, _ in frames}:
            packages[name] += count
        for name in {f"{f}:{fn}" for f, fn in frames if package(f) in PROJECT and package(f) != "erpilot"}:
            project[name] += count

    def share(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(name, round(c / total, 3)) for name, c in counter.most_common(n)]

    return {"self": share(leaf), "inclusive_by_package": share(packages), "inclusive_project": share(project)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    for path in args.files:
        stacks = parse(path.read_text())
        print(f"## {path.stem}: {sum(c for _, c in stacks)} samples")
        for section, rows in top(stacks, args.top).items():
            print(f"### {section}")
            for name, fraction in rows:
                print(f"{fraction * 100:5.1f}%  {name}")


if __name__ == "__main__":
    main()
