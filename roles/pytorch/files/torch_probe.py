"""Print what torch reports about itself as one JSON line (run inside the venv)."""
import json

import torch

info = {
    "version": torch.__version__,
    "cuda": torch.version.cuda,
    "cuda_available": False,
    "device_count": 0,
    "nccl": None,
}
try:
    info["cuda_available"] = bool(torch.cuda.is_available())
    if info["cuda_available"]:
        info["device_count"] = torch.cuda.device_count()
        info["nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
except Exception as exc:  # a broken driver shows here, not as a crash of the probe
    info["error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(info))
