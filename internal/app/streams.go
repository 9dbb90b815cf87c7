package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/gateway/rest"
	"berth.dev/berth/internal/market"
)

// leaseStreams serves the gateway's logs, events and shells from the cluster
// (kube.Streams), in the gateway's terms.
type leaseStreams struct {
	k *kube.Streams
}

// streamError marks the cluster's answers the tenant can act on.
func streamError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kube.ErrNoSuchLease), errors.Is(err, kube.ErrNoSuchService):
		return fmt.Errorf("%w: %w", rest.ErrNotFound, err)
	case errors.Is(err, kube.ErrNoPods):
		return fmt.Errorf("%w: %w", rest.ErrNoPods, err)
	case errors.Is(err, kube.ErrNoSuchPod):
		return fmt.Errorf("%w: %w", rest.ErrPodIndex, err)
	case errors.Is(err, kube.ErrInvalidRequest):
		return fmt.Errorf("%w: %w", rest.ErrBadRequest, err)
	case errors.Is(err, kube.ErrLogUnreadable):
		return fmt.Errorf("%w: %w", rest.ErrLogUnreadable, err)
	case errors.Is(err, kube.ErrNoSuchCommand):
		return fmt.Errorf("%w: %w", rest.ErrCommandNotFound, err)
	}
	return err
}

// Logs implements rest.Streams: one service's pods, or all and filtered.
func (l leaseStreams) Logs(ctx context.Context, id market.LeaseID, o rest.LogOptions, emit func(rest.LogLine) error) error {
	ko := kube.LogOptions{Follow: o.Follow}
	if o.Tail >= 0 {
		tail := o.Tail
		ko.TailLines = &tail
	}
	if len(o.Services) == 1 {
		ko.Service = o.Services[0]
	}
	return streamError(l.k.Logs(ctx, id, ko, func(line kube.LogLine) error {
		if len(o.Services) > 1 && !slices.Contains(o.Services, line.Service) {
			return nil
		}
		return emit(rest.LogLine{Pod: line.Pod, Service: line.Service, Message: line.Message})
	}))
}

// Events implements rest.Streams.
func (l leaseStreams) Events(ctx context.Context, id market.LeaseID, follow bool, emit func(api.LeaseEvent) error) error {
	ns := kube.LeaseNamespace(id)
	return streamError(l.k.Events(ctx, id, kube.EventOptions{Follow: follow}, func(e cluster.Event) error {
		kind, name, _ := strings.Cut(e.Object, "/")
		return emit(api.LeaseEvent{Type: e.Type, Reason: e.Reason, Note: e.Message, Object: api.EventObject{Kind: kind, Namespace: ns, Name: name}})
	}))
}

// Exec implements rest.Streams.
func (l leaseStreams) Exec(ctx context.Context, id market.LeaseID, r rest.ExecRequest) (int, error) {
	ko := kube.ExecOptions{Service: r.Service, PodIndex: r.PodIndex, Command: r.Command, Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr, TTY: r.TTY}
	if r.Resize != nil {
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		sizes := make(chan kube.TerminalSize, 1)
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case sz := <-r.Resize:
					select {
					case sizes <- kube.TerminalSize{Width: sz.Width, Height: sz.Height}:
					case <-ctx.Done():
						return
					}
				}
			}
		})
		ko.Resize = sizes
		code, err := l.k.Exec(ctx, id, ko)
		return code, streamError(err)
	}
	code, err := l.k.Exec(ctx, id, ko)
	return code, streamError(err)
}
