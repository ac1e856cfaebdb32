# bash completion for gpool. Install: copy to /usr/share/bash-completion/completions/gpool, or
# `source scripts/completion/gpool.bash` in ~/.bashrc. Static: keep in step with docs/cli.md.
_gpool() {
  local cur prev cmd i
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  local commands="submit queue show cancel nodes watch up down sim version"
  local global="--socket --json --help --version"
  cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
      --socket) ((i++)) ;;
      -*) ;;
      *) cmd="${COMP_WORDS[i]}"; break ;;
    esac
  done
  if [[ "$prev" == "--socket" ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
    return
  fi
  case "$cmd" in
    "")
      COMPREPLY=($(compgen -W "$commands $global" -- "$cur")) ;;
    submit)
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
    cancel) COMPREPLY=($(compgen -W "--mine --help $global" -- "$cur")) ;;
    nodes) COMPREPLY=($(compgen -W "--help $global" -- "$cur")) ;;
    watch) COMPREPLY=($(compgen -W "--topics --after --count --help $global" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
  esac
}
complete -F _gpool gpool
