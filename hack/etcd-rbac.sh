#!/bin/bash
# etcd-rbac.sh: give clusterrebootd least-privilege access to etcd.
#
# Creates, for one clusterrebootd cluster CLUSTER (config key `cluster`):
#   - the role  clusterrebootd-CLUSTER  with readwrite on the key prefix
#     /clusterrebootd/CLUSTER/ and nothing else;
#   - the users given with --user (default: one shared user
#     clusterrebootd-CLUSTER), each granted that role. With --password-file
#     they get that password (nodes set etcd.username and etcd.password_file);
#     without it they are certificate-only users: etcd (--client-cert-auth)
#     takes the Common Name of the client certificate as the user name, so
#     name each user after the CN of a node's certificate;
#   - while authentication is still off: the user root with the role root if
#     missing (etcd needs it to enable authentication), with the password of
#     --admin-password-file, else certificate-only (CN=root);
# and enables authentication. Idempotent: what exists is left as it is (an
# existing user's password is not changed), so it can run again after
# adding a node. See docs/security.md for the per-node versus shared user
# trade-off.
#
# Usage:
#   hack/etcd-rbac.sh [options] CLUSTER
#
# Options:
#   --endpoints URLS          comma-separated (default $ETCDCTL_ENDPOINTS or https://127.0.0.1:2379)
#   --cacert F --cert F --key F   TLS of the admin connection (client certificate CN=root
#                             authenticates as root when etcd runs with --client-cert-auth)
#   --admin-user NAME         admin user (default root)
#   --admin-password-file F   the admin's password (else: certificate authentication)
#   --user NAME               a user to create and grant the role; repeat for one user per node
#   --password-file F         password for the created users (else certificate-only users)
#   --backend etcdctl|gateway etcdctl (default when in PATH) or etcd's gRPC gateway through
#                             curl and jq (the HTTP API on the client port, /v3/auth/...).
#                             With --client-cert-auth the gateway needs a client certificate
#                             WITHOUT a Common Name once auth is on (etcd refuses CN-bearing
#                             certificates there), an admin password, and an etcd server
#                             certificate that is also valid for client authentication.
#   --dry-run                 print the commands, contact nothing
#
# Passwords never appear on a command line: etcdctl gets them on stdin
# (user add --interactive=false) or in its environment (ETCDCTL_PASSWORD),
# curl reads its request body from stdin. Passwords must not contain
# whitespace (etcdctl reads them with scanf).
set -euo pipefail

die() { echo "etcd-rbac: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }

endpoints=${ETCDCTL_ENDPOINTS:-https://127.0.0.1:2379}
cacert='' cert='' key='' admin_user=root admin_pw_file='' pw_file='' backend='' dry_run=false
users=()
while [ $# -gt 0 ]; do
	case $1 in
	--endpoints) endpoints=${2:?}; shift 2 ;;
	--cacert) cacert=${2:?}; shift 2 ;;
	--cert) cert=${2:?}; shift 2 ;;
	--key) key=${2:?}; shift 2 ;;
	--admin-user) admin_user=${2:?}; shift 2 ;;
	--admin-password-file) admin_pw_file=${2:?}; shift 2 ;;
	--user) users+=("${2:?}"); shift 2 ;;
	--password-file) pw_file=${2:?}; shift 2 ;;
	--backend) backend=${2:?}; shift 2 ;;
	--dry-run) dry_run=true; shift ;;
	-h | --help) usage ;;
	--*) die "unknown option $1 (--help)" ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || usage
cluster=$1
[[ $cluster =~ ^[A-Za-z0-9._-]+$ ]] || die "cluster name '$cluster' must match [A-Za-z0-9._-]+"
role=clusterrebootd-$cluster
prefix=/clusterrebootd/$cluster/
[ ${#users[@]} -gt 0 ] || users=("clusterrebootd-$cluster")
for u in "${users[@]}" "$admin_user"; do
	[[ $u =~ ^[A-Za-z0-9@._-]+$ ]] || die "user name '$u' must match [A-Za-z0-9@._-]+"
done
if [ -z "$backend" ]; then
	if command -v etcdctl >/dev/null; then backend=etcdctl; else backend=gateway; fi
fi
case $backend in
etcdctl) $dry_run || command -v etcdctl >/dev/null || die "etcdctl not found (or use --backend gateway)" ;;
gateway) $dry_run || { command -v curl >/dev/null && command -v jq >/dev/null; } || die "the gateway backend needs curl and jq" ;;
*) die "--backend must be etcdctl or gateway" ;;
esac

# readpw FILE: the password in FILE without a trailing newline.
readpw() {
	local pw
	pw=$(cat "$1")
	pw=${pw%$'\r'}
	[ -n "$pw" ] || die "$1 is empty"
	[[ $pw != *[[:space:]]* ]] || die "$1: the password must not contain whitespace"
	printf '%s' "$pw"
}

if ! $dry_run; then
	for f in "$pw_file" "$admin_pw_file"; do
		[ -z "$f" ] || readpw "$f" >/dev/null || exit 1
	done
fi

# show: print a command as it would run, secrets as <FILE>.
show() { printf '+ %s\n' "$*"; }

# --- etcdctl backend ---------------------------------------------------------
ctl_flags=(--endpoints="$endpoints")
[ -z "$cacert" ] || ctl_flags+=(--cacert="$cacert")
[ -z "$cert" ] || ctl_flags+=(--cert="$cert")
[ -z "$key" ] || ctl_flags+=(--key="$key")

# ctl ARGS...: etcdctl as the admin; the admin password in the environment.
ctl() {
	if [ -n "$admin_pw_file" ]; then
		ETCDCTL_USER=$admin_user ETCDCTL_PASSWORD=$(readpw "$admin_pw_file") etcdctl "${ctl_flags[@]}" "$@"
	else
		etcdctl "${ctl_flags[@]}" "$@"
	fi
}

# --- gateway backend ---------------------------------------------------------
gw=${endpoints%%,*}
curl_flags=(-sS --max-time 10 -H 'Content-Type: application/json')
[ -z "$cacert" ] || curl_flags+=(--cacert "$cacert")
[ -z "$cert" ] || curl_flags+=(--cert "$cert")
[ -z "$key" ] || curl_flags+=(--key "$key")
token=

# gwpost PATH: POST the JSON on stdin to the gateway; prints the response,
# fails (status 1) on an error response with its message on stderr.
gwpost() {
	local out hdr=()
	[ -z "$token" ] || hdr=(-H "Authorization: $token")
	out=$(curl "${curl_flags[@]}" "${hdr[@]}" --data-binary @- "$gw$1") || die "POST $gw$1 failed"
	if ! jq -e 'type == "object"' <<<"$out" >/dev/null 2>&1; then
		printf '%s\n' "$out" >&2 # not JSON: the gateway refused the request
		return 1
	fi
	if jq -e 'has("error") or has("code")' <<<"$out" >/dev/null 2>&1; then
		jq -r '"\(.message // .error)"' <<<"$out" >&2
		return 1
	fi
	printf '%s\n' "$out"
}

gwlogin() {
	[ -n "$admin_pw_file" ] || return 0 # certificate authentication
	local out
	if out=$(jq -n --arg n "$admin_user" --arg p "$(readpw "$admin_pw_file")" '{name:$n,password:$p}' | gwpost /v3/auth/authenticate 2>&1); then
		token=$(jq -r .token <<<"$out")
	elif [[ $out != *"not enabled"* ]]; then
		die "authenticate as $admin_user: $out"
	fi
}

b64() { printf '%s' "$1" | base64 -w0; }

# --- operations (each: dry-run print, etcdctl, gateway) ---------------------
# auth_enabled: etcd's authentication status; a failed query is retried
# (right after `auth enable` the first requests may meet an outdated token)
# and is an error, never "disabled".
auth_enabled() {
	local out
	for _ in 1 2 3 4 5; do
		case $backend in
		etcdctl) out=$(ctl auth status 2>&1) && break ;;
		gateway) out=$(echo '{}' | gwpost /v3/auth/status 2>&1) && break ;;
		esac
		sleep 1
	done || true
	case $backend in
	etcdctl) [[ $out == *"Authentication Status: true"* ]] && return 0
		[[ $out == *"Authentication Status: false"* ]] && return 1 ;;
	gateway) jq -e '.enabled == true' <<<"$out" >/dev/null 2>&1 && return 0
		jq -e 'has("header")' <<<"$out" >/dev/null 2>&1 && return 1 ;;
	esac
	die "cannot read the authentication status: $out"
}

role_exists() {
	case $backend in
	etcdctl) ctl role get "$1" >/dev/null 2>&1 ;;
	gateway) jq -n --arg r "$1" '{role:$r}' | gwpost /v3/auth/role/get >/dev/null 2>&1 ;;
	esac
}

user_exists() {
	case $backend in
	etcdctl) ctl user get "$1" >/dev/null 2>&1 ;;
	gateway) jq -n --arg u "$1" '{name:$u}' | gwpost /v3/auth/user/get >/dev/null 2>&1 ;;
	esac
}

role_add() {
	case $backend in
	etcdctl) ctl role add "$1" >/dev/null ;;
	gateway) jq -n --arg r "$1" '{name:$r}' | gwpost /v3/auth/role/add >/dev/null ;;
	esac
}

# role_grant_prefix ROLE PREFIX: readwrite on [PREFIX, prefix end).
role_grant_prefix() {
	case $backend in
	etcdctl) ctl role grant-permission --prefix=true "$1" readwrite "$2" >/dev/null ;;
	gateway)
		# The range end of a prefix ending in "/" is the prefix with "0".
		jq -n --arg r "$1" --arg k "$(b64 "$2")" --arg e "$(b64 "${2%/}0")" \
			'{name:$r,perm:{permType:"READWRITE",key:$k,range_end:$e}}' | gwpost /v3/auth/role/grant >/dev/null ;;
	esac
}

# user_add NAME [PWFILE]: with a password, else certificate-only.
user_add() {
	case $backend in
	etcdctl)
		if [ -n "${2:-}" ]; then
			readpw "$2" | ctl user add "$1" --interactive=false >/dev/null
		else
			ctl user add "$1" --no-password >/dev/null
		fi ;;
	gateway)
		if [ -n "${2:-}" ]; then
			jq -n --arg u "$1" --arg p "$(readpw "$2")" '{name:$u,password:$p}' | gwpost /v3/auth/user/add >/dev/null
		else
			jq -n --arg u "$1" '{name:$u,options:{no_password:true}}' | gwpost /v3/auth/user/add >/dev/null
		fi ;;
	esac
}

user_grant() {
	case $backend in
	etcdctl) ctl user grant-role "$1" "$2" >/dev/null ;;
	gateway) jq -n --arg u "$1" --arg r "$2" '{user:$u,role:$r}' | gwpost /v3/auth/user/grant >/dev/null ;;
	esac
}

auth_enable() {
	case $backend in
	etcdctl) ctl auth enable >/dev/null ;;
	gateway) echo '{}' | gwpost /v3/auth/enable >/dev/null ;;
	esac
}

# --- dry run -----------------------------------------------------------------
if $dry_run; then
	echo "# etcd-rbac: dry run ($backend backend); nothing is contacted"
	if [ "$backend" = etcdctl ]; then
		e="etcdctl ${ctl_flags[*]}"
		[ -z "$admin_pw_file" ] || e="ETCDCTL_USER=$admin_user ETCDCTL_PASSWORD=<$admin_pw_file> $e"
		show "$e role add $role                                  # unless it exists"
		show "$e role grant-permission --prefix=true $role readwrite $prefix"
		for u in "${users[@]}"; do
			if [ -n "$pw_file" ]; then
				show "<$pw_file> | $e user add $u --interactive=false   # unless it exists"
			else
				show "$e user add $u --no-password                   # unless it exists"
			fi
			show "$e user grant-role $u $role"
		done
		if [ -n "$admin_pw_file" ]; then
			show "<$admin_pw_file> | $e user add root --interactive=false   # unless auth is enabled or root exists"
		else
			show "$e user add root --no-password              # unless auth is enabled or root exists"
		fi
		show "$e user grant-role root root                # unless auth is enabled"
		show "$e auth enable                              # unless enabled"
	else
		c="curl ${curl_flags[*]} --data-binary @- $gw"
		[ -z "$admin_pw_file" ] || show "$c/v3/auth/authenticate   <<< {name:$admin_user,password:<$admin_pw_file>}"
		show "$c/v3/auth/role/add      <<< {name:$role}   # unless it exists"
		show "$c/v3/auth/role/grant    <<< {name:$role,perm:{permType:READWRITE,key:b64($prefix),range_end:b64(${prefix%/}0)}}"
		for u in "${users[@]}"; do
			if [ -n "$pw_file" ]; then
				show "$c/v3/auth/user/add      <<< {name:$u,password:<$pw_file>}   # unless it exists"
			else
				show "$c/v3/auth/user/add      <<< {name:$u,options:{no_password:true}}   # unless it exists"
			fi
			show "$c/v3/auth/user/grant    <<< {user:$u,role:$role}"
		done
		show "$c/v3/auth/user/add      <<< {name:root,...}   # unless auth is enabled or root exists"
		show "$c/v3/auth/user/grant    <<< {user:root,role:root}   # unless auth is enabled"
		show "$c/v3/auth/enable        <<< {}   # unless enabled"
	fi
	exit 0
fi

# --- run ---------------------------------------------------------------------
[ "$backend" = gateway ] && gwlogin
if role_exists "$role"; then
	echo "etcd-rbac: role $role exists"
else
	role_add "$role"
	echo "etcd-rbac: role $role created"
fi
role_grant_prefix "$role" "$prefix"
echo "etcd-rbac: role $role: readwrite on prefix $prefix"
for u in "${users[@]}"; do
	if user_exists "$u"; then
		echo "etcd-rbac: user $u exists (password unchanged)"
	else
		user_add "$u" "$pw_file"
		if [ -n "$pw_file" ]; then
			echo "etcd-rbac: user $u created with the password of $pw_file"
		else
			echo "etcd-rbac: user $u created without password (client certificate CN=$u)"
		fi
	fi
	user_grant "$u" "$role"
	echo "etcd-rbac: user $u has role $role"
done
if auth_enabled; then
	echo "etcd-rbac: authentication already enabled"
else
	# etcd enables authentication only when the user root has the role root.
	if ! user_exists root; then
		user_add root "$admin_pw_file"
		echo "etcd-rbac: user root created"
	fi
	user_grant root root
	auth_enable
	echo "etcd-rbac: authentication enabled"
fi
