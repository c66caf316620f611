#!/bin/bash
# One nnqs VMC run across nodes with Slurm + torchrun (an example; adapt the resources).
#
#   sbatch experiments/drivers/slurm_vmc.sh experiments/configs/h2o_ccpvdz.toml runs/h2o_ccpvdz
#
# One torchrun agent per node starts one process per GPU (or, on CPU nodes, as many as
# NNQS_PROCS_PER_NODE); the rendezvous runs on the first node of the allocation. The backend
# follows the config's device: NCCL for device = "cuda" (rank r uses cuda:LOCAL_RANK), gloo for
# "cpu". Rank 0 writes the run folder, so OUT must be on a file system the first node can write.
# If a rank dies, the others stop: over gloo within [run] collective_timeout with one line
# saying so, over NCCL by its watchdog's abort. Resubmit with --resume to continue from the
# last checkpoint.
#SBATCH --job-name=nnqs
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=16
#SBATCH --time=04:00:00
set -euo pipefail

CONFIG=${1:?usage: sbatch slurm_vmc.sh CONFIG.toml OUT_DIR [nnqs run options]}
OUT=${2:?usage: sbatch slurm_vmc.sh CONFIG.toml OUT_DIR [nnqs run options]}
shift 2
PROCS=${NNQS_PROCS_PER_NODE:-${SLURM_GPUS_PER_NODE:-1}}
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export OMP_NUM_THREADS=$(( SLURM_CPUS_PER_TASK / PROCS > 0 ? SLURM_CPUS_PER_TASK / PROCS : 1 ))

srun torchrun \
    --nnodes="$SLURM_JOB_NUM_NODES" --nproc_per_node="$PROCS" \
    --rdzv_id="$SLURM_JOB_ID" --rdzv_backend=c10d --rdzv_endpoint="$HEAD:29500" \
    -m nnqs run "$CONFIG" --out "$OUT" --no-progress "$@"
