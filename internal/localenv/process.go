package localenv

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"berth.dev/berth/internal/wait"
)

// process is one child process with its output in a log file. It runs in its own
// process group, which is killed as a whole on stop, and it is killed by the kernel if
// the parent dies first (Pdeathsig), so a crashed test leaves nothing running.
type process struct {
	name    string
	bin     string
	args    []string
	logDir  string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{}
	// grace is how long stop waits after SIGTERM before SIGKILL.
	grace time.Duration

	// stopping is set by stop: the exit that follows is expected.
	stopping atomic.Bool

	mu      sync.Mutex
	waitErr error
}

const stopGrace = 10 * time.Second

func startProcess(name, logDir, bin string, args ...string) (*process, error) {
	return startProcessEnv(name, logDir, bin, nil, args...)
}

// startProcessEnv is startProcess with env added to this process's environment.
func startProcessEnv(name, logDir, bin string, env []string, args ...string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log for %s: %w", name, err)
	}
	// Not CommandContext: the process outlives the start-up call and ends through stop.
	//nolint:gosec,noctx // G204: binary and arguments are built by this package, not taken from input
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = logDir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, bin: bin, args: args, logDir: logDir, cmd: cmd, logPath: logPath, logFile: logFile, done: make(chan struct{}), grace: stopGrace}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.waitErr == nil {
			return true, fmt.Errorf("%s exited", p.name)
		}
		return true, fmt.Errorf("%s exited: %w", p.name, p.waitErr)
	default:
		return false, nil
	}
}

// exitStatus says how the process ended ("exit status 1", "signal: killed"); call it
// after done is closed.
func (p *process) exitStatus() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waitErr == nil {
		return "exit status 0"
	}
	return p.waitErr.Error()
}

// stop sends SIGTERM to the process group, waits up to p.grace, then SIGKILLs it.
// It returns once the process has been reaped.
func (p *process) stop() {
	p.stopping.Store(true)
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(p.grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Reap stragglers in the group (a child that outlived its parent).
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// tail returns the last n bytes of the process's log, for error messages.
func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// FreePorts reserves n distinct free TCP ports on 127.0.0.1. The listeners are closed
// before returning, so a port can in rare cases be taken by someone else before the
// child binds it; callers retry start-up on bind failures.
func FreePorts(ctx context.Context, n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			return nil, fmt.Errorf("unexpected listener address %v", l.Addr())
		}
		ports = append(ports, addr.Port)
	}
	return ports, nil
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// errStopped marks a wait that ended because a process died.
var errStopped = errors.New("process ended")

// errPortTaken marks the exit of a process that could not listen on a port it was
// given: another process took the free port meanwhile, and a start on new ports may
// succeed. The process's log says so; this is the one place that reads it.
var errPortTaken = errors.New("a port it was given was taken")

// portAttempts is how many times a start that picks free ports is tried when another
// process takes one of them meanwhile.
const portAttempts = 3

// onFreePorts runs start, which picks its own free ports, until it succeeds, fails
// otherwise than by a port taken meanwhile (errPortTaken), or has been tried
// portAttempts times; taken says each retry's cause (nil: nothing).
func onFreePorts[T any](start func() (T, error), taken func(error)) (T, error) {
	var v T
	var err error
	for i := range portAttempts {
		if v, err = start(); err == nil || !errors.Is(err, errPortTaken) {
			return v, err
		}
		if taken != nil && i < portAttempts-1 {
			taken(err)
		}
	}
	return v, err
}

// startup begins a helper's start (MetalLB's controller, the ingress controller, the
// registry): ctx bounded by timeout (0: a minute), and *binDir found with find when it
// is empty. The caller defers cancel.
func startup(ctx context.Context, timeout time.Duration, binDir *string, find func(context.Context) (string, error)) (context.Context, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(timeout, time.Minute))
	if *binDir == "" {
		dir, err := find(ctx)
		if err != nil {
			cancel()
			return nil, nil, err
		}
		*binDir = dir
	}
	return ctx, cancel, nil
}

// exitError is how a process that has exited (err) ended, with the last lines of its
// log; errPortTaken when the log says it could not listen.
func (p *process) exitError(err error) error {
	tail := p.tail(4000)
	if strings.Contains(strings.ToLower(tail), "address already in use") {
		err = fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, p.logPath, tail)
}

// anyExited is waitFor's dead for processes not (yet) supervised: the first of procs
// that has exited, with its log tail.
func anyExited(procs ...*process) func() error {
	return func() error {
		for _, p := range procs {
			if dead, err := p.exited(); dead {
				return fmt.Errorf("%w: %w", errStopped, p.exitError(err))
			}
		}
		return nil
	}
}

// waitFor polls check every interval until it returns true, ctx ends, or dead reports
// that what is waited on cannot come (a process it needs has exited).
func waitFor(ctx context.Context, what string, interval time.Duration, dead func() error, check func(context.Context) (bool, error)) error {
	var last error // the last error check gave (a check may say "not yet" without one)
	err := wait.Until(ctx, interval, func(ctx context.Context) error {
		if err := dead(); err != nil {
			return wait.Abort(err)
		}
		ok, err := check(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		return errNotYet
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errNotYet) && last != nil:
		return fmt.Errorf("waiting for %s: %w (last error: %w)", what, ctx.Err(), last)
	case errors.Is(err, errNotYet):
		return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	}
	return fmt.Errorf("waiting for %s: %w", what, err)
}

// errNotYet is waitFor's check not passing yet.
var errNotYet = errors.New("not yet")
