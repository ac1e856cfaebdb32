# bash completion for gpool. Install: copy to /usr/share/bash-completion/completions/gpool, or
# `source scripts/completion/gpool.bash` in ~/.bashrc. Static: keep in step with docs/cli.md.
_gpool() {
  local cur prev cmd i
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  local commands="submit run alloc logs shell queue show cancel nodes top watch up down sim version"
  # The admin and account commands (src/cli/admin_commands.cc).
  commands+=" user group quota qos drain resume node usage account config token join-token alerts"
  commands+=" gpu admin audit"
  local global="--socket --server --ca --token-file --json --help --version"
  cmd=""
  local sub=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
      --socket|--server|--ca|--token-file) ((i++)) ;;
      -*) ;;
      *) if [[ -z "$cmd" ]]; then cmd="${COMP_WORDS[i]}"; elif [[ -z "$sub" ]]; then
           sub="${COMP_WORDS[i]}"; fi ;;
    esac
  done
  case "$prev" in
    --socket|--ca|--token-file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --server) return ;;
  esac
  case "$cmd" in
    "")
      COMPREPLY=($(compgen -W "$commands $global" -- "$cur")) ;;
    submit|run|alloc)
      case "$prev" in
        --workdir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        --gpus|--gpu-mem|--gpu-compute|--gpu-model|--min-cc|--time|--cpus|--mem|--tasks|\
        --nodes|--qos|--array|--after|--after-any|--dependency|--name|--group|--export)
          return ;;
      esac
      if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "--gpus --gpu-mem --gpu-compute --gpu-model --min-cc --time \
          --cpus --mem --tasks --nodes --qos --preemptible --array --after --after-any \
          --dependency --name --group --workdir --export --help $global" -- "$cur"))
      else
        COMPREPLY=($(compgen -f -- "$cur"))
      fi ;;
    queue)
      case "$prev" in
        -s|--state)
          COMPREPLY=($(compgen -W "PD R CG CD F CA TO PR NF OOM all" -- "$cur")); return ;;
        -u|--user) COMPREPLY=($(compgen -u -- "$cur")); return ;;
      esac
      COMPREPLY=($(compgen -W "--user --state --all --watch --help $global" -- "$cur")) ;;
    show) COMPREPLY=($(compgen -W "--help $global" -- "$cur")) ;;
    logs)
      [[ "$prev" == "--task" ]] && return
      COMPREPLY=($(compgen -W "--task --stderr -f --follow --help $global" -- "$cur")) ;;
    shell)
      [[ "$prev" == "--task" ]] && return
      COMPREPLY=($(compgen -W "--task --help $global" -- "$cur")) ;;
    cancel) COMPREPLY=($(compgen -W "--mine --help $global" -- "$cur")) ;;
    nodes) COMPREPLY=($(compgen -W "--help $global" -- "$cur")) ;;
    user)
      case "$sub" in
        "") COMPREPLY=($(compgen -W "list show add set remove --help" -- "$cur")) ;;
        *) case "$prev" in
             --role) COMPREPLY=($(compgen -W "user group-admin admin" -- "$cur")); return ;;
             --group|--groups|--add-group|--remove-group) COMPREPLY=($(compgen -g -- "$cur")); return ;;
             --uid|--default-qos) return ;;
           esac
           if [[ "$cur" == -* ]]; then
             COMPREPLY=($(compgen -W "--uid --group --groups --add-group --remove-group --role \
               --default-qos --help $global" -- "$cur"))
           else
             COMPREPLY=($(compgen -u -- "$cur"))
           fi ;;
      esac ;;
    group)
      case "$sub" in
        "") COMPREPLY=($(compgen -W "list show add set remove --help" -- "$cur")) ;;
        *) case "$prev" in
             --member|--admin|--add-member|--remove-member|--add-admin|--remove-admin)
               COMPREPLY=($(compgen -u -- "$cur")); return ;;
             --project-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
             --gid) return ;;
           esac
           if [[ "$cur" == -* ]]; then
             COMPREPLY=($(compgen -W "--gid --project-dir --member --admin --add-member \
               --remove-member --add-admin --remove-admin --help $global" -- "$cur"))
           else
             COMPREPLY=($(compgen -g -- "$cur"))
           fi ;;
      esac ;;
    quota)
      case "$prev" in
        --user) COMPREPLY=($(compgen -u -- "$cur")); return ;;
        --group) COMPREPLY=($(compgen -g -- "$cur")); return ;;
        --max-gpus|--gpu-hours|--period|--max-gpu-mem|--max-compute|--max-run-time|\
        --priority-weight|--guaranteed-gpus) return ;;
      esac
      case "$sub" in
        "") COMPREPLY=($(compgen -W "list show set remove --mine --help $global" -- "$cur")) ;;
        set) COMPREPLY=($(compgen -W "--user --group --max-gpus --gpu-hours --period \
               --max-gpu-mem --max-compute --max-run-time --priority-weight --guaranteed-gpus \
               --help $global" -- "$cur")) ;;
        *) COMPREPLY=($(compgen -W "--user --group --help $global" -- "$cur")) ;;
      esac ;;
    qos)
      case "$sub" in
        "") COMPREPLY=($(compgen -W "list add set remove --help" -- "$cur")) ;;
        *) case "$prev" in
             --priority|--description|--max-gpus-per-user|--max-wall-time|--grace-time) return ;;
           esac
           COMPREPLY=($(compgen -W "--priority --description --preemptible --no-preemptible \
             --max-gpus-per-user --max-wall-time --grace-time --help $global" -- "$cur")) ;;
      esac ;;
    drain)
      [[ "$prev" == "--reason" ]] && return
      COMPREPLY=($(compgen -W "--reason --help $global" -- "$cur")) ;;
    resume) COMPREPLY=($(compgen -W "--help $global" -- "$cur")) ;;
    gpu)
      case "$sub" in
        "") COMPREPLY=($(compgen -W "clear --help" -- "$cur")) ;;
        *) COMPREPLY=($(compgen -W "--help $global" -- "$cur")) ;;
      esac ;;
    alerts)
      case "$sub" in
        "") COMPREPLY=($(compgen -W "show ack --all --limit --help $global" -- "$cur")) ;;
        *) COMPREPLY=($(compgen -W "--help $global" -- "$cur")) ;;
      esac ;;
    node)
      case "$sub" in
        "") COMPREPLY=($(compgen -W "remove --help" -- "$cur")) ;;
        *) COMPREPLY=($(compgen -W "--help $global" -- "$cur")) ;;
      esac ;;
    usage)
      case "$prev" in
        --by) COMPREPLY=($(compgen -W "user group" -- "$cur")); return ;;
        --from|--to) return ;;
      esac
      COMPREPLY=($(compgen -W "--by --from --to --csv --mine --help $global" -- "$cur")) ;;
    audit)
      [[ "$prev" == "--after" || "$prev" == "--limit" ]] && return
      COMPREPLY=($(compgen -W "--after --limit --help $global" -- "$cur")) ;;
    account)
      if [[ -z "$sub" ]]; then
        COMPREPLY=($(compgen -W "quota --help $global" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "--help $global" -- "$cur"))
      fi ;;
    config)
      case "$sub" in
        "") COMPREPLY=($(compgen -W "check --help" -- "$cur")) ;;
        *) if [[ "$prev" == "--kind" ]]; then
             COMPREPLY=($(compgen -W "gpoold agent" -- "$cur"))
           elif [[ "$cur" == -* ]]; then
             COMPREPLY=($(compgen -W "--kind --help $global" -- "$cur"))
           else
             COMPREPLY=($(compgen -f -- "$cur"))
           fi ;;
      esac ;;
    top) COMPREPLY=($(compgen -W "--interval --once --help $global" -- "$cur")) ;;
    watch) COMPREPLY=($(compgen -W "--topics --after --count --help $global" -- "$cur")) ;;
    token)
      case "$prev" in
        --user) COMPREPLY=($(compgen -u -- "$cur")); return ;;
        --name|--expires-in) return ;;
      esac
      case "$sub" in
        "") COMPREPLY=($(compgen -W "create list revoke --help" -- "$cur")) ;;
        create) COMPREPLY=($(compgen -W "--name --user --expires-in --save --help $global" \
                  -- "$cur")) ;;
        *) COMPREPLY=($(compgen -W "--help $global" -- "$cur")) ;;
      esac ;;
    admin)
      case "$prev" in
        --config|--store) COMPREPLY=($(compgen -f -- "$cur")); return ;;
      esac
      case "$sub" in
        "") COMPREPLY=($(compgen -W "backup verify restore --help" -- "$cur")) ;;
        backup|restore)
          if [[ "$cur" == -* ]]; then
            COMPREPLY=($(compgen -W "--config --store --help $global" -- "$cur"))
          else
            COMPREPLY=($(compgen -f -- "$cur"))
          fi ;;
        *) if [[ "$cur" == -* ]]; then
             COMPREPLY=($(compgen -W "--help $global" -- "$cur"))
           else
             COMPREPLY=($(compgen -f -- "$cur"))
           fi ;;
      esac ;;
    join-token)
      case "$prev" in
        --name|--expires-in|--node) return ;;
      esac
      case "$sub" in
        "") COMPREPLY=($(compgen -W "create --help" -- "$cur")) ;;
        *) COMPREPLY=($(compgen -W "--name --expires-in --reusable --node --help $global" \
             -- "$cur")) ;;
      esac ;;
    *) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
  esac
}
complete -F _gpool gpool
