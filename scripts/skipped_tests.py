#!/usr/bin/env python3
"""Reads CTest's JUnit report: prints every skipped suite with its reasons (Qt Test's,
or a script suite's `NAME: SKIP: reason` line), and exits 1 when a suite skipped for
something scripts/setup.sh installs (Python modules, Fashion-MNIST, sshd, Slurm, ONNX,
node, npm, onnxruntime-node and universal-ctags), which on a machine it set up is a
failure."""
import re
import sys
import xml.etree.ElementTree as ET

# What `scripts/setup.sh test` installs, as the suites' skip messages name it.
INSTALLED = re.compile(r"python3|Fashion-MNIST|dataset-fashion-mnist|no sshd|openssh|"
                       r"slurm-wlm|munge|libonnx|ONNX|nodejs|npm|onnxruntime-node|universal-ctags")

def main(path):
    failed = False
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("skipped") is None:
            continue
        out = case.findtext("system-out") or ""
        # Each reason once, with the functions (or data rows) it skipped counted.
        reasons = {}
        for l in out.splitlines():
            m = re.match(r"SKIP   : (\S+?\(.*?\)) (.*)", l)
            if m:
                reasons.setdefault(m.group(2), []).append(m.group(1))
            m = re.match(r"(\S+): SKIP: (.*)", l)
            if m:
                reasons.setdefault(m.group(2), []).append(m.group(1))
        print(f"netloom: {case.get('name')} skipped:")
        lines = [f"{why} ({len(fns)}: {fns[0]}{', ...' if len(fns) > 1 else ''})"
                 for why, fns in reasons.items()]
        for line in lines or ["(no reason printed)"]:
            print("    " + line)
            if INSTALLED.search(line):
                print("    ^ the setup installs this: the suite must run here")
                failed = True
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
