# vipd — see README.md. Targets a newcomer needs: `make demo`, `make test`.
SHELL   := /bin/bash
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
BIN     := bin

# The package's version: 0.0+git<count>.<YYYYMMDD>.<hash>[+dirty], the
# number of commits first, so that apt and dpkg order builds by age (a
# hash alone did not: 0.0~giteec0798 sorted above 0.0~gitb9a16d0, the
# newer); packaging/debversion says why each part. A release sets it:
# make deb DEBVERSION=1.0.
DEBVERSION ?= $(shell packaging/debversion)

.PHONY: all deb deps test-deps build test test-busy test-unit test-race test-bench-smoke lint fuzz cover hooks demo demo-ecmp demo-fleet demo-ha test-failover test-quic test-fleet bench pgo pgo-compare clean

all: build

# What building needs from the network: the Go modules. `make build` and
# `make deb` need nothing else (the package is made with dpkg-deb alone),
# so a build box gets no test tools.
deps:
	$(GO) mod download

# apt-need installs, as root, the Debian packages among $(1) (package:command
# pairs; package:/path for a file) whose command or file is missing, saying
# why ($(2)); without root it does nothing, and the tests that need a
# missing command skip with a message.
define apt-need
	@if [ "$$(id -u)" = 0 ]; then \
		need=""; for p in $(1); do c=$${p#*:}; \
			case $$c in /*) [ -e "$$c" ];; *) command -v "$$c" >/dev/null;; esac || need="$$need $${p%%:*}"; \
		done; \
		if [ -n "$$need" ]; then \
			echo "installing$$need ($(2))"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y$$need; \
		fi; \
	fi
endef

# Everything the tests need besides the Go modules, as root and when
# missing: iproute2 (the ip tool, used by the privileged tests to build
# namespaces), bird2 (BIRD 2, the upstream router of the BGP tests),
# nftables (a backend that resets clients in the outlier test), lintian
# (the package's test runs it on the .deb), bash-completion (the test of
# vipd's completion loads it), chromium (the headless browser that loads
# the status page in its end-to-end test), keepalived (the example
# keepalived.conf is checked by it; its unit starts nothing without a
# /etc/keepalived/keepalived.conf), and promtool (the alerting
# rules' test), taken out of Debian's prometheus package without
# installing it: the package would start a Prometheus server. etcd-server
# (Debian's etcd 3.4, /usr/bin/etcd: testing/etcdtest's test against the
# version an operator on Debian gets) is installed, but its package
# enables etcd.service and starts it on 127.0.0.1:2379: the tests run their
# own etcd on ports they pick, so the unit is disabled and, if running,
# stopped (under no systemd, as in a container, nothing was started).
test-deps: deps
	$(call apt-need,iproute2:ip bird2:bird bird2:birdc nftables:nft lintian:lintian bash-completion:/usr/share/bash-completion/bash_completion chromium:chromium keepalived:keepalived etcd-server:etcd,the tests need them)
	$(etcd-unit-off)
	@if [ "$$(id -u)" = 0 ] && ! command -v promtool >/dev/null && [ ! -x $(BIN)/tools/promtool ]; then \
		echo "extracting promtool from Debian's prometheus package into $(BIN)/tools (the rules test needs it; no server is installed)"; \
		tmp=$$(mktemp -d) && chmod 755 "$$tmp" && \
		{ (cd "$$tmp" && apt-get download -qq prometheus 2>/dev/null) || \
		  { apt-get update -qq && (cd "$$tmp" && apt-get download -qq prometheus 2>/dev/null); }; } && \
		mkdir -p $(BIN)/tools && dpkg-deb --fsys-tarfile "$$tmp"/prometheus_*.deb | tar -xO ./usr/bin/promtool > $(BIN)/tools/promtool.new && \
		chmod 755 $(BIN)/tools/promtool.new && mv $(BIN)/tools/promtool.new $(BIN)/tools/promtool; \
		rm -rf "$$tmp"; \
	fi

# etcd-unit-off disables and stops etcd.service, which etcd-server's
# package enables and starts on 127.0.0.1:2379: the tests and demos run
# their own etcd on ports they pick (under no systemd, as in a container,
# nothing was started).
define etcd-unit-off
	@if [ "$$(id -u)" = 0 ] && [ -e /lib/systemd/system/etcd.service ] && command -v systemctl >/dev/null; then \
		if systemctl is-enabled -q etcd.service 2>/dev/null; then \
			echo "disabling etcd.service (installed by etcd-server; the tests start their own etcd)"; \
			systemctl disable -q etcd.service; \
		fi; \
		if systemctl is-active -q etcd.service 2>/dev/null; then \
			echo "stopping etcd.service"; systemctl stop etcd.service; \
		fi; \
	fi
endef

build: deps
	$(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN)/vipd ./cmd/vipd

# The Debian package, with dpkg-deb alone: /usr/sbin/vipd and vipd-decap,
# /etc/vipd/vipd.toml (a conffile, from config.toml.example), the systemd
# units, the man pages (vipd.toml(5) generated from the schema), the bash
# completion, the copyright file and changelog under /usr/share/doc/vipd/,
# and the Grafana dashboard and Prometheus rules under /usr/share/vipd/;
# maintainer scripts (packaging/deb/postinst, prerm, postrm) that neither
# enable, start nor restart the units, stop them on removal and remove
# their enable links on purge. Needs Go and dpkg-deb, nothing the tests
# need.
deb: deps
	@[ -n '$(DEBVERSION)' ] || { echo "make deb: no version (packaging/debversion needs a full git clone): make deb DEBVERSION=..."; exit 1; }
	mkdir -p $(BIN)
	packaging/mkdeb '$(DEBVERSION)' $(BIN)/vipd_$(DEBVERSION)_$$($(GO) env GOARCH).deb

# Unit tests (the fuzz seed corpora under */testdata/fuzz run as part of
# them) and the end-to-end suite (testing/e2e/), the race detector (-short: without
# the end-to-end suite), and a one-iteration run of every benchmark so none
# rots. Privileged tests (network namespaces, AF_XDP, the end-to-end suite)
# run when make is run as root and skip with a message otherwise.
test: test-deps lint test-unit test-race test-bench-smoke

# make test while every CPU is kept busy by a CPU hog (stress-ng --cpu
# $(nproc)), as on a shared CI machine: no test may need an idle one.
# Installs Debian's stress-ng when missing (as root; not a test
# dependency, so not in test-deps). The hog is started here and killed by its
# PID when the run ends, however it ends (--timeout bounds it should this
# shell be killed outright); the run's exit status and duration are
# printed. Not part of make test.
test-busy:
	@if ! command -v stress-ng >/dev/null; then \
		if [ "$$(id -u)" != 0 ]; then echo "make test-busy needs stress-ng: sudo make test-busy installs it"; exit 1; fi; \
		echo "installing stress-ng (the CPU hog of make test-busy)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng >/dev/null || exit 1; \
	fi
	@cpus=$$(nproc); stress-ng --cpu "$$cpus" --timeout 3h >/dev/null 2>&1 & hog=$$!; \
	trap 'kill $$hog 2>/dev/null; wait $$hog 2>/dev/null' EXIT INT TERM; \
	start=$$(date +%s); $(MAKE) test; rc=$$?; \
	echo "make test-busy: make test exited $$rc after $$(( $$(date +%s) - start )) s under stress-ng --cpu $$cpus"; \
	exit $$rc

# -timeout bounds one package's run. The end-to-end suite is the longest:
# 426 s of a 783 s make test-busy on a 2-CPU machine (measured on a fresh
# clone); 20 min leaves room for a slower or busier one.
test-unit:
	$(GO) test -count=1 -timeout 20m ./...

test-race:
	$(GO) test -count=1 -race -short -timeout 20m ./...

# Every fuzz target of the module, one after another, each for FUZZTIME
# (make fuzz FUZZTIME=1m). The targets are what go test -list '^Fuzz'
# finds in the packages whose tests declare one, so a new target joins
# by itself. It stops at the first failure: go test then writes the
# failing input under the package's testdata/fuzz/<target>/, to commit
# with the fix (from then on make test runs it with the seed corpus).
# The inputs that only widen coverage stay in go's cache
# ($$(go env GOCACHE)/fuzz), not in the tree. Not part of make test.
FUZZTIME ?= 10s
fuzz:
	@start=$$(date +%s); n=0; \
	pkgs=$$(grep -rlE --include='*_test.go' --exclude-dir=.git --exclude-dir=$(BIN) '^func Fuzz[A-Z0-9_]' . | xargs -r -n1 dirname | sort -u); \
	for p in $$pkgs; do \
		targets=$$($(GO) test -list '^Fuzz' $$p | grep '^Fuzz') || { echo "make fuzz: go test -list failed in $$p"; exit 1; }; \
		for f in $$targets; do \
			echo "== $$p $$f ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$p || { echo "make fuzz: $$f in $$p failed"; exit 1; }; \
			n=$$((n+1)); \
		done; \
	done; \
	echo "make fuzz: $$n targets, $(FUZZTIME) each, no failure, $$(( $$(date +%s) - start )) s"

# Statement coverage per package, each package by its own tests (go test
# -cover's number: code reached only from another package's tests, as
# testbed's from testing/e2e/, does not count, nor what testing/e2e/ runs in the vipd
# binaries it starts). It runs what test-unit runs — every package, the
# end-to-end suite included, the privileged tests as root — and prints
# a Markdown table sorted by package, then the total; a package without
# statements of its own shows "-", one whose tests failed says so and
# the target fails. COVER_PKGS narrows it: make cover COVER_PKGS=./conntrack/
# The profile is left in $(BIN)/cover.out (go tool cover -html=...).
# -pgo=off: with cmd/vipd's default.pgo, a coverage build of it beside a
# package without tests (control/admin/client) fails to link with
# "fingerprint mismatch" (golang/go#80891); coverage does not depend on
# the profile.
COVER_PKGS ?= ./...
cover:
	@mkdir -p $(BIN); start=$$(date +%s); \
	$(GO) test -count=1 -pgo=off -timeout 20m -coverprofile=$(BIN)/cover.out $(COVER_PKGS) 2>&1 | tee $(BIN)/cover.log; rc=$${PIPESTATUS[0]}; \
	echo; echo "make cover: go test exited $$rc after $$(( $$(date +%s) - start )) s"; echo; \
	mod=$$($(GO) list -m); \
	{ $(GO) list $(COVER_PKGS) | sort; echo "--profile"; tail -n +2 $(BIN)/cover.out; echo "--log"; cat $(BIN)/cover.log; } | \
	awk -v mod="$$mod" ' \
		$$0 == "--profile" || $$0 == "--log" { part = $$0; next } \
		part == "" { pkgs[++np] = $$1; next } \
		part == "--profile" { n[$$1] = $$2; if ($$3 > 0) c[$$1] = 1; next } \
		$$1 == "FAIL" && NF >= 2 { failed[$$2] = 1 } \
		END { for (k in n) { p = k; sub(/:[^:]*$$/, "", p); sub(/\/[^\/]*$$/, "", p); st[p] += n[k]; if (k in c) hit[p] += n[k] } \
			print "| package | statements | covered |"; print "|---|---:|---:|"; \
			for (i = 1; i <= np; i++) { p = pkgs[i]; name = p == mod ? "." : substr(p, length(mod) + 2); \
				note = p in failed ? " (tests failed)" : ""; \
				if (st[p] == 0) printf "| %s | - | -%s |\n", name, note; \
				else printf "| %s | %d | %.1f%%%s |\n", name, st[p], 100 * hit[p] / st[p], note; \
				S += st[p]; H += hit[p] } \
			if (S > 0) printf "| **total** | %d | %.1f%% |\n", S, 100 * H / S }'; \
	exit $$rc

# Needs root and keepalived (make test-deps): the keepalived failover
# scenarios five times in a row, as CI runs them after make test.
test-failover: test-deps
	$(GO) test -count=5 -run '^TestKeepalivedFailover$$' -timeout 15m ./testing/e2e/

# Needs root and BIRD (make test-deps): the QUIC-LB end-to-end scenarios
# (client address change, rotation, churn on the ECMP bed, with quic-go
# on both ends) five times in a row, as CI runs them after make test.
test-quic: test-deps
	$(GO) test -count=5 -run '^(TestQUICAddressChange|TestQUICRotation|TestQUICChurn)$$' -timeout 15m ./testing/e2e/

# Needs root and BIRD (make test-deps): the fleet's end-to-end scenarios
# (three boxes following a 3-member etcd: push, fleet drain, quorum lost,
# a restart from the cache, catch-up past a compaction, a revision one box
# refuses) five times in a row, as CI runs them after make test.
test-fleet: test-deps
	$(GO) test -count=5 -run '^TestFleet$$' -timeout 15m ./testing/e2e/

test-bench-smoke:
	$(GO) test -count=1 -short -run '^$$' -bench . -benchtime=1x -timeout 10m ./...

# gofmt, go.mod and go.sum tidy and verified, go vet, staticcheck and
# checklocks, all with zero findings. staticcheck runs
# at a pinned version with go run, outside the module graph, so its own
# dependencies never move vipd's (the Go module proxy serves it; the first
# run downloads and builds it, about 30 s).
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# checklocks (gVisor's lock analyzer, pinned the same way) checks the
# +checklocks annotations: every access to an annotated field, and every
# call of an annotated function, holds the lock it names. -inferred=false
# turns off its hints to annotate more fields, which also fire on fields
# set once and only read under a lock. Mind two limits of the analyzer:
# a guard is a field of the same struct or a package variable, and
# annotations go wrong after a line that declares two fields.
CHECKLOCKS ?= $(GO) run gvisor.dev/gvisor/tools/checklocks/cmd/checklocks@v0.0.0-20260905035102-160fafc42237

# go mod tidy -diff fails, printing the change, when go.mod or go.sum says
# other than what the code imports (a dependency left over, one missing);
# go mod verify, when a module in the cache no longer matches the hash
# go.sum recorded. tidy needs every module of the graph, the tests'
# dependencies of vipd's dependencies too, which the Go module proxy
# serves (the first run downloads them, a few seconds).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) mod verify
	$(GO) vet ./...
	$(STATICCHECK) ./...
	$(CHECKLOCKS) -inferred=false ./control/daemon/ ./control/bgp/ ./control/fleet/ ./health/tunprobe/ ./internal/ratelog/

# Installs a git pre-commit hook that runs gofmt and go vet on the
# packages whose Go files are staged (.githooks/pre-commit).
hooks:
	mkdir -p "$$(git rev-parse --git-path hooks)"
	install -m 755 .githooks/pre-commit "$$(git rev-parse --git-path hooks)/pre-commit"
	@echo "installed $$(git rev-parse --git-path hooks)/pre-commit"

# Needs root: builds vipd, brings up the namespaces, runs vipd with
# config.toml.example, sends NAT and DSR traffic, prints what happened, runs
# vipd status, weight, top and conns as an operator would, and
# removes everything. Installs iproute2 (the ip tool) when missing.
demo: build
	$(call apt-need,iproute2:ip,make demo needs them)
	$(GO) run ./testing/testbed/demo

# Needs root and bird2 (installed here when missing): two vipd boxes behind BIRD
# announcing the VIPs over BGP, the router's ECMP route, the traffic split,
# one box killed silently while 100 connections stream, and how many broke.
demo-ecmp: build
	$(call apt-need,iproute2:ip bird2:bird bird2:birdc,make demo-ecmp needs them)
	$(GO) run ./testing/testbed/demo-ecmp

# Needs root and keepalived (installed here when missing): two vipd boxes on
# one segment under keepalived with the package's keepalived.conf, no BGP;
# vipd killed on the active box while 200 connections stream, and how many
# broke.
# Needs root, bird2 and etcd-server (installed here when missing; etcd's own
# unit disabled): three vipd boxes behind BIRD taking their VIPs from one
# fleet in a 3-member etcd; a push, a fleet drain with -wait, etcd's
# quorum killed while 100 connections stream, vipd fleet status at each
# step, and how many connections broke.
demo-fleet: build
	$(call apt-need,iproute2:ip bird2:bird bird2:birdc etcd-server:etcd,make demo-fleet needs them)
	$(etcd-unit-off)
	$(GO) run ./testing/testbed/demo-fleet

demo-ha: build
	$(call apt-need,iproute2:ip keepalived:keepalived,make demo-ha needs them)
	$(GO) run ./testing/testbed/demo-ha

# Needs root: the in-memory Go benchmarks (pipeline incl. 1M flows,
# conntrack, hashing), then the packets-per-second rig in throwaway
# namespaces: the box-limited table (the box's receive NAPI threaded and
# pinned with the box program to CPU 1, trafgen on CPU 0: nftables DNAT,
# the bare AF_XDP forwarder, vipd NAT and DSR with 1 and 64,512 flows on
# AF_XDP and AF_PACKET), then the sender-limited one (ceiling, Linux
# forwarding, nftables, the forwarder, vipd with 1 and 2 queues).
# Writes bench/results/latest.md and latest.svg in about 10 minutes.
# BENCH_FLAGS passes flags to bench/cmd/bench, e.g. only the box-limited
# rows: make bench BENCH_FLAGS='-skip-inmem -tables box'.
# Installs iproute2, trafgen (netsniff-ng), nftables and valgrind
# (instruction counts against the baseline) when they are missing, and
# tries perf (linux-perf), which adds CPU profiles to the report.
bench: export PATH := $(PATH):/usr/sbin:/sbin
bench: deps
	@if [ "$$(id -u)" != 0 ]; then echo "make bench needs root (network namespaces, XDP): sudo make bench"; exit 1; fi
	@need=""; for p in iproute2:ip netsniff-ng:trafgen nftables:nft valgrind:valgrind; do command -v $${p#*:} >/dev/null 2>&1 || need="$$need $${p%%:*}"; done; \
	if [ -n "$$need" ]; then \
		echo "make bench: installing missing Debian packages:$$need"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null || exit 1; \
	fi; \
	if ! command -v perf >/dev/null 2>&1; then \
		echo "make bench: installing linux-perf for the CPU profiles"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null; } || \
			echo "make bench: linux-perf could not be installed: no profiles in the report"; \
	fi
	$(GO) run ./bench/cmd/bench -out bench/results $(BENCH_FLAGS)

# Profile-guided optimization: `make pgo` writes cmd/vipd/default.pgo, a CPU
# profile of the in-memory pipeline benchmarks (NAT and DSR, hits and
# misses, both families), which go build then uses for vipd; pgo-compare
# runs the same benchmarks built with and without it, in turn (benchstat
# table). The repository ships the profile: measured here it cuts 5-7% of
# the instructions per packet and 3-13% of the time (README,
# "Profile-guided optimization"); refresh it after changing the pipeline.
PGO_BENCH := ^Benchmark(Pipeline|Hit)$$
pgo: deps
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(GO) test -run '^$$' -bench '$(PGO_BENCH)' -benchtime 1s -cpuprofile "$$tmp/cpu.pprof" -o "$$tmp/dataplane.test" ./dataplane >/dev/null && \
	cp "$$tmp/cpu.pprof" cmd/vipd/default.pgo && echo "wrote cmd/vipd/default.pgo"

pgo-compare: deps
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(GO) test -c -pgo=off -o "$$tmp/off.test" ./dataplane && \
	$(GO) test -c -pgo=$(CURDIR)/cmd/vipd/default.pgo -o "$$tmp/pgo.test" ./dataplane && \
	for i in 1 2 3 4 5 6; do for v in off pgo; do \
		(cd dataplane && "$$tmp/$$v.test" -test.run '^$$' -test.bench '^BenchmarkPipeline$$/^(nat|dsr)$$/^(hit|miss)$$/^flows=(1|100000)$$/^64B$$' -test.benchtime 300ms && \
		 "$$tmp/$$v.test" -test.run '^$$' -test.bench '^BenchmarkHit$$' -test.benchtime 300ms) >> "$$tmp/$$v.txt"; \
	done; done && \
	if command -v benchstat >/dev/null; then benchstat "$$tmp/off.txt" "$$tmp/pgo.txt"; \
	else $(GO) run golang.org/x/perf/cmd/benchstat@latest "$$tmp/off.txt" "$$tmp/pgo.txt"; fi

clean:
	rm -rf $(BIN)
	$(GO) clean -testcache
