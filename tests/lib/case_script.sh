# The start the case scripts share (usage: SCRIPT HCCLSIM SOURCE_DIR CASE).
# Sourced first, it checks the arguments and sets hcclsim, src and name.
# start_cases, called once CASES is set, prints the cases and exits for CASE
# "list", makes $tmp (removed on exit) and brings run_case (run_case.sh).
if [ $# -ne 3 ]; then
  echo "usage: $0 HCCLSIM SOURCE_DIR CASE" >&2
  exit 2
fi
hcclsim=$1
src=$2
name=$3
start_cases() {
  if [ "$name" = list ]; then
    printf '%s\n' "${CASES[@]}"
    exit 0
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # shellcheck source=run_case.sh
  . "$(dirname "${BASH_SOURCE[0]}")/run_case.sh"
}
