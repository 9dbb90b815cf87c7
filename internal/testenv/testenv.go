// Package testenv gives tests berth's real dependencies: a Kubernetes control plane
// shared by all tests of a package (started on first use, stopped by Main), a
// redis-server per test, an ingress controller per test (ingress.go), MetalLB's
// controller per test (metallb.go), and the rule for
// missing dependencies: skip with a message saying how to install them, except under
// CI=true, where the test fails. Main also checks that the package leaked no
// goroutines.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/internal/localenv"
)

// shared is the package-wide control plane, started by the first Cluster call and
// stopped by Main.
var shared struct {
	once sync.Once
	cp   *localenv.ControlPlane
	err  error
}

// inMain says the package's TestMain runs through Main, which Cluster requires: without
// it the shared control plane would outlive the tests (its directory left behind) and
// no goroutine leak would be looked for.
var inMain atomic.Bool

// failure is how a control plane says it failed: Failed and Err.
type failure struct {
	done <-chan struct{}
	err  func() error
}

// sharedFailure is the shared control plane's once it runs, for the Eventually helpers
// (of tests that did not call Cluster themselves too).
var sharedFailure atomic.Pointer[failure]

// Main runs a test package: m.Run, then stops the shared control plane (keeping its
// directory, with the processes' logs, when the run failed), then fails the run if a
// process of the shared control plane died or goroutines leaked. Use it from
// TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) {
	inMain.Store(true)
	code := m.Run()
	if shared.cp != nil {
		if err := shared.cp.Err(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: the shared control plane failed during the run: %v\n", err)
			code = 1
		}
		if code != 0 {
			shared.cp.KeepDir()
			fmt.Fprintf(os.Stderr, "testenv: the run failed; the shared control plane's logs are kept in %s\n", filepath.Join(shared.cp.Dir, "logs"))
		}
		shared.cp.Stop()
	}
	if code == 0 {
		if err := goleak.Find(LeakOptions()...); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: goroutines leaked: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// LeakOptions are the goleak options for code that talks to Kubernetes: klog keeps a
// flush daemon. HTTP connections are not ignored: one left open (a keep-alive
// connection's reader and writer) is a leak the test must close.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		// CometBFT v0.38 leaves these behind after Node.Stop (measured: the same set
		// after every stop, none accumulate work): the proxy's client-error watcher,
		// the WAL autofile's SIGHUP and close routines, and go-metrics' meter ticker.
		goleak.IgnoreTopFunction("github.com/cometbft/cometbft/proxy.(*multiAppConn).killTMOnClientError"),
		goleak.IgnoreTopFunction("github.com/cometbft/cometbft/libs/autofile.OpenAutoFile.func1"),
		goleak.IgnoreTopFunction("github.com/cometbft/cometbft/libs/autofile.(*AutoFile).closeFileRoutine"),
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		// A validator whose peer stopped sleeps before its next reconnection attempt and
		// returns when it sees its own switch stopped.
		goleak.IgnoreAnyFunction("github.com/cometbft/cometbft/p2p.(*Switch).reconnectToPeer"),
		// A validator started with persistent peers dials each after a random pause of up
		// to 3 s; a node stopped within that pause leaves the dialer asleep, and the dial
		// it then makes fails on the closed transport.
		goleak.IgnoreAnyFunction("github.com/cometbft/cometbft/p2p.(*Switch).dialPeersAsync.func1"),
		// Block sync's requester loop sleeps between rounds (up to a few seconds) and
		// returns when it wakes and sees its pool stopped.
		goleak.IgnoreAnyFunction("github.com/cometbft/cometbft/blocksync.(*BlockPool).makeRequestersRoutine"),
		// A SPDY connection (exec) closed after its network connection lingers up to 1 s
		// to report that (spdystream's shutdown).
		goleak.IgnoreTopFunction("github.com/moby/spdystream.(*Connection).shutdown"),
		// goleveldb's pool drainer lingers up to 1 s after Close.
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).mpoolDrain"),
	}
}

// Cluster returns the package's shared control plane, starting it on first use. Tests
// sharing it must not assume they are alone: create objects in a Namespace of their
// own and give nodes unique names. Without the binaries the test is skipped (failed
// under CI=true).
//
// The shared control plane restarts nothing: a process of it that dies fails the run
// (Main), every test that asks for it from then on, and every Eventually wait in
// progress, at once and with the process's exit and log, instead of leaving tests to
// wait for a cluster that no longer works. A test that kills control-plane processes
// starts its own (localenv.StartControlPlane).
func Cluster(t testing.TB) *Kube {
	t.Helper()
	if !inMain.Load() {
		t.Fatal("testenv.Cluster needs the package's TestMain to call testenv.Main (it stops the shared control plane and checks for leaked goroutines)")
	}
	shared.once.Do(func() {
		start := time.Now()
		shared.cp, shared.err = localenv.StartControlPlane(context.Background(), localenv.ControlPlaneOptions{
			Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
			Restart: localenv.RestartPolicy{Max: -1},
		})
		if shared.err == nil {
			sharedFailure.Store(&failure{done: shared.cp.Failed(), err: shared.cp.Err})
			fmt.Fprintf(os.Stderr, "testenv: control plane ready in %s (%s)\n", time.Since(start).Round(time.Millisecond), shared.cp.Dir)
		}
	})
	Require(t, shared.err)
	if err := shared.cp.Healthy(); err != nil {
		t.Fatalf("shared control plane is down: %v", err)
	}
	return &Kube{ControlPlane: shared.cp}
}

// Kube is the shared control plane as a test sees it.
type Kube struct {
	*localenv.ControlPlane
}

// Redis starts a redis-server for this test alone and stops it when the test ends.
func Redis(t testing.TB) *localenv.RedisServer {
	t.Helper()
	r, err := localenv.StartRedis(t.Context(), t.TempDir())
	Require(t, err)
	t.Cleanup(r.Stop)
	return r
}

// Tool is a tool binary a test runs: $env, else name on the PATH; missing, the test
// is skipped saying how to get it (hint), or failed with CI=true.
func Tool(t testing.TB, env, name, hint string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	Require(t, fmt.Errorf("%w: %s: %s", localenv.ErrMissingDependency, name, hint))
	return ""
}

// Require ends the test when err is not nil: a missing dependency skips it with the
// message saying how to install it, unless CI=true, where every error fails.
func Require(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, localenv.ErrMissingDependency) && os.Getenv("CI") != "true" {
		t.Skipf("skipping: %v (with CI=true this fails)", err)
	}
	t.Fatalf("test dependency: %v", err)
}

// Kubeconfig writes a kubeconfig for the admin user with its certificates inline and
// returns its path (with certificate files, client-go starts a process-wide rotation
// watcher that outlives the test).
func (cp *Kube) Kubeconfig(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "kubeconfig")
	if err := localenv.WriteFlatKubeconfig(cp.KubeconfigPath, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// AppendContainerLog appends lines, in the CRI format and in one write, to the file
// kwok serves as every container's log (shared by all pods: use unique lines).
func (cp *Kube) AppendContainerLog(t testing.TB, lines ...string) {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), l)
	}
	f, err := os.OpenFile(cp.ContainerLogFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.WriteString(b.String()); err != nil {
		t.Fatal(err)
	}
}

// Clientset returns a Kubernetes clientset for the admin user.
func (cp *Kube) Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatalf("kubernetes client: %v", err)
	}
	return cs
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace named after the test (with a random suffix) and
// deletes it when the test ends.
func (cp *Kube) Namespace(t testing.TB) string {
	t.Helper()
	prefix := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(prefix) > 40 {
		prefix = strings.TrimRight(prefix[:40], "-")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := prefix + "-" + hex.EncodeToString(b[:])
	cs := cp.Clientset(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		// t.Context is already cancelled during cleanup.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return name
}
