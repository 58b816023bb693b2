#!/usr/bin/env bash
# The main job, end to end, on a bundled model. Until the search and runner
# land this shows the model zoo (what is bundled, what BERT-Large and DLRM
# cost per training step) and the shipped, proved ruleset the search will use.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
pcgx=${PCGX_BUILD_DIR:-build}/tools/pcgx/pcgx
set -x
"$pcgx" models
"$pcgx" info bert-large
"$pcgx" info dlrm
"$pcgx" ruleset show rulesets/unity-v1.json --limit 8
