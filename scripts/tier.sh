# Sourced by scripts/test and tests/python/run.sh: the time each tier takes, so that a run's cost can be read
# per tier. `tier NAME` ends the tier before it and starts NAME (printing "== NAME"); `tier_end` ends the
# current one; `timed NAME CMD...` runs CMD and records its time under NAME (the background installs). Each
# records "seconds<TAB>name" in $MEMGYM_TIMING when that is set; scripts/test prints the table at its end.
tier() {
  tier_end
  _tier_name=$1
  _tier_start=$SECONDS
  echo "== $1"
}
tier_end() {
  if [ -n "${_tier_name:-}" ] && [ -n "${MEMGYM_TIMING:-}" ]; then
    printf '%s\t%s\n' $((SECONDS - _tier_start)) "$_tier_name" >>"$MEMGYM_TIMING"
  fi
  _tier_name=
}
timed() {
  local name=$1 start=$SECONDS status=0
  shift
  "$@" || status=$?
  if [ -n "${MEMGYM_TIMING:-}" ]; then printf '%s\t%s\n' $((SECONDS - start)) "$name" >>"$MEMGYM_TIMING"; fi
  return $status
}
