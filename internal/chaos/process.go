package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/gateway/client"
	"berth.dev/berth/internal/gateway/status"
)

// child is a process the suite runs, stops, kills and starts again: a provider
// (`berth provider run`) or the ledger node (`berth chain start`).
type child struct {
	name    string
	bin     string
	args    []string
	logPath string
	log     *slog.Logger

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	exitErr error
	// expected: the suite is stopping it; any other exit is a crash.
	expected bool
	starts   int
	// crashes are unexpected exits, with the tail of the log.
	crashes []string
}

// start runs the process; it returns once it is started. The process is killed when
// ctx ends (the run's context: stop and signal end it otherwise).
func (c *child) start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	c.starts++
	_, _ = fmt.Fprintf(logf, "\n=== chaos: start %d of %s at %s\n", c.starts, c.name, time.Now().Format(time.RFC3339Nano))
	//nolint:gosec // G204: the berth binary the suite was told to run
	cmd := exec.CommandContext(ctx, c.bin, c.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The process dies with the suite, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("%s: %w", c.name, err)
	}
	done := make(chan struct{})
	c.cmd, c.done, c.expected, c.exitErr = cmd, done, false, nil
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		c.mu.Lock()
		c.exitErr = err
		if !c.expected {
			c.crashes = append(c.crashes, fmt.Sprintf("%s exited on its own (%v); its log ends:\n%s", c.name, err, tail(c.logPath, 20)))
		}
		c.mu.Unlock()
		close(done)
	}()
	return nil
}

// signal sends sig and waits for the process to exit, up to wait; it returns how long
// the exit took. A process still running then is killed, and that is an error: a
// SIGTERM must stop it.
func (c *child) signal(sig syscall.Signal, wait time.Duration) (time.Duration, error) {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.expected = true
	c.mu.Unlock()
	if cmd == nil {
		return 0, nil
	}
	start := time.Now()
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return 0, fmt.Errorf("%s: %w", c.name, err)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
		return time.Since(start), nil
	case <-t.C:
	}
	_ = cmd.Process.Kill()
	<-done
	return time.Since(start), fmt.Errorf("%s did not stop within %s of %s; killed", c.name, wait, sig)
}

// stop ends the process for good (SIGTERM, then SIGKILL after a minute).
func (c *child) stop() {
	if _, err := c.signal(syscall.SIGTERM, time.Minute); err != nil {
		c.log.Warn("stopping a process", slog.String("error", err.Error()))
	}
}

// exited is closed once the current process has exited.
func (c *child) exited() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// takeCrashes returns the unexpected exits since the last call.
func (c *child) takeCrashes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.crashes
	c.crashes = nil
	return out
}

// providerProc is one provider: `berth provider run` started, killed and started
// again on the same home and gateway address.
type providerProc struct {
	*child
	addr, hostURI string
	client        *chain.Client
}

// gateway is a client of the provider's gateway as the tenant.
func (p *providerProc) gateway(tenant ledger.Signer, tenantAddr string) (*client.Client, error) {
	return client.New(client.Options{HostURI: p.hostURI, Provider: p.addr, Certs: certLookup(p.client), Signer: tenant, Tenant: tenantAddr, Timeout: 10 * time.Second})
}

// status reads the provider's status (the suite started it on this machine's
// loopback itself: status.LoopbackClient).
func (p *providerProc) status(ctx context.Context) (status.Status, error) {
	st, err := status.Read(ctx, status.LoopbackClient, p.hostURI)
	if err != nil {
		return st, fmt.Errorf("%s status: %w", p.name, err)
	}
	return st, nil
}

// waitReady waits until the provider's gateway answers /status, up to timeout, and
// fails at once if the process exits.
func (p *providerProc) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		done := p.exited()
		_, err := p.status(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited while starting; its log ends:\n%s", p.name, tail(p.logPath, 30))
		case <-ctx.Done():
			return fmt.Errorf("%s not serving after %s: %w", p.name, timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// certLookup finds certificates on the ledger, for the gateway client.
func certLookup(c *chain.Client) client.CertLookup {
	return func(ctx context.Context, owner, serial string) (ledger.Certificate, error) {
		var resp ledger.CertificatesResponse
		if err := ledger.QueryCertificates.Into(ctx, c, ledger.CertificatesRequest{Owner: owner, Serial: serial}, &resp); err != nil {
			return ledger.Certificate{}, err
		}
		for _, cert := range resp.Certificates {
			if cert.Serial == serial {
				return cert, nil
			}
		}
		return ledger.Certificate{}, fmt.Errorf("certificate %s of %s: %w", serial, owner, ledger.ErrNotFound)
	}
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
