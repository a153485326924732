#!/usr/bin/env bash
# Install what tests/test_slurm.py needs to start its private one-node SLURM cluster:
# Debian/Ubuntu's slurm-wlm (slurmctld, slurmd, sbatch, squeue, ...) and munge.
# The test configures and starts the daemons itself, in a temporary directory; this
# script only installs the packages and does not start or enable any service.
#
# Never fails: where it cannot install (not root, no apt-get) it says so and exits 0,
# and the SLURM test is then skipped with the reason.
set -euo pipefail

have_all() {
    local prog
    for prog in slurmctld slurmd sinfo sbatch squeue scancel scontrol srun munged; do
        command -v "$prog" >/dev/null 2>&1 \
            || PATH="$PATH:/usr/sbin:/sbin" command -v "$prog" >/dev/null 2>&1 \
            || return 1
    done
    getent passwd munge >/dev/null 2>&1
}

if have_all; then
    echo "install-slurm: slurm-wlm and munge are already installed; nothing to do."
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-slurm: not root, not installing slurm-wlm and munge" \
        "(run 'sudo $0'); the SLURM test will be skipped."
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-slurm: no apt-get here; install SLURM (slurmctld, slurmd, clients)" \
        "and munge with your package manager; the SLURM test will be skipped."
    exit 0
fi

echo "install-slurm: installing slurm-wlm and munge with apt-get ..."
export DEBIAN_FRONTEND=noninteractive
if apt-get update -qq && apt-get install -y -qq slurm-wlm munge; then
    echo "install-slurm: done."
else
    echo "install-slurm: apt-get failed (see above); the SLURM test will be skipped."
fi
exit 0
