#!/usr/bin/env bash
# The Debian package, installed into a scratch root: cpack builds it from BUILD_DIR, its
# files are unpacked, its postinst runs with DPKG_ROOT set (the service user, /var/lib, the
# unit enabled, nothing started), and systemd-analyze verifies the installed units.
#   package_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 || { cat "$tmp/cpack.log"; fail "cpack"; }
deb=$(ls "$tmp"/pkg/ds-server_*_amd64.deb)
info=$(dpkg-deb -f "$deb" Package Depends)
grep -q '^Package: ds-server$' <<<"$info" || fail "package name: $info"
grep -q 'libsystemd0' <<<"$info" || fail "Depends lacks libsystemd0: $info"

root=$tmp/root
mkdir -p "$root/etc" "$root/usr/sbin"
printf 'root:x:0:0:root:/root:/bin/bash\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"
printf 'root:*:19000:0:99999:7:::\n' >"$root/etc/shadow"
printf 'root:*::\n' >"$root/etc/gshadow"
dpkg-deb -x "$deb" "$root"
dpkg-deb -e "$deb" "$tmp/control"

for f in /usr/bin/ds-server /usr/bin/ds-cli /usr/lib/systemd/system/ds-server.service \
         /usr/lib/systemd/system/ds-server@.service /etc/ds-server/ds-server.json \
         /usr/share/doc/ds-server/README.md /usr/share/doc/ds-server/examples/nginx/ds-server.conf; do
  [ -e "$root$f" ] || fail "missing $f"
done
grep -qx '/etc/ds-server/ds-server.json' "$tmp/control/conffiles" || fail "the config is not a conffile"
"$root/usr/bin/ds-server" --version | grep -q '^ds-server ' || fail "installed ds-server --version"
grep -q '^ExecStart=/usr/bin/ds-server --config /etc/ds-server/ds-server.json' \
  "$root/usr/lib/systemd/system/ds-server.service" || fail "unit ExecStart does not name the installed paths"
grep -q '^Type=notify' "$root/usr/lib/systemd/system/ds-server.service" || fail "unit is not Type=notify"

DPKG_ROOT=$root sh "$tmp/control/postinst" configure >"$tmp/postinst.log" 2>&1 || { cat "$tmp/postinst.log"; fail "postinst"; }
user=$(grep '^ds-server:' "$root/etc/passwd") || fail "no ds-server user"
uid=$(cut -d: -f3 <<<"$user")
[ "$uid" -lt 1000 ] || fail "ds-server is not a system user (uid $uid)"
grep -q ':/usr/sbin/nologin$' <<<"$user" || fail "ds-server has a login shell: $user"
grep -q '^ds-server:' "$root/etc/group" || fail "no ds-server group"
[ -d "$root/var/lib/ds-server/models" ] || fail "no /var/lib/ds-server/models"
[ "$(stat -c %u "$root/var/lib/ds-server")" = "$uid" ] || fail "/var/lib/ds-server not owned by ds-server"
link=$root/etc/systemd/system/multi-user.target.wants/ds-server.service
[ -L "$link" ] || fail "ds-server.service not enabled"
# Enabled, not started: the postinst never calls systemctl start (it has nothing to start
# until an operator puts a model in place).
if grep -Eq 'systemctl( --[a-z-]+)* (re)?start|invoke-rc.d' "$tmp/control/postinst"; then fail "postinst starts the service"; fi
# Run again (upgrade): idempotent.
DPKG_ROOT=$root sh "$tmp/control/postinst" configure >"$tmp/postinst2.log" 2>&1 || { cat "$tmp/postinst2.log"; fail "postinst twice"; }
[ "$(grep -c '^ds-server:' "$root/etc/passwd")" = 1 ] || fail "postinst twice added the user twice"

# systemd-analyze verify checks each ExecStart binary on the host even with --root, so the
# installed units are verified as copies whose /usr/bin paths point into the scratch root.
mkdir -p "$tmp/units"
sed "s|/usr/bin/ds-server|$root/usr/bin/ds-server|g" "$root/usr/lib/systemd/system/ds-server.service" >"$tmp/units/ds-server.service"
sed "s|/usr/bin/ds-server|$root/usr/bin/ds-server|g" "$root/usr/lib/systemd/system/ds-server@.service" >"$tmp/units/ds-server@0.service"
for unit in ds-server.service ds-server@0.service; do
  out=$(systemd-analyze verify "$tmp/units/$unit" 2>&1) || { echo "$out"; fail "systemd-analyze verify $unit"; }
  # Some problems are reported without a failing exit status: none may appear.
  if grep -q . <<<"$out"; then echo "$out"; fail "systemd-analyze verify $unit reported problems"; fi
done
echo "package_test: ok ($(basename "$deb"))"
