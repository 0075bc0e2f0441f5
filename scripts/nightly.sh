#!/usr/bin/env bash
# A nightly gated sweep, for cron or CI: `bench sweep PARAMS --junit JUNIT`, run again while bench says to retry.
#
#   scripts/nightly.sh PARAMS [JUNIT]      (PARAMS must have a gates: section; JUNIT defaults to gates.xml)
#
# The exit code decides (bench.core.exit_codes, docs/sweeps.md "How a sweep ends"): 0 success; 3 (items still
# failed) and 130 (interrupted) are retried, each retry asking only what is failed or left, up to
# NIGHTLY_ATTEMPTS attempts in all (default 3), NIGHTLY_RETRY_S seconds apart (default 300: a provider's outage
# has time to pass); every other code (1 crashed, 2 bad input, 4 budget, 5 a gate failed, 6 it cannot decide) stops
# at once. The script exits with the last sweep's code, so cron mails it and CI marks the job. BENCH is the command that runs
# bench (default: bench) and PYTHON the interpreter that has it installed (default: python3).
# Cron, every night at 02:00 (docs/orchestration.md):
#   0 2 * * * cd /srv/bench && scripts/nightly.sh params/tips.yaml reports/gates.xml >> logs/nightly.log 2>&1
set -u
params=${1:?usage: scripts/nightly.sh PARAMS [JUNIT]}
junit=${2:-gates.xml}
bench=${BENCH:-bench}
python=${PYTHON:-python3}
attempts=${NIGHTLY_ATTEMPTS:-3}
retry_s=${NIGHTLY_RETRY_S:-300}

code=0
for ((attempt = 1; attempt <= attempts; attempt++)); do
    echo "nightly: attempt $attempt of $attempts: $bench sweep $params --junit $junit"
    $bench sweep "$params" --junit "$junit"  # word-split on purpose: BENCH may be "python -m bench"
    code=$?
    action=$($python -m bench.core.exit_codes "$code") || exit "$code"
    echo "nightly: bench sweep exited $code: $action"
    if [[ $action != retry ]]; then
        exit "$code"
    fi
    if ((attempt < attempts)); then
        sleep "$retry_s"
    fi
done
echo "nightly: still exit $code after $attempts attempts"
exit "$code"
