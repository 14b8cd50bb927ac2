#!/usr/bin/env bash
# Spark GPU discovery script: prints the executor's GPUs as Spark's ResourceInformation JSON,
# e.g. {"name": "gpu", "addresses": ["0","1"]}. Ship it with --files conf/getGpusResources.sh
# and set spark.executor.resource.gpu.discoveryScript=./getGpusResources.sh (YARN puts
# --files in the container's working directory). Same logic as Spark's example script.
set -euo pipefail
ADDRS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | sed -e ':a' -e 'N' -e '$!ba' -e 's/\n/","/g' || true)
echo "{\"name\": \"gpu\", \"addresses\": [\"${ADDRS}\"]}" | sed -e 's/\[""\]/[]/'
