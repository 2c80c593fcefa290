# Sourced by the server tests: need_npm TEST PACKAGE SPEC installs an official
# npm client into tests/cache/node once (CI fetches it from npm; later runs reuse it).
# Under a lock: tests/run.sh runs two scripts at a time, and two installs into one
# folder at once fail.
node_dir=tests/cache/node
need_npm() {
  [ -d "$node_dir/node_modules/$2" ] && return 0
  mkdir -p "$node_dir"
  (
    flock 9
    [ -d "$node_dir/node_modules/$2" ] || (cd "$node_dir" && npm install --silent --no-audit --no-fund "$2@$3" >/dev/null 2>&1)
  ) 9>"$node_dir/.install.lock" || { echo "FAIL $1/setup: npm install $2 failed"; exit 1; }
}
