package localenv

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
)

func TestMain(m *testing.M) {
	// A SPDY connection closed after its network connection lingers up to 1 s to report
	// that (spdystream's shutdown), whichever side closed first.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/moby/spdystream.(*Connection).shutdown"))
}

func TestNodeSpec(t *testing.T) {
	tests := []struct {
		name    string
		spec    NodeSpec
		wantErr string
		check   func(t *testing.T, n *corev1.Node)
	}{
		{
			name: "defaults",
			spec: NodeSpec{Name: "n1"},
			check: func(t *testing.T, n *corev1.Node) {
				if got := n.Status.Allocatable.Cpu().String(); got != "8" {
					t.Errorf("cpu = %s, want 8", got)
				}
				if got := n.Status.Allocatable.Memory().String(); got != "32Gi" {
					t.Errorf("memory = %s, want 32Gi", got)
				}
				if got := n.Status.Allocatable.Pods().Value(); got != 110 {
					t.Errorf("pods = %d, want 110", got)
				}
				if n.Annotations[kwokNodeAnnotation] != kwokNodeValue {
					t.Errorf("missing kwok annotation: %v", n.Annotations)
				}
				if _, ok := n.Status.Allocatable[ResourceGPU]; ok {
					t.Error("node without GPUs advertises nvidia.com/gpu")
				}
			},
		},
		{
			name: "gpu node",
			spec: NodeSpec{Name: "g", CPU: "32", Memory: "256Gi", GPUs: 8, GPUProduct: "NVIDIA-H100", GPUMemoryMiB: 81920, Labels: map[string]string{"zone": "a"}},
			check: func(t *testing.T, n *corev1.Node) {
				gpus := n.Status.Capacity[ResourceGPU]
				if gpus.Value() != 8 {
					t.Errorf("gpus = %s, want 8", gpus.String())
				}
				want := map[string]string{LabelGPUProduct: "NVIDIA-H100", LabelGPUMemory: "81920", LabelGPUCount: "8", "zone": "a", corev1.LabelHostname: "g"}
				for k, v := range want {
					if n.Labels[k] != v {
						t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
					}
				}
			},
		},
		{name: "no name", spec: NodeSpec{}, wantErr: "name is empty"},
		{name: "bad cpu", spec: NodeSpec{Name: "x", CPU: "lots"}, wantErr: `node x: cpu "lots"`},
		{name: "zero memory", spec: NodeSpec{Name: "x", Memory: "0"}, wantErr: `memory "0" must be positive`},
		{name: "negative gpus", spec: NodeSpec{Name: "x", GPUs: -1}, wantErr: "must not be negative"},
		{name: "gpus without product", spec: NodeSpec{Name: "x", GPUs: 2}, wantErr: "need a GPU product"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := tt.spec.Object()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, n)
		})
	}
}

// TestPersistentDir: a persistent control plane's directory keeps etcd's data, the
// service-account key pair and the logs from one start to the next (and says it
// resumes a cluster), and nothing else; a throwaway one is emptied; a persistent one
// needs a directory.
func TestPersistentDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	for _, f := range []string{"etcd/member/snap/db", "pki/ca.crt", "logs/etcd.log", "kwok/containers.log", "admin.kubeconfig"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key, pub, err := serviceAccountKeys(filepath.Join(dir, "pki"), true)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	got, removeDir, resumed, err := controlPlaneDir(dir, true)
	if err != nil || got != dir || removeDir || !resumed {
		t.Fatalf("persistent: %q, remove %t, resumed %t, %v", got, removeDir, resumed, err)
	}
	for f, want := range map[string]bool{"etcd/member/snap/db": true, "pki/ca.crt": true, "logs/etcd.log": true, "kwok": false, "admin.kubeconfig": false} {
		if _, err := os.Stat(filepath.Join(dir, f)); (err == nil) != want {
			t.Errorf("persistent: %s kept = %t, want %t", f, err == nil, want)
		}
	}
	key2, pub2, err := serviceAccountKeys(filepath.Join(dir, "pki"), true)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := os.ReadFile(key2); err != nil || key2 != key || pub2 != pub || !bytes.Equal(again, keyPEM) {
		t.Errorf("the service-account key was not reused (%v)", err)
	}
	if _, _, err := serviceAccountKeys(filepath.Join(dir, "pki"), false); err != nil {
		t.Fatal(err)
	}
	if fresh, err := os.ReadFile(key); err != nil || bytes.Equal(fresh, keyPEM) {
		t.Errorf("without reuse the service-account key is the same (%v)", err)
	}

	if _, _, resumed, err := controlPlaneDir(dir, false); err != nil || resumed {
		t.Fatalf("throwaway: resumed %t, %v", resumed, err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("throwaway: %d entries left (%v)", len(entries), err)
	}
	if _, _, resumed, err := controlPlaneDir(filepath.Join(t.TempDir(), "new"), true); err != nil || resumed {
		t.Errorf("persistent on a new directory: resumed %t, %v", resumed, err)
	}
	if _, err := StartControlPlane(t.Context(), ControlPlaneOptions{Persistent: true}); err == nil || !strings.Contains(err.Error(), "needs a directory") {
		t.Errorf("persistent without a directory: %v", err)
	}
}

func TestPKIChains(t *testing.T) {
	dir := t.TempDir()
	p, err := newPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := p.serving("srv", []string{"localhost"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := p.client("cli", "alice", "devs")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots.AppendCertsFromPEM(caPEM)
	parse := func(b []byte) *x509.Certificate {
		blk, _ := pem.Decode(b)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, err := parse(srv.CertPEM).Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost"}); err != nil {
		t.Errorf("serving cert does not verify: %v", err)
	}
	c := parse(cli.CertPEM)
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client cert does not verify: %v", err)
	}
	if c.Subject.CommonName != "alice" || len(c.Subject.Organization) != 1 || c.Subject.Organization[0] != "devs" {
		t.Errorf("client subject = %v", c.Subject)
	}
	for _, f := range []string{srv.KeyFile, cli.KeyFile} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, st.Mode().Perm())
		}
	}
}

func TestKwokConfig(t *testing.T) {
	stages := t.TempDir()
	for _, s := range kwokStages {
		path := filepath.Join(stages, s)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("kind: Stage\nmetadata:\n  name: "+filepath.Base(s)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := writeKwokConfig(out, stages, "/var/log/c.log", false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if strings.Contains(text, "KwokConfiguration") {
		t.Error("kwok's parallelism raised without Throughput")
	}
	if got := strings.Count(text, "kind: Stage\n"); got != len(kwokStages)+1 {
		t.Errorf("config has %d stages, want %d (kwok's and berth's pod-ready-again)", got, len(kwokStages)+1)
	}
	for _, want := range []string{"kind: ClusterLogs", `logsFile: "/var/log/c.log"`, "name: berth-pod-ready-again"} {
		if !strings.Contains(text, want) {
			t.Errorf("config lacks %q", want)
		}
	}
	// The node server runs every exec: kwok, whose exec panics on a terminal without
	// stdin, gets no rule to run one by.
	for _, kind := range []string{"kind: Exec", "kind: ClusterExec"} {
		if strings.Contains(text, kind) {
			t.Errorf("kwok is given an exec rule (%s)", kind)
		}
	}

	if err := writeKwokConfig(out, stages, "/var/log/c.log", true); err != nil {
		t.Fatal(err)
	}
	if b, err = os.ReadFile(out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: KwokConfiguration", "podPlayStageParallelism: 16", "nodeLeaseParallelism: 16"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("throughput config lacks %q", want)
		}
	}

	if err := os.Remove(filepath.Join(stages, kwokStages[0])); err != nil {
		t.Fatal(err)
	}
	if err := writeKwokConfig(out, stages, "l", false); err == nil || !strings.Contains(err.Error(), kwokStages[0]) {
		t.Errorf("missing stage file: err = %v, want it named", err)
	}
}

func TestProcCPUTime(t *testing.T) {
	// Burn a little CPU so that at least one 10 ms tick is counted.
	deadline := time.Now().Add(50 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		_ = strconv.Itoa(n)
	}
	if d, ok := procCPUTime(os.Getpid()); !ok || d <= 0 {
		t.Fatalf("own CPU time %s, %v", d, ok)
	}
	if _, ok := procCPUTime(1 << 30); ok {
		t.Fatal("a process that does not exist has a CPU time")
	}
}

// TestProcessStopKillsGroup checks that stopping a process also ends the children it
// spawned, so no test leaves processes behind.
func TestProcessStopKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// The shell ignores SIGTERM and starts a child that outlives it unless its group is killed.
	p, err := startProcess("grp", dir, "/bin/sh", "-c", `trap '' TERM; sleep 300 & echo $! > `+pidFile+`; wait`)
	if err != nil {
		t.Fatal(err)
	}
	p.grace = 200 * time.Millisecond
	var child int
	eventually(t, 10*time.Second, "child pid written", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	start := time.Now()
	p.stop()
	if dead, _ := p.exited(); !dead {
		t.Fatal("process not reaped after stop")
	}
	if time.Since(start) > p.grace+5*time.Second {
		t.Errorf("stop took %s", time.Since(start))
	}
	// The orphaned child is reparented to init; wait for it to be gone.
	eventually(t, 10*time.Second, "child process gone", func() bool {
		return errors.Is(syscall.Kill(child, 0), syscall.ESRCH) || isZombie(child)
	})
}

// eventually polls cond every 10ms until it holds, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] == "Z"
}
