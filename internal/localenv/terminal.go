package localenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// terminalDrainDelay is how long the output of a command that has exited is still
// read while another process (a background child) holds its terminal.
const terminalDrainDelay = time.Second

// runTerminal runs a command in a terminal of its own, as a container runtime does for
// `exec -t`: a pseudo-terminal is its stdin, stdout and stderr and its session's
// controlling terminal. The terminal's output goes to stdout (read and dropped without
// one: a terminal nobody reads would stop the command), stdin is typed into it, and
// each size read from resize (JSON, as the remote command protocol sends them) is set
// on it. The end of stdin hangs the terminal up (SIGHUP), as a runtime closing the
// console does. It returns once the command has exited and its output has been
// copied; the goroutines reading stdin and resize, which may wait on the client, are
// counted in readers.
func (s *nodeServer) runTerminal(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer, resize io.Reader, readers *sync.WaitGroup) error {
	ptm, pts, err := openPTY()
	if err != nil {
		return fmt.Errorf("open a terminal: %w", err)
	}
	defer func() { _ = ptm.Close() }()
	if resize != nil {
		readers.Go(func() { resizeFrom(resize, ptm) })
	}
	cmd := s.command(ctx, argv)
	// The session's leader, hence its process group's: ctx ending still kills it whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	err = cmd.Start()
	_ = pts.Close() // the command has its own
	if err != nil {
		return err
	}
	if stdout == nil {
		stdout = io.Discard
	}
	output := make(chan struct{})
	go func() {
		defer close(output)
		// Until no process holds the terminal (a read then fails with EIO), or ptm is
		// closed.
		_, _ = io.Copy(stdout, ptm)
	}()
	var mu sync.Mutex // guards exited
	exited := false
	if stdin != nil {
		readers.Go(func() {
			if _, err := io.Copy(ptm, stdin); err != nil {
				return // the terminal is closed: the command is over
			}
			mu.Lock()
			defer mu.Unlock()
			if !exited { // its process group may not be its own any more
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGHUP)
			}
		})
	}
	err = cmd.Wait()
	mu.Lock()
	exited = true
	mu.Unlock()
	drain := time.NewTimer(terminalDrainDelay)
	defer drain.Stop()
	select {
	case <-output:
	case <-drain.C: // a background child holds the terminal: it does not hold the session
	}
	_ = ptm.Close()
	<-output
	return err
}

// openPTY opens a pseudo-terminal: its master side, and the terminal itself.
func openPTY() (ptm, pts *os.File, err error) {
	ptm, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	var peer uintptr
	err = control(ptm, func(fd int) error {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return fmt.Errorf("unlock %s: %w", ptm.Name(), err)
		}
		// The peer by its descriptor, which needs no /dev/pts of this devpts instance.
		r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
		if errno != 0 {
			return fmt.Errorf("open the terminal of %s: %w", ptm.Name(), errno)
		}
		peer = r
		return nil
	})
	if err != nil {
		_ = ptm.Close()
		return nil, nil, err
	}
	return ptm, os.NewFile(peer, "pts"), nil
}

// resizeFrom sets the terminal's size to each one read from r, until r ends.
func resizeFrom(r io.Reader, ptm *os.File) {
	dec := json.NewDecoder(r)
	for {
		var size struct{ Width, Height uint16 }
		if err := dec.Decode(&size); err != nil {
			return
		}
		_ = control(ptm, func(fd int) error {
			return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: size.Height, Col: size.Width})
		})
	}
}

// control runs fn on f's descriptor (an error once f is closed).
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
