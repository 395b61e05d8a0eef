"""Print, as one JSON line, which torch packages the venv holds and what torch reports (run inside the venv)."""
import json
import sys
from importlib import metadata

info = {"packages": {}, "version": None, "cuda": None, "cuda_available": False, "device_count": 0, "nccl": None}
# --extras a,b: further packages the role installs beside torch (numpy by default).
extras = [arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--extras=")]
extra_names = [name for group in extras for name in group.split(",") if name]
for name in ("torch", "torchvision", "torchaudio", *extra_names):
    try:
        info["packages"][name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        info["packages"][name] = None
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
