package localenv

import (
	"log/slog"
	"sync"
	"syscall"
	"time"
)

// Service is a long-running child process kept running: its output goes to
// LogDir/Name.log (appended across restarts), and an exit it was not asked for is
// logged at error level (exit status, the log's last lines) and followed by a restart
// with the same arguments, after a pause that doubles with each exit in the window.
// After Restart.Max exits within Restart.Window it is not restarted: Failed is closed
// and Err says why. Like every process of this package it dies with its parent.
type Service struct {
	opts ServiceOptions

	stopping chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	failed   chan struct{}

	mu        sync.Mutex // guards proc, err, restarted
	proc      *process
	err       error
	history   restartHistory
	restarted chan struct{} // closed at the next restart
}

// ServiceOptions describe a Service.
type ServiceOptions struct {
	// Name names the process in logs and its log file.
	Name string
	// Bin and Args are what runs; Env is added to this process's environment.
	Bin  string
	Args []string
	Env  []string
	// LogDir holds Name.log (it must exist).
	LogDir string
	// Grace is how long Stop waits after SIGTERM before SIGKILL (0: 10 s).
	Grace time.Duration
	// Restart says how often it is restarted (RestartPolicy's defaults: 5 within 10
	// minutes, 1 s doubling to 30 s; Max < 0: never).
	Restart RestartPolicy
	Log     *slog.Logger
}

// start starts the process once.
func (o *ServiceOptions) start() (*process, error) {
	p, err := startProcessEnv(o.Name, o.LogDir, o.Bin, o.Env, o.Args...)
	if err == nil && o.Grace > 0 {
		p.grace = o.Grace
	}
	return p, err
}

// exited is waitFor's dead check while a Service starts up: its process has exited.
// A restart would follow, but a start that fails (a port taken, a bad flag) is the
// start's error, so the caller stops the Service and says why.
func (s *Service) exited() error { return anyExited(s.current())() }

// StartService starts the process and keeps it running until Stop.
func StartService(o ServiceOptions) (*Service, error) {
	o.Restart.defaults()
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	p, err := o.start()
	if err != nil {
		return nil, err
	}
	s := &Service{opts: o, stopping: make(chan struct{}), failed: make(chan struct{}), proc: p, restarted: make(chan struct{})}
	s.wg.Go(s.supervise)
	return s, nil
}

// LogPath is the process's log file.
func (s *Service) LogPath() string { return s.current().logPath }

// PID is the current process's ID.
func (s *Service) PID() int { return s.current().cmd.Process.Pid }

// Tail is the last n bytes of its log.
func (s *Service) Tail(n int) string { return s.current().tail(n) }

// Failed is closed when the service is no longer restarted; Err says why.
func (s *Service) Failed() <-chan struct{} { return s.failed }

// Err says why the service failed (nil while it runs or is being restarted).
func (s *Service) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Restarts is how many times it has been restarted; Restarted is closed at the next.
func (s *Service) Restarts() (int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.history.total(), s.restarted
}

// Kill sends SIGKILL to the current process, as a crash would end it (it is then
// restarted as after any exit it did not ask for).
func (s *Service) Kill() {
	_ = syscall.Kill(-s.current().cmd.Process.Pid, syscall.SIGKILL)
}

// Stop ends the process (SIGTERM, SIGKILL after 10 s) and its supervision; it is
// idempotent.
func (s *Service) Stop() {
	s.stopOnce.Do(func() {
		close(s.stopping)
		s.wg.Wait()
		s.current().stop()
	})
}

func (s *Service) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

func (s *Service) supervise() {
	for {
		p := s.current()
		select {
		case <-s.stopping:
			return
		case <-p.done:
		}
		if !s.restart(p) {
			return
		}
	}
}

// restart handles p's exit: it logs it and starts p again after the backoff, or
// fails the service; false when supervision ends.
func (s *Service) restart(p *process) bool {
	o := s.opts
	np, err := restartExited(exitedProcess{p: p}, o.Restart, &s.history, s.stopping, o.Log,
		func() (*process, bool, error) {
			np, err := o.start()
			if err != nil {
				return nil, false, err
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			s.proc = np
			s.history.add()
			close(s.restarted)
			s.restarted = make(chan struct{})
			return np, true, nil
		})
	if err != nil {
		s.fail(err)
	}
	return np != nil
}

func (s *Service) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.failed)
	}
}
