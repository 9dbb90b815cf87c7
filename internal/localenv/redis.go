package localenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RedisServer is a running redis-server on 127.0.0.1 with its data in a private
// directory, persistence off.
type RedisServer struct {
	// Addr is host:port.
	Addr string
	Dir  string

	bin  string
	port int

	mu       sync.Mutex // guards proc (Kill, Restart, Stop)
	proc     *process
	stopOnce sync.Once
}

// StartRedis starts redis-server on a free loopback port with its files in dir and
// returns once it answers PING.
func StartRedis(ctx context.Context, dir string) (*RedisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w: redis-server not found in PATH; install it with `apt-get install redis-server` (make test does this as root)", ErrMissingDependency)
	}
	const attempts = 3
	for range attempts {
		ports, err := FreePorts(ctx, 1)
		if err != nil {
			return nil, err
		}
		r := &RedisServer{Addr: hostPort(ports[0]), Dir: dir, bin: bin, port: ports[0]}
		err = r.start(ctx)
		if err == nil {
			return r, nil
		}
		if !strings.Contains(err.Error(), "Address already in use") && !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	return nil, fmt.Errorf("redis-server: no free port after %d attempts", attempts)
}

// start runs the server on r's port and waits until it answers PING.
func (r *RedisServer) start(ctx context.Context) error {
	var err error
	r.proc, err = startProcess("redis", r.Dir, r.bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(r.port),
		"--dir", r.Dir, "--save", "", "--appendonly", "no",
		"--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning",
	)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := waitFor(wctx, "redis-server", 20*time.Millisecond, anyExited(r.proc), r.ping); err != nil {
		r.proc.stop()
		return err
	}
	return nil
}

// Kill stops the server as a crash would (its clients see their connections drop);
// Restart starts it again on the same address.
func (r *RedisServer) Kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.proc.stop()
		r.proc = nil
	}
}

// Restart starts a killed server again on its address (empty: persistence is off).
func (r *RedisServer) Restart(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		return errors.New("redis-server: restart of a running server")
	}
	return r.start(ctx)
}

// ping sends a RESP PING and expects +PONG.
func (r *RedisServer) ping(ctx context.Context) (bool, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", r.Addr)
	if err != nil {
		return false, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false, err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return false, err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return false, fmt.Errorf("redis answered %q to PING", strings.TrimSpace(line))
	}
	return true, nil
}

// Stop ends the server. It is idempotent.
func (r *RedisServer) Stop() {
	r.stopOnce.Do(r.Kill)
}
