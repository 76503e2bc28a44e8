"""How much of what TVM prints does the reader read?

    python bench/reader_coverage.py [--corpus FILE] [--json OUT] [--show N]

Parses every program of TVM 0.27's own schedule tests (``bench/data/tvm_schedule_programs.json.gz``,
made by ``bench/_tvm_reader_corpus.py``) with ``wb.parse``, checks that what parses prints and
parses back to a structurally equal function, and lists the rest grouped by the construct the
error names (the reader's ``TVMScriptError`` says which construct and why). Not timed.
"""

import argparse
import collections
import gzip
import json
import os
import re

import workbench as wb

HERE = os.path.dirname(os.path.abspath(__file__))


def construct(err: Exception) -> str:
    """The error's first line without its position: one group per construct."""
    first = str(err).splitlines()[0]
    first = re.sub(r"line \d+, col \d+: ", "", first)
    first = re.sub(r"function '[^']*'", "function", first)
    return f"{type(err).__name__}: {first[:110]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=os.path.join(HERE, "data", "tvm_schedule_programs.json.gz"))
    ap.add_argument("--json", help="write {program: 'ok' | construct} here")
    ap.add_argument("--show", type=int, default=2, help="example programs named per construct")
    args = ap.parse_args()
    with gzip.open(args.corpus, "rt") as f:
        data = json.load(f)
    progs: dict[str, str] = data["programs"]
    result: dict[str, str] = {}
    for name, text in sorted(progs.items()):
        try:
            func = wb.parse(text)
        except Exception as e:  # every failure is a finding: grouped below
            result[name] = construct(e)
            continue
        try:
            wb.assert_structural_equal(wb.parse(str(func)), func)
            result[name] = "ok"
        except Exception as e:
            result[name] = "round trip: " + construct(e)
    ok = sum(v == "ok" for v in result.values())
    print(data["source"])
    print(f"\n{ok} of {len(result)} programs parse and round-trip ({100 * ok / len(result):.0f} %)\n")
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for name, v in result.items():
        if v != "ok":
            groups[v].append(name)
    for key, names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(names):4d}  {key}")
        print(f"      e.g. {', '.join(names[: args.show])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
