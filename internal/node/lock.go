package node

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Parts of a home that one process at a time may run. A home is shared by design (the
// node of `berth chain start` and the provider of `berth provider run` may run from the
// same home, each in its own process); each part has its own lock.
const (
	// PartNode is the ledger node: config/config.toml, data/.
	PartNode = "node"
	// PartProvider is the provider's state: provider/ (the bid engine's cursor, the
	// earnings record, the gateway certificate).
	PartProvider = "provider"
)

// ErrHomeInUse is what LockHome returns (wrapped, with the holder) when another
// process runs that part of the home.
var ErrHomeInUse = errors.New("home in use")

// HomeLock is a process's claim on one part of a home: an advisory lock (flock) on
// the file HOME/<part>.lock, held until Release. The kernel drops it when the process
// ends, however it ends, so a crash leaves no stale lock. The file records the holder's
// process ID and start time, for the error another process gets.
type HomeLock struct {
	f    *os.File
	path string
}

// LockFile is the name of a part's lock file in the home.
func LockFile(part string) string { return part + ".lock" }

// IsLockFile reports whether name (a file name in a home) is one of the parts' lock
// files, which resetting a home keeps (they are how another process sees it in use).
func IsLockFile(name string) bool {
	return name == LockFile(PartNode) || name == LockFile(PartProvider)
}

// LockHome takes part's lock in home, which must exist, without waiting. A home
// another process (or another start in this process) runs is refused with
// ErrHomeInUse, naming the holder and what to do; nothing in the home is changed then
// (the lock file is opened, never truncated, when it exists).
func LockHome(home, part string) (*HomeLock, error) {
	path := filepath.Join(home, LockFile(part))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("home %s: lock the %s: %w", home, partName(part), err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, pid := lockHolder(f)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			stop := "stop it first (Ctrl-C in its terminal)"
			if pid > 0 && pid != os.Getpid() {
				stop = fmt.Sprintf("stop it first (Ctrl-C in its terminal, or kill %d)", pid)
			}
			return nil, fmt.Errorf("%w: %s runs the %s of %s; %s, or use another --home",
				ErrHomeInUse, holder, partName(part), home, stop)
		}
		return nil, fmt.Errorf("home %s: lock %s: %w", home, path, err)
	}
	record := fmt.Sprintf("pid %d\nsince %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("home %s: write %s: %w", home, path, err)
	}
	if _, err := f.WriteAt([]byte(record), 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("home %s: write %s: %w", home, path, err)
	}
	return &HomeLock{f: f, path: path}, nil
}

// Release gives the lock up. It is safe to call more than once, and on nil.
func (l *HomeLock) Release() {
	if l == nil || l.f == nil {
		return
	}
	// Closing the file drops the lock; the file stays, so that the next holder's record
	// replaces this one in place.
	_ = l.f.Close()
	l.f = nil
}

func partName(part string) string {
	switch part {
	case PartNode:
		return "ledger node"
	case PartProvider:
		return "provider"
	}
	return part
}

// lockHolder describes the process that holds the lock, from the lock file's record
// and, where /proc shows it, the process's command line; pid is 0 when the record
// does not say.
func lockHolder(f *os.File) (desc string, pid int) {
	b := make([]byte, 256)
	n, _ := f.ReadAt(b, 0)
	var since string
	for line := range strings.Lines(string(b[:n])) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch k {
		case "pid":
			pid, _ = strconv.Atoi(v)
		case "since":
			since = v
		}
	}
	if pid <= 0 {
		// The holder took the lock a moment ago and has not written its record yet.
		return "another process", 0
	}
	s := "process " + strconv.Itoa(pid)
	switch cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); {
	case pid == os.Getpid():
		s += " (this process)"
	case err == nil && len(cmdline) > 0:
		args := strings.Join(strings.Fields(string(bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '}))), " ")
		if len(args) > 200 {
			args = args[:200] + "…"
		}
		s += " (" + args + ")"
	}
	if since != "" {
		s += ", since " + since + ","
	}
	return s, pid
}
