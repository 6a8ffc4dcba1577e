#!/bin/bash
# contrib/slurm/submit.sh — submits a corpus as a job array of N scoring tasks and the merge
# job that runs when all of them have ended (afterany: the merge itself checks that every
# line is there, and fails naming the missing ones when a task did not finish).
#
#   PS_MODEL=model.gguf PS_INPUT=corpus.jsonl PS_OUT=/shared/run1 PS_RESULT=/shared/run1.jsonl \
#       contrib/slurm/submit.sh N [sbatch options for the array, e.g. --cpus-per-task=8]
#
# Prints the array's and the merge job's ids.
set -euo pipefail
n=${1:?usage: submit.sh N [sbatch options]}
shift
here=$(cd "$(dirname "$0")" && pwd)
export PS_SHARDS=$n
: "${PS_OUT:?set PS_OUT}" "${PS_RESULT:?set PS_RESULT}" "${PS_MODEL:?set PS_MODEL}"
mkdir -p "$PS_OUT"
array=$(sbatch --parsable --array=0-$(( n - 1 )) --export=ALL "$@" "$here/score-array.sbatch")
array=${array%%;*}
merge=$(sbatch --parsable --dependency=afterany:"$array" --export=ALL "$here/merge.sbatch")
merge=${merge%%;*}
echo "array $array merge $merge"
