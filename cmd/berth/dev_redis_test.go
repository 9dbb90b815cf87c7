package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/bus/redisbus"
	"berth.dev/berth/internal/bus/redisbus/redisbustest"
	"berth.dev/berth/internal/dev"
	"berth.dev/berth/internal/gateway/status"
	"berth.dev/berth/internal/gateway/status/topics"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

// TestDevRedis: `berth dev --redis` runs the provider and the three operators as
// processes of their own (this test binary as berth) over a real redis-server. A
// tenant's deployment goes all the way (the provider process bids on the inventory
// operator process's report, the hostname operator process routes it); the provider's
// and the inventory operator's topics reach another process (this test); the provider
// process killed is restarted and serves again; redis-server killed is restarted and
// the topics flow again; Ctrl-C leaves no process behind.
func TestDevRedis(t *testing.T) {
	t.Parallel() // see TestMain
	if _, err := localenv.FindBinaries(t.Context()); err != nil {
		testenv.Require(t, err)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		testenv.Require(t, fmt.Errorf("%w: redis-server: %w", localenv.ErrMissingDependency, err))
	}
	home := filepath.Join(t.TempDir(), "home")
	procs := filepath.Join(home, "cluster", "processes")
	// Each process by its command line; redis-server shows its address instead.
	var redisTitle string
	t.Cleanup(func() {
		// After berth dev's own cleanup (registered later, run first): nothing left.
		if left := processes(t, procs); len(left) > 0 {
			t.Errorf("processes left after berth dev stopped: %v", left)
		}
		if left := processes(t, redisTitle); redisTitle != "" && len(left) > 0 {
			t.Errorf("redis-server left after berth dev stopped: %v", left)
		}
	})
	banner := startDev(t, "--home", home, "--redis", "--nodes", "1", "--gpu-nodes", "1", "--gpus-per-node", "2")
	m := regexp.MustCompile(`redis-server at (redis://(\S+));`).FindStringSubmatch(banner)
	if m == nil || !strings.Contains(banner, procs) {
		t.Fatalf("banner lacks the bus and the processes:\n%s", banner)
	}
	redisTitle = "redis-server " + m[2]
	providerCmd := filepath.Join(procs, "provider.yaml")
	for _, needle := range []string{providerCmd, filepath.Join(procs, "hostname-operator.yaml"), filepath.Join(procs, "ip-operator.yaml"), filepath.Join(procs, "inventory-operator.yaml"), redisTitle} {
		if n := len(processes(t, needle)); n != 1 {
			t.Fatalf("%d processes with %s in their command line, want 1", n, needle)
		}
	}

	// This test as another process on the bus.
	c, err := redisbus.Connect(redisbus.Options{URL: m[1]})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	bids := redisbustest.Topic[status.BidEngine](t, c, topics.BidEngineStatus)
	manifests := redisbustest.Topic[status.Manifest](t, c, topics.ManifestStatus)
	clusterTopic := redisbustest.Topic[inventory.ClusterEvent](t, c, "inventory.cluster")
	bidSub, clusterSub, manifestSub := redisbustest.Subscribe(t, bids), redisbustest.Subscribe(t, clusterTopic), redisbustest.Subscribe(t, manifests)

	// A deployment all the way, through the processes.
	out, progress, err := runSplit(t, "tenant", "deploy", filepath.Join("..", "..", "examples", "web.yaml"), "-o", "json", "--home", home)
	if err != nil {
		t.Fatalf("deploy: %v\n%s%s\n%s", err, progress, out, processLogs(procs))
	}
	var res deployResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("deploy output: %v\n%s", err, out)
	}
	if len(res.Leases) != 1 || !res.Leases[0].Status.Berth.Ready {
		t.Fatalf("deploy: want one ready lease, got %+v", res)
	}
	dseq := strconv.FormatUint(res.DSeq, 10)
	redisbustest.Await(t, bidSub, 2*time.Minute, "the bid engine's status with the order", func(s status.BidEngine) bool { return s.Orders == 1 })
	redisbustest.Await(t, clusterSub, 2*time.Minute, "inventory.cluster with the lease's pods", func(e inventory.ClusterEvent) bool {
		used := e.Used[corev1.ResourceCPU]
		return e.Inventory == dev.InventoryName && e.Nodes == 2 && !used.IsZero()
	})

	// The provider process killed: restarted, it serves the lease again.
	provider := processes(t, providerCmd)
	killed := time.Now()
	if err := syscall.Kill(provider[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNoError(t, 2*time.Minute, "the provider process back", func() error {
		if now := processes(t, providerCmd); len(now) != 1 || now[0] == provider[0] {
			return fmt.Errorf("provider processes %v (killed %d)", now, provider[0])
		}
		_, err := run(t, "tenant", "lease", "status", dseq, "--home", home)
		return err
	})

	t.Logf("the provider process serves again %s after SIGKILL", time.Since(killed).Round(10*time.Millisecond))

	// redis-server killed: restarted on its address, the topics flow again.
	redis := processes(t, redisTitle)
	killed = time.Now()
	if err := syscall.Kill(redis[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// This side's subscribers are cut off (events may be lost while Redis is gone)...
	for range manifestSub.Events() {
	}
	if !errors.Is(manifestSub.Err(), bus.ErrLost) {
		t.Fatalf("the subscription ended with %v, want bus.ErrLost", manifestSub.Err())
	}
	// ...and, Redis back, subscribe again and see the state change the close makes (or,
	// had it come before the bridge's resubscription, the provider's next round).
	testenv.EventuallyNoError(t, time.Minute, "redis-server back", func() error { return c.Ping(t.Context()) })
	again := redisbustest.Subscribe(t, manifests)
	if out, err := run(t, "tenant", "close", dseq, "--home", home); err != nil {
		t.Fatalf("close: %v: %s", err, out)
	}
	redisbustest.Await(t, again, time.Minute, "the manifest status after the close", func(s status.Manifest) bool { return s.Deployments == 0 })
	t.Logf("a status event reached this process %s after redis-server was killed", time.Since(killed).Round(10*time.Millisecond))
	if now := processes(t, redisTitle); len(now) != 1 || now[0] == redis[0] {
		t.Fatalf("redis processes %v (killed %d)", now, redis[0])
	}
}

// processes are the PIDs of processes whose command line contains needle.
func processes(t *testing.T, needle string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), needle) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processLogs are the last lines of berth dev's processes' logs, for a failure's
// message.
func processLogs(dir string) string {
	var b strings.Builder
	for _, name := range []string{"provider", "inventory-operator", "hostname-operator", "ip-operator"} {
		data, err := os.ReadFile(filepath.Join(dir, name+".log"))
		if err != nil {
			fmt.Fprintf(&b, "--- %s.log: %v\n", name, err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "--- %s.log ends:\n%s\n", name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	return b.String()
}
