package deploy

import (
	"errors"
	"io"
)

// Errors of the tenant streams, for the gateway to map to its codes (not found, bad
// request). Their text names no cluster internals.
var (
	// ErrNoSuchLease: the cluster runs nothing for the lease.
	ErrNoSuchLease = errors.New("the lease runs nothing on this provider")
	// ErrNoSuchService: the lease's manifest has no such service.
	ErrNoSuchService = errors.New("the lease has no such service")
	// ErrNoPods: the lease (or service) has no pod to read the logs of.
	ErrNoPods = errors.New("no running pods")
	// ErrNoSuchPod: the service has no running replica at that index.
	ErrNoSuchPod = errors.New("the service has no running replica at that index")
	// ErrInvalidRequest: the request lacks what it needs (a service, a command).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrLogUnreadable: without Follow, a listed pod's log could not be read (its
	// container has not started, or the pod is gone).
	ErrLogUnreadable = errors.New("a pod's log could not be read")
	// ErrNoSuchCommand: the container has no such program to execute.
	ErrNoSuchCommand = errors.New("no such command in the container")
)

// LogOptions choose the logs Logs streams.
type LogOptions struct {
	// Services limits the logs to these services' pods; empty: every service's.
	Services []string
	// Follow streams new lines as they are written, and the pods that start meanwhile,
	// until ctx ends. Without it, Logs returns once it has read what each pod has.
	Follow bool
	// TailLines, when set, starts each pod's log that many lines before its end. A pod
	// that starts while following is streamed from its first line.
	TailLines *int64
	// Previous reads each pod's container as it was before its last restart (the log
	// of the run that ended: why it crashed, say); a pod whose container has not
	// restarted has none. Not with Follow: an ended run writes no more.
	Previous bool
}

// LogLine is one line of a container's log.
type LogLine struct {
	Service string
	Pod     string
	// Message is the line without its newline. A line longer than MaxLogLine bytes
	// arrives as several, in order (kube.MaxLogLine).
	Message string
}

// ExecRequest says what Exec runs, where, and with which streams.
type ExecRequest struct {
	// Service is the manifest service whose container runs the command (required).
	Service string
	// PodIndex picks one of the service's running pods, sorted by name.
	PodIndex int
	// Command is the program and its arguments (required).
	Command []string
	// Stdin, when set, is the command's input; its end closes the command's stdin.
	// Exec may return before Stdin has ended: a read of it still waiting then returns
	// when the caller closes it (the tenant's connection, say).
	Stdin io.Reader
	// Stdout and Stderr receive the command's output; nil discards it. With TTY the
	// terminal's output goes to Stdout only.
	Stdout, Stderr io.Writer
	// TTY runs the command in a terminal; Resize then tells it its size (the first
	// value as soon as known; close it or end ctx when done).
	TTY    bool
	Resize <-chan TerminalSize
}

// TerminalSize is a terminal's width and height, in characters.
type TerminalSize struct {
	Width, Height uint16
}

// EventOptions choose what Events delivers.
type EventOptions struct {
	// Follow delivers, after the current events, each event created or updated (its
	// count growing) afterwards, until ctx ends.
	Follow bool
}
