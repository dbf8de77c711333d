# bash completion for gpureap                                   -*- shell-script -*-
# Installed as share/bash-completion/completions/gpureap. Kept in step with `gpureap --help`
# by the test packaging.completions_match_help (packaging/tests/completions-match-help.sh).

_gpureap() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
  # `--opt=value`: bash splits at '=' (COMP_WORDBREAKS).
  if [[ $cur == = ]]; then
    cur=""
  elif [[ $prev == = && COMP_CWORD -ge 2 ]]; then
    prev=${COMP_WORDS[COMP_CWORD - 2]}
  fi

  # The subcommand is the first word that is not an option (the top level takes no values).
  local command="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    if [[ ${COMP_WORDS[i]} != -* ]]; then
      command=${COMP_WORDS[i]}
      break
    fi
  done

  local options values
  case $command in
    "")
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "-h --help --version" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "ps kill doctor run reap watch export fleet top" -- "$cur"))
      fi
      return
      ;;
    ps)
      options="-h --help --json --tree -w --wide --watch --gpu --user --pid --container --color"
      values="--watch --gpu --user --pid --container --color"
      ;;
    kill)
      options="-h --help --gpu --user --name --container --holders --all --no-tree --group
               -s --signal --timeout --no-escalate -n --dry-run -y --yes --json -w --wide
               --verify-timeout --no-verify --reap-zombies --force --protect --audit-log --color"
      values="--gpu --user --name --container -s --signal --timeout --verify-timeout
              --protect --audit-log --color"
      ;;
    doctor)
      options="-h --help --json -w --wide --fix -y --yes --only --allow-reset --kernel-log --no-kernel-log
               --since --settle --tolerance-mib --timeout --verify-timeout --audit-log --ipc-min-age --color"
      values="--only --kernel-log --since --settle --tolerance-mib --timeout --verify-timeout --audit-log
              --ipc-min-age --color"
      ;;
    run)
      values="--kill-timeout --verify-timeout --hang-timeout --evidence-dir --poll-interval --report --audit-log"
      # gpureap's options end at the job's first word, or at `--` (as split_run_arguments):
      # from there on every word is the job's, and gpureap's options are never offered.
      local job_start=0
      for ((i = 2; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
          --) job_start=$((i + 1)); break ;;
          =) ((i++)) ;;  # --option=value: the value follows
          -?*)
            [[ " $values " == *" ${COMP_WORDS[i]} "* && ${COMP_WORDS[i + 1]} != = ]] && ((i++)) ;;
          *) job_start=$i; break ;;
        esac
      done
      if ((job_start > 0)); then
        if ((job_start == COMP_CWORD)); then
          COMPREPLY=($(compgen -c -- "$cur"))
        else
          compopt -o default 2>/dev/null
          COMPREPLY=()
        fi
        return
      fi
      options="-h --help --kill-timeout --verify-timeout --fail-fast --hang-timeout --dump-on-hang
               --evidence-dir --poll-interval --json --report --no-cgroup --audit-log"
      ;;
    reap)
      options="-h --help --cgroup --user --uid --gpus --except --baseline-mib --kill-timeout
               --verify-timeout -n --dry-run --json --audit-log -w --wide --color"
      values="--cgroup --user --uid --gpus --except --baseline-mib --kill-timeout --verify-timeout
              --audit-log --color"
      ;;
    watch)
      options="-h --help --policy --check-config --interval -n --dry-run --audit-log
               --listen --web-config --per-process --max-scrapes --kernel-log --no-kernel-log --stop-timeout"
      values="--policy --check-config --interval --audit-log --listen --web-config --max-scrapes
              --kernel-log --stop-timeout"
      ;;
    fleet)
      options="-h --help --prometheus --user --password-file --ca-file --insecure --timeout --host --gpu
               --top --json -w --wide --color"
      values="--prometheus --user --password-file --ca-file --timeout --host --gpu --top --color"
      ;;
    export)  # --- export ---
      options="-h --help --listen --web-config --per-process --max-scrapes --cache --reconcile --kernel-log
               --no-kernel-log --once"
      values="--listen --web-config --max-scrapes --cache --reconcile --kernel-log"
      ;;
    top)
      options="-h --help --interval --once --readonly --tree --sort --gpu --audit-log --color"
      values="--interval --sort --gpu --audit-log --color"
      ;;
    *) return ;;
  esac

  # The value of an option that takes one.
  if [[ " ${values//$'\n'/ } " == *" $prev "* ]]; then
    case $prev in
      --color) COMPREPLY=($(compgen -W "auto always never" -- "$cur")) ;;
      --sort) COMPREPLY=($(compgen -W "memory cpu age pid" -- "$cur")) ;;
      --user) COMPREPLY=($(compgen -u -- "$cur")) ;;
      --pid) COMPREPLY=($(compgen -W "$(command ls /proc 2>/dev/null | grep -E '^[0-9]+$')" -- "$cur")) ;;
      -s | --signal) COMPREPLY=($(compgen -W "TERM INT HUP QUIT USR1 USR2 KILL" -- "$cur")) ;;
      --cgroup)
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -d -- "$cur"))
        ;;
      --audit-log | --kernel-log | --report | --evidence-dir | --policy | --check-config | --web-config | \
        --password-file | --ca-file)
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$cur"))
        ;;
      *) COMPREPLY=() ;;  # a number, a regex, an id: nothing to offer
    esac
    return
  fi

  if [[ $command == run && $cur != -* ]]; then
    COMPREPLY=($(compgen -c -- "$cur"))  # the job's first word
  elif [[ $cur == -* || $command != kill ]]; then
    COMPREPLY=($(compgen -W "$options" -- "$cur"))
  else
    # kill's positionals are PIDs.
    COMPREPLY=($(compgen -W "$(command ls /proc 2>/dev/null | grep -E '^[0-9]+$')" -- "$cur"))
  fi
} &&
  complete -F _gpureap gpureap
