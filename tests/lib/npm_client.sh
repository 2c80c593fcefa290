# Sourced by the server tests: need_npm TEST PACKAGE SPEC installs an official
# npm client into tests/cache/node once (CI fetches it from npm; later runs reuse it).
node_dir=tests/cache/node
need_npm() {
  [ -d "$node_dir/node_modules/$2" ] && return 0
  mkdir -p "$node_dir"
  (cd "$node_dir" && npm install --silent --no-audit --no-fund "$2@$3" >/dev/null 2>&1) || { echo "FAIL $1/setup: npm install $2 failed"; exit 1; }
}
