package localenv

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// This file: watching the control plane's processes once it runs.

// RestartPolicy says what a control plane does when one of its processes exits
// without being asked to. The exit is logged at error level, with its status and the
// last lines of the process's log, whatever the policy.
//
// The controllers (kube-controller-manager, kube-scheduler) and kwok are restarted with
// the same flags: they keep no state of their own and resync from the API server on
// start, and kwok takes the simulated nodes back over once the old kwok's node leases
// expire (40 s; a node marked NotReady while it was down turns Ready again). kube-apiserver is restarted too: it is stateless in front
// of etcd (RestartAPIServer does the same on purpose, and clients reconnect). etcd is
// not: it holds the cluster's state, and an etcd that died on its own (its disk full,
// its data damaged) is not something a restart fixes; its exit fails the control plane.
type RestartPolicy struct {
	// Max is how many times one process may be restarted within Window; one more exit
	// fails the control plane (default 5). Negative: never restart, any exit fails it
	// (what the tests' shared control plane does: a test run must not hide a crash).
	Max int
	// Window is the period Max counts over (default 10 minutes).
	Window time.Duration
	// Backoff is the pause before the first restart in the window, doubled for each
	// further one up to MaxBackoff (defaults 1 s and 30 s).
	Backoff, MaxBackoff time.Duration
}

func (r *RestartPolicy) defaults() {
	if r.Max == 0 {
		r.Max = 5
	}
	if r.Window <= 0 {
		r.Window = 10 * time.Minute
	}
	if r.Backoff <= 0 {
		r.Backoff = time.Second
	}
	if r.MaxBackoff < r.Backoff {
		r.MaxBackoff = max(30*time.Second, r.Backoff)
	}
}

// pause is the wait before a restart after recent others within the window: Backoff
// doubled for each, at most MaxBackoff.
func (r *RestartPolicy) pause(recent int) time.Duration {
	d := r.Backoff << recent
	if d > r.MaxBackoff || d <= 0 {
		d = r.MaxBackoff
	}
	return d
}

// restartable are the processes a control plane restarts (RestartPolicy says why).
// A real node's processes are too: containerd keeps its state on disk and its
// containers run on under their shims meanwhile; the kubelet and kube-proxy resync.
var restartable = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "containerd", "kubelet", "kube-proxy"}

// Failed is closed when the control plane has failed: a process exited and was not
// restarted (etcd, a process out of restarts, or any process under a policy without
// restarts). Err says why. The owner should then Stop it.
func (cp *ControlPlane) Failed() <-chan struct{} { return cp.failed }

// Err is why the control plane failed, nil while it runs (a process being restarted
// is not a failure).
func (cp *ControlPlane) Err() error {
	cp.smu.Lock()
	defer cp.smu.Unlock()
	return cp.err
}

// Restarts is how many times each process has been restarted, by name.
func (cp *ControlPlane) Restarts() map[string]int {
	cp.smu.Lock()
	defer cp.smu.Unlock()
	out := map[string]int{}
	for name, h := range cp.history {
		if n := h.total(); n > 0 {
			out[name] = n
		}
	}
	return out
}

// PIDs are the process IDs of the control plane's processes, by name.
func (cp *ControlPlane) PIDs() map[string]int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := make(map[string]int, len(cp.procs))
	for _, p := range cp.procs {
		out[p.name] = p.cmd.Process.Pid
	}
	return out
}

// supervise watches p until Stop: an unexpected exit is logged, and p restarted or the
// control plane failed, as the policy says. The goroutine ends at Stop.
func (cp *ControlPlane) supervise(p *process) {
	cp.wg.Go(func() {
		for p != nil {
			select {
			case <-cp.stopping:
				return
			case <-p.done:
			}
			p = cp.exited(p)
		}
	})
}

// exited handles p's exit: nothing when it was stopped on purpose; otherwise it logs
// the exit and returns the restarted process, or fails the control plane and returns
// nil.
func (cp *ControlPlane) exited(p *process) *process {
	if p.stopping.Load() {
		return nil
	}
	cp.smu.Lock()
	h := cp.history[p.name]
	if h == nil {
		h = &restartHistory{}
		cp.history[p.name] = h
	}
	cp.smu.Unlock()
	never := ""
	if !slices.Contains(restartable, p.name) {
		never = "it is not restarted"
	}
	np, err := restartExited(exitedProcess{p: p, controlPlane: true, never: never},
		cp.restart, h, cp.stopping, cp.log, func() (*process, bool, error) {
			cp.mu.Lock()
			defer cp.mu.Unlock()
			// Stop closes stopping before it takes the lock to stop the processes: a
			// process started here before that is among those it stops.
			select {
			case <-cp.stopping:
				return nil, false, nil
			default:
			}
			i := slices.Index(cp.procs, p)
			if i < 0 {
				return nil, false, nil // replaced meanwhile (RestartAPIServer)
			}
			np, err := startProcess(p.name, p.logDir, p.bin, p.args...)
			if err != nil {
				return nil, false, err
			}
			cp.procs[i] = np
			h.add()
			return np, true, nil
		})
	if err != nil {
		cp.fail(err)
	}
	return np
}

// restartHistory is one process's restarts: when, within the policy's window, and how
// many in all.
type restartHistory struct {
	mu    sync.Mutex
	at    []time.Time
	count int
}

// recent is how many restarts happened within window of now.
func (h *restartHistory) recent(now time.Time, window time.Duration) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.at = slices.DeleteFunc(h.at, func(t time.Time) bool { return now.Sub(t) > window })
	return len(h.at)
}

func (h *restartHistory) add() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.at = append(h.at, time.Now())
	h.count++
}

func (h *restartHistory) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// exitedProcess is a process that exited without being asked to: whether it is one of
// the control plane's (whose failure is the control plane's), and why it is never
// restarted ("" when the policy decides).
type exitedProcess struct {
	p            *process
	controlPlane bool
	never        string
}

// restartExited is what every supervisor here does when a process exits unasked: it
// logs the exit (status and the log's last lines), and either starts the process again
// after the policy's pause (start: the new process and true, or false when the
// process is no longer wanted, or the error starting it; start records the restart in
// h), or returns the error its owner fails with, saying why it is not restarted.
// Nothing happens once stopping is closed.
func restartExited(e exitedProcess, policy RestartPolicy, h *restartHistory, stopping <-chan struct{}, log *slog.Logger,
	start func() (*process, bool, error)) (*process, error) {
	p := e.p
	status, tail := p.exitStatus(), p.tail(2000)
	recent := h.recent(time.Now(), policy.Window)
	attrs := []any{slog.String("process", p.name), slog.String("status", status), slog.String("log", p.logPath), slog.String("log_tail", tail)}
	why := e.never
	switch {
	case why != "":
	case policy.Max < 0 && e.controlPlane:
		why = "this control plane restarts nothing"
	case policy.Max < 0:
		why = "it is not restarted"
	case recent >= policy.Max:
		why = fmt.Sprintf("it was restarted %d times in the last %s", recent, policy.Window)
	}
	if why != "" {
		attrs = append(attrs, slog.String("reason", why))
		if e.controlPlane {
			log.Error("control plane process exited; the control plane has failed", attrs...)
		} else {
			log.Error("process exited; not restarting it", attrs...)
		}
		return nil, fmt.Errorf("%s exited (%s) and %s\n--- last lines of %s ---\n%s", p.name, status, why, p.logPath, tail)
	}
	pause := policy.pause(recent)
	attrs = append(attrs, slog.Duration("in", pause))
	if e.controlPlane {
		log.Error("control plane process exited; restarting it", attrs...)
	} else {
		log.Error("process exited; restarting it", attrs...)
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-stopping:
		return nil, nil
	case <-t.C:
	}
	np, ok, err := start()
	if err != nil {
		log.Error("restart process", slog.String("process", p.name), slog.String("error", err.Error()))
		return nil, fmt.Errorf("%s exited (%s) and could not be restarted: %w", p.name, status, err)
	}
	if !ok {
		return nil, nil
	}
	log.Info("process restarted", slog.String("process", p.name), slog.Int("pid", np.cmd.Process.Pid))
	return np, nil
}

// fail records the control plane's failure (the first one) and closes Failed.
func (cp *ControlPlane) fail(err error) {
	cp.smu.Lock()
	defer cp.smu.Unlock()
	if cp.err != nil {
		return
	}
	cp.err = err
	close(cp.failed)
}

// addNode records a real node for Stop; it is false once the control plane is stopping.
func (cp *ControlPlane) addNode(n *RealNode) bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	select {
	case <-cp.stopping:
		return false
	default:
	}
	cp.nodes = append(cp.nodes, n)
	return true
}

func (cp *ControlPlane) removeNode(n *RealNode) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.nodes = slices.DeleteFunc(cp.nodes, func(x *RealNode) bool { return x == n })
}

// adopt makes a started process one of the control plane's: listed (PIDs, CPUTimes,
// Stop) and, when supervised, watched as the others are.
func (cp *ControlPlane) adopt(p *process, supervised bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.procs = append(cp.procs, p)
	if supervised {
		cp.superviseLocked(p)
	}
}

// superviseAll starts watching the named processes (adopted unsupervised).
func (cp *ControlPlane) superviseAll(names ...string) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, p := range cp.procs {
		if slices.Contains(names, p.name) {
			cp.superviseLocked(p)
		}
	}
}

func (cp *ControlPlane) superviseLocked(p *process) {
	select {
	case <-cp.stopping:
		return
	default:
		cp.supervise(p)
	}
}

// stopNamed stops the process named name (its current one, after restarts) and drops
// it from the control plane; false if there is none.
func (cp *ControlPlane) stopNamed(name string) bool {
	cp.mu.Lock()
	i := slices.IndexFunc(cp.procs, func(p *process) bool { return p.name == name })
	if i < 0 {
		cp.mu.Unlock()
		return false
	}
	p := cp.procs[i]
	cp.procs = slices.Delete(cp.procs, i, i+1)
	cp.mu.Unlock()
	p.stop()
	return true
}
