GO      ?= go
BIN     ?= bin/etcd-nomad
DEMO_DIR ?= .demo
# Packages whose code starts goroutines run under the race detector, with
# -short: no agent or server process (internal/tier). RACE_FULL_PKGS run
# under it without -short as well: their code under test runs in the test
# process against a real agent or server (the Consul coordinator, the S3
# store), which -short skips. integration is not among them: its members are
# separate processes built without -race.
RACE_PKGS = ./task/... ./backends/... ./coord/... ./localmode/... ./integration/... ./status/... ./provider/... ./snapshot/... ./internal/clustertest/... ./identity/...
RACE_FULL_PKGS = ./coord/consul ./snapshot/s3

.PHONY: build tools browser test test-agents test-embedded test-long unit timing vet fmt vuln fuzz fuzz-short demo demo-down local-demo clean chaos chaos-hosts bench bench-scale sim mutate alerts image

build:
	$(GO) build -o $(BIN) ./cmd/etcd-nomad

## image: the container image for nomad { driver = "docker" }: the static
## binary (CGO_ENABLED=0) in a scratch image (CA certificates, user
## nonroot 65532), tagged $(IMAGE), and its `docker save` in
## bin/etcd-nomad-image-$(VERSION).tar for clients without a registry.
## Built by `docker import` (tools/image.sh): no registry, no base image, no
## builder. DOCKER_HOST picks the engine. docs/install.md: With Docker.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE   ?= etcd-nomad:$(VERSION)
image:
	@mkdir -p bin/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o bin/image/etcd-nomad ./cmd/etcd-nomad
	bash tools/image.sh bin/image/etcd-nomad $(IMAGE) bin/etcd-nomad-image-$(VERSION).tar

vet:
	$(GO) vet ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## tools: pinned Nomad and Consul built from Go modules into a cache
## outside the clone (reused when present).
tools:
	bash tools/build.sh

## browser: Chromium for the browser tests (cmd/demo opens the Consul and
## Nomad UIs with chromedp): Debian's chromium package, installed with
## apt-get only when no Chromium is on PATH. See tools/chromium.sh.
browser:
	@bash tools/chromium.sh >/dev/null

## vuln: govulncheck (built into the tools cache) against an offline copy of
## the Go vulnerability database (ETCD_NOMAD_VULNDB) or vuln.go.dev when
## reachable; always self-tests the scanner. See tools/vuln.sh.
vuln:
	bash tools/vuln.sh

## alerts: the Prometheus alerting rules in monitoring/ — promtool (built
## from the pinned Prometheus module into the tools cache, tools/promtool)
## checks them and runs their unit tests (monitoring/alerts_test.yml).
alerts:
	@promtool=$$(bash tools/build.sh promtool)/promtool-v0.316.0; \
	$$promtool check rules monitoring/alerts.yml && \
	$$promtool test rules monitoring/alerts_test.yml

## fuzz: Go native fuzzing of what parses untrusted input (the cluster
## definition, stored snapshots, members' /status, the cluster record, the
## sealed cluster CA), one target after the other, FUZZTIME each:
## `make fuzz FUZZTIME=10m`. Seeds are in each package's testdata/fuzz; a
## crasher is written there and must become a regression test.
## `make test` runs fuzz-short (a fixed number of executions per target).
FUZZ_TARGETS   = ./config:FuzzLoad ./snapshot:FuzzFetch ./status:FuzzMemberStatus ./coord:FuzzDecodeRecord ./certs:FuzzOpenSealed
FUZZTIME       ?= 10m
FUZZ_PARALLEL  ?= 1
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t#*:}; echo "fuzz $$fn in $$pkg for $(FUZZTIME)"; \
		$(GO) test -timeout 0 -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10s -parallel $(FUZZ_PARALLEL) $$pkg || exit 1; \
	done

# fuzz-short counts executions (about 5-10 s each here) instead of timing
# them: a -fuzztime duration races Go's fuzz coordinator at its deadline
# ("context deadline exceeded" with no failing input, golang/go#75804),
# which failed CI once; a count has no deadline to race.
FUZZ_SHORT = ./config:FuzzLoad:2000x ./snapshot:FuzzFetch:400x ./status:FuzzMemberStatus:15000x ./coord:FuzzDecodeRecord:150000x ./certs:FuzzOpenSealed:40000x
fuzz-short:
	@for t in $(FUZZ_SHORT); do \
		pkg=$${t%%:*}; rest=$${t#*:}; fn=$${rest%%:*}; n=$${rest#*:}; echo "fuzz $$fn in $$pkg, $$n"; \
		$(GO) test -timeout 10m -run '^$$' -fuzz "^$$fn$$" -fuzztime $$n -fuzzminimizetime 10s -parallel $(FUZZ_PARALLEL) $$pkg || exit 1; \
	done

## test: everything — formatting, vet, short fuzzing, unit, invariant,
## integration and e2e tests (real Nomad and Consul agents).
## The passes run through gotestsum (tools/gotestsum.sh): one line per
## package with its time, the failures' output again at the end, and every
## test's time in TEST_JSON (TEST_JSON.race and TEST_JSON.race-full for the
## race passes) for `make timing JSON=TEST_JSON`.
##
## After fmt, vet, build and tools, two lanes run at once (make -j2), each
## line of their output prefixed with the lane's name (tools/lane.sh):
##  - agents: the packages whose tests start Consul and Nomad agents, S3
##    servers or etcd-nomad processes and mostly wait on them
##    (TEST_AGENT_PKGS, e2e ~1050 s, integration ~580 s), -p TEST_AGENT_P;
##  - embedded: every other package (TEST_EMBEDDED_PKGS, embedded etcd
##    members: task ~400 s at about a fifth of a core), then alerts, vuln,
##    fuzz-short, and the race passes.
## The main pass is the two lanes' JSON (TEST_JSON.agents and
## TEST_JSON.embedded) put together in TEST_JSON; make fails if either lane
## fails, after both have ended. docs/test-timing.md has the figures.
TEST_JSON ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/etcd-nomad/test-last.json
GOTESTSUM = bash tools/gotestsum.sh --format pkgname-and-test-fails --format-hide-empty-pkg
LANE = bash tools/lane.sh
# Longest first: go test starts the packages in the order given, two at a
# time, so e2e has one slot to itself and the rest follow integration in
# the other.
TEST_AGENT_PKGS = ./e2e ./integration ./e2e/hosts ./chaos ./internal/devagents ./cmd/demo ./coord/consul ./e2e/acl ./provider/nomad
# Every package that is not an agent one, task (the longest) first: a
# package added to the module runs here unless it is listed above.
TEST_EMBEDDED_PKGS = ./task $(filter-out $(shell $(GO) list ./task $(TEST_AGENT_PKGS)),$(shell $(GO) list ./...))
TEST_AGENT_P ?= 2
TEST_EMBEDDED_P ?= 2
# The checks the embedded lane runs after its tests, one after the other.
TEST_CHECKS ?= alerts vuln fuzz-short
# -parallel of the agent lane: how many t.Parallel tests of e2e and
# integration run at once (no other package calls t.Parallel). 3 would save
# about a minute of e2e but puts three clusters' sticky disks (up to 45 GiB
# at the default quota) on the one dev Nomad client: docs/test-timing.md.
TEST_AGENT_PARALLEL ?= 2
# -vet=off: the vet prerequisite has just run every analyzer of go vet over
# every package and its tests, a superset of the few go test runs itself.
test: fmt vet build tools browser
	@mkdir -p $(dir $(TEST_JSON))
	@rm -f $(TEST_JSON) $(TEST_JSON).agents $(TEST_JSON).embedded $(TEST_JSON).race $(TEST_JSON).race-full
	@rc=0; $(MAKE) --no-print-directory -j2 test-agents test-embedded || rc=$$?; \
	cat $(TEST_JSON).agents $(TEST_JSON).embedded > $(TEST_JSON) 2>/dev/null; \
	echo "main pass (both lanes): $(TEST_JSON)"; exit $$rc

# The two lanes of `make test` (run by it, at once; alone they skip its
# fmt, vet, build and tools).
test-agents:
	@$(LANE) agents $(GOTESTSUM) --jsonfile $(TEST_JSON).agents -- -count=1 -vet=off -p $(TEST_AGENT_P) -parallel $(TEST_AGENT_PARALLEL) -timeout 40m $(TEST_AGENT_PKGS)

# Each step runs even when one before it failed (a failing run says all it
# can), and the lane fails if any did.
test-embedded:
	@rc=0; \
	$(LANE) embedded $(GOTESTSUM) --jsonfile $(TEST_JSON).embedded -- -count=1 -vet=off -p $(TEST_EMBEDDED_P) -timeout 40m $(TEST_EMBEDDED_PKGS) || rc=1; \
	for c in $(TEST_CHECKS); do $(LANE) embedded $(MAKE) --no-print-directory $$c || rc=1; done; \
	$(LANE) embedded $(GOTESTSUM) --jsonfile $(TEST_JSON).race -- -count=1 -vet=off -race -short -timeout 20m $(RACE_PKGS) || rc=1; \
	$(LANE) embedded $(GOTESTSUM) --jsonfile $(TEST_JSON).race-full -- -count=1 -vet=off -race -timeout 10m $(RACE_FULL_PKGS) || rc=1; \
	exit $$rc

## test-long: what is worth an hour, not in CI, one after the other:
## LONG_ROUNDS rounds of chaos (~20 s a round) and of chaos-hosts (~17 s a
## round; it skips, saying so, without root), `make sim` with LONG_STEPS
## steps (~10 min for 100 M), `make fuzz` with LONG_FUZZTIME per target (5
## targets) and `make mutate` (8-15 min; rewrites docs/mutation.md). Every step
## runs even when one before it failed; the failed ones are named at the end.
## About an hour with the defaults. SEED=7 seeds chaos, chaos-hosts and sim.
LONG_ROUNDS   ?= 20
LONG_STEPS    ?= 100000000
LONG_FUZZTIME ?= 5m
test-long: tools
	@failed=; \
	for step in "chaos ROUNDS=$(LONG_ROUNDS)" "chaos-hosts ROUNDS=$(LONG_ROUNDS)" "sim STEPS=$(LONG_STEPS)" \
		"fuzz FUZZTIME=$(LONG_FUZZTIME)" mutate; do \
		echo "== make $$step ($$(date -u +%H:%M:%SZ))"; s=$$(date +%s); \
		$(MAKE) --no-print-directory $$step || failed="$$failed [$$step]"; \
		echo "== make $$step: $$(( $$(date +%s) - s )) s"; \
	done; \
	if [ -n "$$failed" ]; then echo "test-long failed:$$failed"; exit 1; fi; echo "test-long passed"

## check: the inner loop, no agent process: gofmt, vet, go mod tidy, and
## the pure and embedded-etcd packages (the planner and its checker, the
## simulation's steps, config, certs, coordinators without Consul,
## snapshots without S3, status, the test kit, the documents' links) with
## -short, which starts no agent or server process (internal/tier): the
## tests that need one skip;
## and the simulation without -short (its 2 M steps of the correct system,
## about 15 s: it starts no process at all).
CHECK_PKGS = ./planner/... ./config/... ./certs/... ./coord ./coord/local/... ./coord/coordtest/... \
	./datadir/... ./jobs/... ./identity/... ./creds/... ./status/... ./snapshot ./snapshot/file/... ./snapshot/storetest/... \
	./provider ./provider/static/... ./provider/asg/... ./internal/clustertest ./internal/bench/... ./internal/procstat/... \
	./coord/consul ./snapshot/s3 ./internal/tier ./monitoring ./docs
.PHONY: check
check: fmt vet
	$(GO) mod tidy -diff
	$(GO) test -count=1 -short $(CHECK_PKGS)
	$(GO) test -count=1 ./sim/...

unit:
	$(GO) test -count=1 -short ./...

## timing: where a `make test` run's time went, from its JSON files (the main
## pass, JSON.race, JSON.race-full): per package and the slowest tests, in Markdown
## (docs/test-timing.md). `make timing JSON=~/.cache/etcd-nomad/test-last.json`.
JSON ?= $(TEST_JSON)
timing:
	@bash tools/timing.sh $(JSON)

## demo: Consul and Nomad dev agents and a 3-member cluster deployed with
## `nomad job run`; `make demo-down` stops everything. `make demo
## DRIVER=docker`: the members in containers of an image of this tree (built
## by tools/image.sh on a Docker engine of the demo's own, stopped by
## demo-down; needs root and Docker, which `make tools` installs).
DRIVER ?= raw_exec
demo: build
	bash tools/build.sh nomad consul etcdctl $(if $(filter docker,$(DRIVER)),docker)
	$(if $(filter docker,$(DRIVER)),CGO_ENABLED=0 $(GO) build -trimpath -o bin/image/etcd-nomad ./cmd/etcd-nomad)
	$(GO) run ./cmd/demo up -dir $(DEMO_DIR) -bin $(BIN) -driver $(DRIVER)

demo-down:
	$(GO) run ./cmd/demo down -dir $(DEMO_DIR)

## local-demo: the same without Nomad (member processes on 127.0.0.1).
local-demo: build
	$(BIN) local up -size 3 -dir .local-demo

clean:
	rm -rf bin $(DEMO_DIR) .local-demo

## chaos: randomized fault rounds (kill -9, SIGSTOP, majority kill, data
## wipe, Consul/Nomad restarts, one Consul state loss) under a client load
## checked for linearizability. `make chaos ROUNDS=50 SEED=123`; the seed is
## printed so a failure can be replayed. `make test` runs 5 rounds.
ROUNDS ?= 20
SEED   ?=
chaos: tools
	CHAOS_ROUNDS=$(ROUNDS) CHAOS_SEED=$(SEED) $(GO) test -count=1 -timeout $$(( 30 + $(ROUNDS) * 6 ))m -v -run 'TestChaos$$' ./chaos

## chaos-hosts: the same on the multi-host testbed (devagents.StartHosts:
## network namespaces, needs root): partitions between hosts, isolating the
## leader's host, cutting a host off from the servers, 2 | 1 | clients
## splits, a host's link down, host crashes, node drains, Nomad and Consul
## server outages, two allocations stopped at once, two faults at once.
## `make chaos-hosts ROUNDS=100 SEED=7`; SERVERS=3 for three server hosts;
## CHAOS_FAULTS=unplug,two (words of fault names) keeps some kinds only.
SERVERS ?= 1
chaos-hosts: tools
	CHAOS_HOSTS=1 CHAOS_HOSTS_SERVERS=$(SERVERS) CHAOS_ROUNDS=$(ROUNDS) CHAOS_SEED=$(SEED) $(GO) test -count=1 -timeout $$(( 30 + $(ROUNDS) * 6 ))m -v -run 'TestChaosHosts$$' ./chaos

## bench: etcd-nomad against plain etcd on this machine, each figure with
## its baseline from the same run (about 15 minutes; not part of `make
## test`). Prints a table, writes bench-results.json and docs/benchmarks.md.
## BENCH_FLAGS="-only e" picks figures (go run ./cmd/bench -h): e snapshot
## save/restore, a KV, f overhead, b/c Nomad (bootstrap, kill -9,
## replacement, rolling update with raw_exec, and the same with the docker
## driver on the kit's own engine next to them; -nomad-rounds N deployments
## per driver, alternating), d quorum loss, g continuous
## backup (cost, RPO, replay of -replay-events, 1 M by default), h the
## multi-host testbed (idle API calls, partition, heal, drain, host crash;
## about 3 minutes; needs root).
BENCH_FLAGS ?=
bench: tools
	$(GO) run ./cmd/bench $(BENCH_FLAGS)

## bench-scale: the curves of docs/scaling.md (not in CI, not in `make
## test`): members (3, 5, 7 local members: bootstrap, kill -9 of the
## leader, replacement with its data lost, quorum loss, put throughput, each
## next to plain etcd of the same size), data size (256 MiB and 1 GiB:
## snapshot save/restore against etcdctl/etcdutl, a learner's catch-up and
## promotion, defrag, the disk's write rate) and clusters per Nomad (1, 5,
## 10 clusters of 3 members on the dev agents: idle API requests, CPU,
## memory, cold start; a paper estimate for 100 and 1,000). Writes
## docs/scaling.md and docs/scaling/*.png; about 40 minutes.
## SCALE_FLAGS="-scale-only data -scale-4g" adds 4 GiB (~25 GB of disk);
## `go run ./cmd/bench -h` lists the -scale-* flags.
SCALE_FLAGS ?=
bench-scale: tools
	$(GO) run ./cmd/bench -scale $(SCALE_FLAGS)

## sim: a long exploration of the whole-system simulation (sim/): every
## violation prints its seed and trace. `make sim STEPS=100000000 SEED=7`;
## without SEED the seed is the time (printed).
STEPS ?= 10000000
sim:
	SIM_STEPS=$(STEPS) SIM_SEED=$(SEED) $(GO) test -count=1 -timeout 0 -v -run 'TestExplore$$' ./sim

## mutate: mutation testing with the hand-written mutants of
## cmd/mutate/mutants.txt over planner/, config/, snapshot/, coord/ and task/
## (each breaks one documented rule); writes docs/mutation.md. About 15
## minutes; not part of `make test`. MUTATE_FLAGS="-only task" picks some.
MUTATE_FLAGS ?=
mutate:
	$(GO) run ./cmd/mutate -out docs/mutation.md $(MUTATE_FLAGS)
