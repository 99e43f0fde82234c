#!/usr/bin/env bash
# The main job's recipe, one option at a time against the old recipe (experiment=lm_old_recipe), 3 seeds each,
# every run trained for the same 65 seconds (the current main job's training time; budget.kind=time, the
# cosine schedule decays over the budget, warmup over its first 10%). Results: experiments/RESULTS.md, "The
# main job's recipe". Run it alone on an idle machine: the time budget makes the results depend on the load.
#   ZOO_DATA_MIRROR=../shared/data bash experiments/sweeps/main_job_ablation.sh
#   python -m zoo.report outputs/main_job_ablation/<stamp> --out experiments/main_job_ablation
set -euo pipefail
root=outputs/main_job_ablation/$(date +%Y-%m-%d_%H-%M-%S)
common=(+arch=decoder_only logger=csv budget.kind=time budget.value=65 task.scheduler.warmup_fraction=0.1 seed=1,2,3)
run() { python -m zoo -m "${common[@]}" "hydra.sweep.dir=$root/$1" "${@:2}"; }
run old experiment=lm_old_recipe
run dropout0 experiment=lm_old_recipe model.dropout=0.0
run batch16 experiment=lm_old_recipe data.batch_size=16
run block64 experiment=lm_old_recipe data.block_size=64
run new
echo "python -m zoo.report $root"
