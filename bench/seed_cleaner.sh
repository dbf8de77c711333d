#!/bin/bash
# The seed article's GPU cleaner (shared/reference/seed-articles, "编写智能清理脚本"), as it is
# run from cron: nvidia-smi's compute apps, then `ps` per process for its owner; a python
# process of TARGET_USER over MEMORY_THRESHOLD_MB is "stale". The article leaves the idle test
# as a comment (MAX_IDLE_TIME is never used), and so does this copy. DRY_RUN=1 (what
# bench/watch_cost.sh runs) prints what it would end instead of `kill -15; sleep 5; kill -9`.
TARGET_USER=${TARGET_USER:-your_username}
GPU_ID=${GPU_ID:-0}
MEMORY_THRESHOLD_MB=${MEMORY_THRESHOLD_MB:-100}
MAX_IDLE_TIME=${MAX_IDLE_TIME:-3600}
DRY_RUN=${DRY_RUN:-0}

nvidia-smi --query-compute-apps=pid,used_memory,process_name --format=csv,noheader | grep -v "^$" |
  while IFS=, read -r pid used_mem process_name; do
    pid=$(echo $pid | xargs)
    used_mem_num=$(echo $used_mem | sed 's/MiB//g' | xargs)
    process_name=$(echo $process_name | xargs)
    if ps -o user -p $pid 2>/dev/null | grep -q $TARGET_USER && [[ $process_name == *"python"* ]]; then
      if [[ $used_mem_num -gt $MEMORY_THRESHOLD_MB ]]; then
        echo "Found potential stale process: PID=$pid, MEM=${used_mem}MiB, NAME=$process_name"
        if [ "$DRY_RUN" = 1 ]; then
          echo "dry run: would send SIGTERM to $pid, then SIGKILL after 5 s"
          continue
        fi
        kill -15 $pid
        sleep 5
        if kill -0 $pid 2>/dev/null; then
          echo "Process $pid did not terminate gracefully, sending SIGKILL."
          kill -9 $pid
        else
          echo "Process $pid terminated successfully."
        fi
      fi
    fi
  done
echo "GPU cleanup cycle completed."
