package localenv

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	opts RedisOptions

	mu       sync.Mutex // guards proc (Kill, Restart, Stop)
	proc     *process
	stopOnce sync.Once
}

// StartRedis starts redis-server on a free loopback port with its files in dir and
// returns once it answers PING.
func StartRedis(ctx context.Context, dir string) (*RedisServer, error) {
	return StartRedisWithPassword(ctx, dir, "")
}

// StartRedisWithPassword starts redis-server as StartRedis does, requiring password
// from clients ("": none).
func StartRedisWithPassword(ctx context.Context, dir, password string) (*RedisServer, error) {
	return StartRedisWith(ctx, dir, RedisOptions{Password: password})
}

// RedisOptions are how a test's redis-server is secured.
type RedisOptions struct {
	// Password is required from clients ("": none).
	Password string
	// CertFile and KeyFile (PEM), when set, make the server speak TLS only; CAFile is
	// the CA its certificate is checked against when it is pinged.
	CertFile, KeyFile, CAFile string
	// ReplicaOf (host:port) makes the server a replica of that master.
	ReplicaOf string
	// SentinelOf (host:port) with SentinelMaster (its name) makes the server a Redis
	// Sentinel monitoring that master alone (quorum 1), which it calls down after 1 s.
	SentinelOf, SentinelMaster string
}

// StartRedisWith starts redis-server as StartRedis does, with o.
func StartRedisWith(ctx context.Context, dir string, o RedisOptions) (*RedisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w: redis-server not found in PATH; install it with `apt-get install redis-server` (make test does this as root)", ErrMissingDependency)
	}
	return onFreePorts(func() (*RedisServer, error) {
		ports, err := FreePorts(ctx, 1)
		if err != nil {
			return nil, err
		}
		r := &RedisServer{Addr: hostPort(ports[0]), Dir: dir, bin: bin, port: ports[0], opts: o}
		if err := r.start(ctx); err != nil {
			return nil, err
		}
		return r, nil
	}, nil)
}

// args are redis-server's arguments for r (its password goes to a file in r.Dir).
func (r *RedisServer) args() ([]string, error) {
	args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(r.port),
		"--dir", r.Dir, "--save", "", "--appendonly", "no",
		"--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning"}
	if o := r.opts; o.CertFile != "" {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(r.port),
			"--tls-cert-file", o.CertFile, "--tls-key-file", o.KeyFile, "--tls-auth-clients", "no")
	}
	if o := r.opts; o.ReplicaOf != "" {
		host, port, err := net.SplitHostPort(o.ReplicaOf)
		if err != nil {
			return nil, fmt.Errorf("redis-server: replica of %q: %w", o.ReplicaOf, err)
		}
		args = append(args, "--replicaof", host, port)
	}
	// Passwords and Sentinel's settings go in a config file (Sentinel rewrites its own),
	// not on the command line, where ps would show them.
	var conf strings.Builder
	if r.opts.Password != "" {
		conf.WriteString("requirepass " + r.opts.Password + "\n")
	}
	if o := r.opts; o.SentinelOf != "" {
		host, port, err := net.SplitHostPort(o.SentinelOf)
		if err != nil {
			return nil, fmt.Errorf("redis sentinel: master %q: %w", o.SentinelOf, err)
		}
		fmt.Fprintf(&conf, "sentinel monitor %[1]s %[2]s %[3]s 1\nsentinel down-after-milliseconds %[1]s 1000\nsentinel failover-timeout %[1]s 10000\n", o.SentinelMaster, host, port)
	}
	if conf.Len() > 0 {
		path := filepath.Join(r.Dir, "redis.conf")
		if err := os.WriteFile(path, []byte(conf.String()), 0o600); err != nil {
			return nil, err
		}
		args = append([]string{path}, args...)
		if r.opts.SentinelOf != "" {
			args = append(args, "--sentinel")
		}
	}
	return args, nil
}

// start runs the server on r's port and waits until it answers PING.
func (r *RedisServer) start(ctx context.Context) error {
	args, err := r.args()
	if err != nil {
		return err
	}
	r.proc, err = startProcess("redis", r.Dir, r.bin, args...)
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

// StartRedisService starts redis-server on a free loopback port with its files in dir
// (persistence off), kept running as a Service — restarted on the same address when it
// exits — and returns once it answers PING, with its address.
func StartRedisService(ctx context.Context, dir string, log *slog.Logger) (*Service, string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "", fmt.Errorf("%w: redis-server not found in PATH; install it with `apt-get install redis-server` (make dev and make test do this as root)", ErrMissingDependency)
	}
	var addr string
	s, err := onFreePorts(func() (*Service, error) {
		ports, err := FreePorts(ctx, 1)
		if err != nil {
			return nil, err
		}
		r := &RedisServer{Addr: hostPort(ports[0]), Dir: dir, bin: bin, port: ports[0]}
		addr = r.Addr
		args, err := r.args()
		if err != nil {
			return nil, err
		}
		s, err := StartService(ServiceOptions{Name: "redis", Bin: bin, Args: args, LogDir: dir, Log: log})
		if err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = waitFor(wctx, "redis-server", 20*time.Millisecond, anyExited(s.current()), r.ping)
		cancel()
		if err != nil {
			s.Stop()
			return nil, err
		}
		return s, nil
	}, nil)
	if err != nil {
		return nil, "", err
	}
	return s, addr, nil
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
	var conn net.Conn
	var err error
	if r.opts.CertFile != "" {
		pool := x509.NewCertPool()
		ca, rerr := os.ReadFile(r.opts.CAFile)
		if rerr != nil || !pool.AppendCertsFromPEM(ca) {
			return false, fmt.Errorf("redis-server: CA file %s: unreadable", r.opts.CAFile)
		}
		td := tls.Dialer{NetDialer: &d, Config: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
		conn, err = td.DialContext(ctx, "tcp", r.Addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", r.Addr)
	}
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
	if strings.HasPrefix(line, "-NOAUTH") && r.opts.Password != "" {
		return true, nil // it answers, and asks for the password
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
