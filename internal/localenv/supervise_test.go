package localenv

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// syncBuffer is a log sink the supervisor's goroutines may write to while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// supervised starts a stand-in for the control-plane process name (a shell that says
// it started, then sleeps) and supervises it as the control plane does its own.
func supervised(t *testing.T, cp *ControlPlane, name string) {
	t.Helper()
	p, err := startProcess(name, cp.Dir, "/bin/sh", "-c", "echo "+name+" is up; exec sleep 300")
	if err != nil {
		t.Fatal(err)
	}
	cp.mu.Lock()
	cp.procs = append(cp.procs, p)
	cp.mu.Unlock()
	cp.supervise(p)
}

func kill(t *testing.T, cp *ControlPlane, name string) int {
	t.Helper()
	pid := cp.PIDs()[name]
	eventually(t, 10*time.Second, name+" says it is up", func() bool {
		return strings.Contains(cp.processLogTail(name), name+" is up")
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return pid
}

// processLogTail is the end of name's log.
func (cp *ControlPlane) processLogTail(name string) string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, p := range cp.procs {
		if p.name == name {
			return p.tail(2000)
		}
	}
	return ""
}

func failedWithin(t *testing.T, cp *ControlPlane, d time.Duration) error {
	t.Helper()
	select {
	case <-cp.Failed():
		return cp.Err()
	case <-time.After(d):
		t.Fatalf("the control plane did not fail within %s", d)
		return nil
	}
}

// TestSupervisorRestartsWithinItsBudget: a restartable process (kwok) that dies is
// logged with its exit status and log tail and restarted; dying more often than the
// policy allows fails the control plane with the reason.
func TestSupervisorRestartsWithinItsBudget(t *testing.T) {
	var logs syncBuffer
	cp := newControlPlane(t.TempDir(), false, slog.New(slog.NewTextHandler(&logs, nil)), RestartPolicy{Max: 1, Backoff: 10 * time.Millisecond})
	defer cp.Stop()
	supervised(t, cp, "etcd")
	supervised(t, cp, "kwok")

	old := kill(t, cp, "kwok")
	eventually(t, 10*time.Second, "kwok restarted", func() bool {
		return cp.Restarts()["kwok"] == 1 && cp.PIDs()["kwok"] != old
	})
	if err := cp.Err(); err != nil {
		t.Fatalf("the control plane failed after one restart: %v", err)
	}
	for _, want := range []string{`msg="control plane process exited; restarting it" process=kwok status="signal: killed"`, "kwok is up", "in=10ms"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}

	kill(t, cp, "kwok")
	err := failedWithin(t, cp, 10*time.Second)
	for _, want := range []string{"kwok exited (signal: killed) and it was restarted 1 times in the last 10m0s", "--- last lines of", "kwok is up"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("failure %v lacks %q", err, want)
		}
	}
	if !strings.Contains(logs.String(), "the control plane has failed") {
		t.Errorf("the failure is not logged:\n%s", logs.String())
	}
}

// TestSupervisorFailsOnEtcd: etcd is never restarted; a policy without restarts (the
// tests' shared control plane) fails on any exit; a process stopped on purpose, and
// Stop, are not failures.
func TestSupervisorFailsOnEtcd(t *testing.T) {
	cp := newControlPlane(t.TempDir(), false, slog.New(slog.DiscardHandler), RestartPolicy{Backoff: 10 * time.Millisecond})
	supervised(t, cp, "etcd")
	kill(t, cp, "etcd")
	if err := failedWithin(t, cp, 10*time.Second); err == nil || !strings.Contains(err.Error(), "etcd exited (signal: killed) and it is not restarted") {
		t.Errorf("failure %v, want etcd's exit", err)
	}
	cp.Stop()

	cp = newControlPlane(t.TempDir(), false, slog.New(slog.DiscardHandler), RestartPolicy{Max: -1})
	supervised(t, cp, "kwok")
	supervised(t, cp, "kube-scheduler")
	// RestartAPIServer's way: a process stopped on purpose is not an exit to handle.
	cp.mu.Lock()
	sched := cp.procs[1]
	cp.mu.Unlock()
	sched.stop()
	kill(t, cp, "kwok")
	if err := failedWithin(t, cp, 10*time.Second); err == nil || !strings.Contains(err.Error(), "kwok exited (signal: killed) and this control plane restarts nothing") {
		t.Errorf("failure %v, want kwok's exit", err)
	}
	cp.Stop()

	cp = newControlPlane(t.TempDir(), false, slog.New(slog.DiscardHandler), RestartPolicy{})
	supervised(t, cp, "etcd")
	supervised(t, cp, "kwok")
	cp.Stop()
	if err := cp.Err(); err != nil {
		t.Errorf("Stop counted as a failure: %v", err)
	}
}

// TestControlPlaneRestartsKwok kills the real kwok of a control plane of its own (the
// tests' shared one restarts nothing): it is restarted, takes its nodes back — one
// marked NotReady meanwhile, as the node lifecycle controller marks nodes whose kwok is
// gone, turns Ready and schedulable again — and simulates nodes added afterwards.
func TestControlPlaneRestartsKwok(t *testing.T) {
	bin, err := FindBinaries(t.Context())
	requireDep(t, err)
	var logs syncBuffer
	cp, err := StartControlPlane(t.Context(), ControlPlaneOptions{BinDir: bin,
		Logger:  slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Restart: RestartPolicy{Backoff: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	ctx := t.Context()
	if err := cp.AddNodes(ctx, NodeSpec{Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}

	old := cp.PIDs()["kwok"]
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "n1 marked NotReady", func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason = corev1.ConditionFalse, "KwokGone"
			}
		}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err == nil
	})
	eventually(t, 30*time.Second, "kwok restarted", func() bool {
		return cp.Restarts()["kwok"] == 1 && cp.PIDs()["kwok"] != old
	})
	// The new kwok takes the node over once the old one's lease on it expires (40 s).
	eventually(t, 90*time.Second, "n1 Ready and schedulable again", func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		return err == nil && nodeSchedulable(n)
	})
	if err := cp.AddNodes(ctx, NodeSpec{Name: "n2"}); err != nil {
		t.Fatalf("a node added after the restart: %v", err)
	}
	if err := cp.Err(); err != nil {
		t.Fatalf("control plane failed: %v", err)
	}
	if want := `msg="control plane process exited; restarting it" process=kwok status="signal: killed"`; !strings.Contains(logs.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, logs.String())
	}
}
