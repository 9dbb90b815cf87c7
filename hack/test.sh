#!/usr/bin/env bash
# test.sh is `make test`, everything CI runs (.ci/run): it installs missing system
# packages (hack/deps.sh), builds or reuses every tool the tests run, runs the checks
# (gofmt, generated files current, go vet, golangci-lint) and go test over the whole
# module. It prints how long each phase took.
#
# Two phases:
#   1. The tool builds and the first checks (gofmt, generated files current: make
#      generate rewrites files the tests read, so it runs before them) are independent
#      of one another and run as concurrent jobs (at most $BERTH_JOBS at once, default 3:
#      one go build alone keeps 2 cores about 90% busy, measured on helm's, and its
#      downloads and single-package stretches leave the rest to another).
#   2. go test, and beside it golangci-lint then go vet at the lowest CPU priority
#      (nice 19): the tests leave the cores about 60% idle, waiting on control planes and
#      processes, and the checks use that idle time instead of a phase of their own.
#      Nothing the checks read changes while they run, and they write nothing the tests
#      read. go vet runs with -race, the build go test makes: it then finds every package
#      compiled already (a package vetted after go test -race compiled 0 packages, 323
#      without -race) instead of compiling the module a second time; no file of berth is
#      built only without race. Test binaries are linked without symbol table and DWARF
#      (-ldflags='-s -w': a quarter less link time; stack traces need neither).
# Each job's output goes to its own log, printed when the job fails. The script fails
# when any job, check or test fails.
#
#   GO_TEST_FLAGS   flags for go test (default: -race -count=1 -timeout=30m; -p 4 is held
#                   back until a kwok stall seen once under it, in TestDriftIsRepaired,
#                   is explained)
#   BERTH_JOBS      concurrent jobs in the build phase (default 3)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO_TEST_FLAGS=${GO_TEST_FLAGS:--race -count=1 -timeout=30m}
jobs_max=${BERTH_JOBS:-3}
logs=$(mktemp -d)
declare -A name_of=() # the running jobs, by process (group) ID
# On the way out (a failure, Ctrl-C, SIGTERM) no build is left running: each job is a
# process group of its own (set -m below), ended whole.
cleanup() {
	local pid
	for pid in "${!name_of[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
	rm -rf "$logs"
}
trap cleanup EXIT
# A non-interactive bash waiting in `wait -n` does not die of SIGINT by itself.
trap 'exit 130' INT
trap 'exit 143' TERM

began=$(date +%s)
since() { echo "$(($(date +%s) - $1))s"; }

phase_start=$(date +%s)
hack/deps.sh
echo "== deps: $(since "$phase_start")" >&2

# checks runs the given make targets one after another (make generate rewrites files
# that vet and lint read, so they do not overlap), timing each.
checks() {
	local step start
	for step in "$@"; do
		start=$(date +%s)
		make --no-print-directory "$step" || { echo "== checks: $step FAILED" >&2; return 1; }
		echo "== checks: $step in $(since "$start")" >&2
	done
}

# The jobs, longest first so the phase does not end on a long build started last.
# Each is a command; its last line of stdout is kept (the tools print their directory or
# binary there).
names=(testbin ingress checks metallb helm dns netpol registry golangci-lint images promtool)
declare -A job=(
	[testbin]="hack/testbin.sh"
	[ingress]="hack/ingress.sh"
	[checks]="checks fmt-check generate-check"
	[metallb]="hack/metallb.sh"
	[helm]="hack/tool.sh helm"
	[dns]="hack/dns.sh"
	[netpol]="hack/netpol.sh"
	[registry]="hack/registry.sh"
	[images]="hack/images.sh"
	[promtool]="hack/tool.sh promtool"
	[golangci-lint]="hack/tool.sh golangci-lint"
)

phase_start=$(date +%s)
failed=()
# reap waits for one job to end and reports it.
reap() {
	local pid rc=0
	wait -n -p pid || rc=$?
	local name=${name_of[$pid]}
	unset "name_of[$pid]"
	local took
	took=$(cat "$logs/$name.time" 2>/dev/null || echo "?")
	if [ "$rc" -eq 0 ]; then
		grep '^== ' "$logs/$name.log" >&2 || true
		echo "== $name: ok in ${took}s" >&2
	else
		echo "== $name: FAILED (exit $rc) after ${took}s; its output:" >&2
		cat "$logs/$name.log" >&2
		failed+=("$name")
	fi
}
for name in "${names[@]}"; do
	while [ "${#name_of[@]}" -ge "$jobs_max" ]; do reap; done
	set -m
	(
		start=$(date +%s)
		rc=0
		# shellcheck disable=SC2086 # a job is a command and its arguments
		${job[$name]} >"$logs/$name.out" 2>"$logs/$name.log" || rc=$?
		cat "$logs/$name.out" >>"$logs/$name.log"
		echo "$(($(date +%s) - start))" >"$logs/$name.time"
		exit "$rc"
	) &
	set +m
	name_of[$!]=$name
done
while [ "${#name_of[@]}" -gt 0 ]; do reap; done
echo "== tools and checks: $(since "$phase_start")" >&2
if [ "${#failed[@]}" -gt 0 ]; then
	echo "== failed: ${failed[*]} (total $(since "$began"))" >&2
	exit 1
fi

dir() { tail -n 1 "$logs/$1.out"; }
phase_start=$(date +%s)
# The late checks, as a job of their own (reaped by the cleanup on the way out).
set -m
(
	start=$(date +%s)
	rc=0
	VET_FLAGS=-race nice -n 19 bash -c "$(declare -f since checks); checks lint vet" >"$logs/late-checks.log" 2>&1 || rc=$?
	echo "$(($(date +%s) - start))" >"$logs/late-checks.time"
	exit "$rc"
) &
set +m
name_of[$!]=late-checks
rc=0
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
BERTH_TESTBIN=$(dir testbin) BERTH_IMAGES=$(dir images) BERTH_REGISTRY=$(dir registry) \
	BERTH_NETPOL=$(dir netpol) BERTH_DNS=$(dir dns) BERTH_INGRESSCTL=$(dir ingress) \
	BERTH_METALLB=$(dir metallb) BERTH_HELM=$(dir helm) BERTH_PROMTOOL=$(dir promtool) \
	go test -ldflags='-s -w' $GO_TEST_FLAGS ./... || rc=$?
echo "== go test: $(since "$phase_start") (exit $rc)" >&2
reap
echo "== go test and late checks: $(since "$phase_start")" >&2
echo "== total: $(since "$began")" >&2
if [ "$rc" -ne 0 ] || [ "${#failed[@]}" -gt 0 ]; then
	[ "${#failed[@]}" -eq 0 ] || echo "== failed: ${failed[*]}" >&2
	exit 1
fi
