#!/usr/bin/env python3
"""The daemon's wings (server/README.md) depend one way only.

Each folder under server/ is a wing; ALLOWED says which other wings its files
(tests included) may include. A file that includes a wing outside its list, a
wing missing from the table, or worker/ and client/ including server/ at all
fails this check, naming the file, the include and what is allowed. The table
mirrors the wings' target_link_libraries (server/*/CMakeLists.txt); a new wing
is added to both.
"""
import os
import re
import sys

ALLOWED = {
    "core": set(),
    "store": {"core"},
    "security": {"core"},
    "workers": {"core"},
    "jobs": {"core", "store", "workers"},
    "cluster": {"core", "store", "security", "workers", "jobs"},
    "api": {"core", "store", "security", "workers", "jobs", "cluster"},
    "daemon": {"core", "store", "security", "workers", "jobs", "cluster", "api"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(server|client|worker)/([^"]+)"', re.M)


def main(root):
    errors = []
    server = os.path.join(root, "server")
    wings = sorted(d for d in os.listdir(server) if os.path.isdir(os.path.join(server, d)))
    for wing in wings:
        if wing not in ALLOWED:
            errors.append(f"server/{wing}/: a wing missing from ALLOWED in {__file__}")
    for name in os.listdir(server):
        if name.endswith((".h", ".cc")):
            errors.append(f"server/{name}: every source file belongs to a wing folder")
    for top in ("server", "worker", "client", "common"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if not f.endswith((".h", ".cc", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                parts = rel.split(os.sep)
                text = open(path, encoding="utf-8").read()
                for m in INCLUDE.finditer(text):
                    area, inc = m.group(1), m.group(2)
                    if top != "server":
                        if area == "server":
                            errors.append(f"{rel}: includes server/{inc}; only the daemon's own "
                                          "files may (shared code belongs in common/)")
                        continue
                    if area != "server":
                        errors.append(f"{rel}: includes {area}/{inc}; the daemon may use "
                                      "common/ and proto/ only")
                        continue
                    wing, target = parts[1], inc.split("/")[0]
                    if target != wing and target not in ALLOWED.get(wing, set()):
                        allowed = ", ".join(sorted(ALLOWED.get(wing, set()))) or "none"
                        errors.append(f"{rel}: includes server/{inc}, but wing {wing} may use "
                                      f"only its own files and: {allowed}")
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..")))
