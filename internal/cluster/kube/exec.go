package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
)

// Exec runs a command in the container of one of a lease service's running pods and
// returns once it has exited, with its exit code: a command that fails is a result, not
// an error. Errors are the request's (ErrInvalidRequest, ErrNoSuchLease,
// ErrNoSuchService, ErrNoSuchPod, ErrNoSuchCommand) or the connection's; ctx ending
// ends the session.
//
// The session goes over a websocket, or SPDY when the API server does not take
// websockets.
func (s *Streams) Exec(ctx context.Context, id market.LeaseID, opts deploy.ExecRequest) (int, error) {
	if opts.Service == "" || len(opts.Command) == 0 || opts.Command[0] == "" {
		return 0, fmt.Errorf("lease %s: exec needs a service and a command: %w", id, deploy.ErrInvalidRequest)
	}
	ns, err := s.leaseNamespace(ctx, id)
	if err != nil {
		return 0, err
	}
	pod, err := s.execPod(ctx, id, ns, opts.Service, opts.PodIndex)
	if err != nil {
		return 0, err
	}
	// Output nobody reads is read and dropped: a node serves no exec without a stream
	// (a kubelet refuses one), and an unread stream would stall the command.
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	req := s.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: serviceContainer(pod), Command: opts.Command,
			Stdin: opts.Stdin != nil, Stdout: true, Stderr: !opts.TTY, TTY: opts.TTY,
		}, scheme.ParameterCodec)
	exec, err := s.executor(req.URL())
	if err != nil {
		return 0, fmt.Errorf("lease %s: exec in %s/%s: %w", id, ns, pod.Name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the resize reader
	stream := remotecommand.StreamOptions{Stdin: opts.Stdin, Stdout: opts.Stdout, Tty: opts.TTY}
	if !opts.TTY {
		stream.Stderr = opts.Stderr
	}
	if opts.TTY && opts.Resize != nil {
		stream.TerminalSizeQueue = resizeQueue{ctx: ctx, sizes: opts.Resize}
	}
	err = exec.StreamWithContext(ctx, stream)
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit) && exit.Exited():
		return exit.ExitStatus(), nil
	case commandNotFound(err):
		return 0, fmt.Errorf("lease %s: exec %q in %s/%s: %w", id, opts.Command[0], ns, pod.Name, deploy.ErrNoSuchCommand)
	default:
		return 0, fmt.Errorf("lease %s: exec in %s/%s: %w", id, ns, pod.Name, err)
	}
}

// commandNotFound reports the kubelet's answer to a command the container does not
// have. It arrives as text only (a Status with reason InternalError, its message the
// container runtime's: "error executing command in container: … exec: "x":
// executable file not found in $PATH", or "… no such file or directory" for a path),
// so the text is all there is to tell it by, as Akash's provider does.
func commandNotFound(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "error executing command in container") &&
		(strings.Contains(msg, "executable file not found") || strings.Contains(msg, "no such file or directory"))
}

// execPod is the service's running pod at index (sorted by name).
func (s *Streams) execPod(ctx context.Context, id market.LeaseID, ns, service string, index int) (*corev1.Pod, error) {
	if err := s.checkService(ctx, id, ns, service); err != nil {
		return nil, err
	}
	list, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podSelector(service)})
	if err != nil {
		return nil, fmt.Errorf("lease %s: list pods: %w", id, err)
	}
	var running []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	if index < 0 || index >= len(running) {
		return nil, fmt.Errorf("lease %s: service %s has %d running pods, not one at index %d: %w", id, service, len(running), index, deploy.ErrNoSuchPod)
	}
	slices.SortFunc(running, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return running[index], nil
}

// executor speaks websocket to the API server, falling back to SPDY when it refuses
// the upgrade (as kubectl does). Executors are not for concurrent use: one per session.
func (s *Streams) executor(u *url.URL) (remotecommand.Executor, error) {
	ws, err := remotecommand.NewWebSocketExecutor(s.cfg, http.MethodGet, u.String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(s.cfg, http.MethodPost, u)
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// resizeQueue hands client-go the terminal sizes; nil (no more) once the channel is
// closed or the session is over.
type resizeQueue struct {
	ctx   context.Context // the session's: a queue lives for one Exec
	sizes <-chan deploy.TerminalSize
}

func (q resizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case sz, ok := <-q.sizes:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: sz.Width, Height: sz.Height}
	case <-q.ctx.Done():
		return nil
	}
}
