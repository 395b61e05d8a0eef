"""Library behind tests/sim/simcluster.py: a simulated GPU cluster built from
network namespaces, booted systemd-nspawn containers on overlay file systems,
a local signed apt repository and stand-in nvidia-smi / ibstat programs."""
