"""Print, as one JSON line, which torch packages the venv holds and what torch reports (run inside the venv).

`fingerprint` changes whenever anything an import of torch depends on changes: a package's version
or any of its installed files (size, mtime), the interpreter, the loaded NVIDIA driver or its device
nodes. The role re-runs the (slow) import only when it differs from the last verified one.
"""
import glob
import hashlib
import json
import os
import sys
from importlib import metadata


def fingerprint(names):
    digest = hashlib.sha256()
    digest.update(("%s %s\n" % (sys.version, os.path.realpath(sys.executable))).encode())
    for name in names:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            digest.update(("%s absent\n" % name).encode())
            continue
        digest.update(("%s %s\n" % (name, dist.version)).encode())
        for path in dist.files or []:
            try:
                stat = os.stat(str(dist.locate_file(path)))
                digest.update(("%s %d %d\n" % (path, stat.st_size, stat.st_mtime_ns)).encode())
            except OSError:
                digest.update(("%s missing\n" % path).encode())
    try:
        with open("/proc/driver/nvidia/version", "rb") as handle:
            digest.update(handle.read())
    except OSError:
        digest.update(b"no loaded driver\n")
    digest.update(" ".join(sorted(glob.glob("/dev/nvidia*"))).encode())
    return digest.hexdigest()


info = {"packages": {}, "version": None, "cuda": None, "cuda_available": False, "device_count": 0, "nccl": None}
# --extras a,b: further packages the role installs beside torch (numpy by default).
extras = [arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--extras=")]
extra_names = [name for group in extras for name in group.split(",") if name]
names = ("torch", "torchvision", "torchaudio", *extra_names)
for name in names:
    try:
        info["packages"][name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        info["packages"][name] = None
info["fingerprint"] = fingerprint(names)
if "--import" in sys.argv and info["packages"]["torch"]:
    try:
        import torch

        info["version"] = torch.__version__
        info["cuda"] = torch.version.cuda
        info["cuda_available"] = bool(torch.cuda.is_available())
        if info["cuda_available"]:
            info["device_count"] = torch.cuda.device_count()
            info["nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
    except Exception as exc:  # a broken wheel or driver is a finding, not a crash of the probe
        info["error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(info))
