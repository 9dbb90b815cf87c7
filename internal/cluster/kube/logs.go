package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
)

const (
	// MaxLogLine is the longest Message of a LogLine.
	MaxLogLine = 16 << 10
	// logBuffer is how many lines wait for the consumer before the pods' streams stop
	// reading (and the API server, then the kubelet, stop sending).
	logBuffer = 128
)

// Logs streams the logs of the lease's pods (the services' in opts.Services; every
// service's when it is empty),
// each pod's from its own connection, merged as they come: fn sees each pod's lines in
// order, one call at a time, from the caller's goroutine. Memory is bounded however
// slow fn is: when fn falls behind, reading stops.
//
// Logs returns when ctx ends (nil), when fn returns an error (that error), or, without
// Follow, once every pod's log has been read. Without Follow, a pod whose log cannot
// be read (its container has not started, the pod is gone, the read broke off) is
// left out and, once the others' lines are delivered, Logs returns ErrLogUnreadable
// (saying how many): the tenant learns that lines are missing. With Follow such a pod
// is logged and left out (one that has not started is streamed when it starts). No
// pods at all is ErrNoPods; an unknown lease is ErrNoSuchLease, an unknown service
// ErrNoSuchService.
func (s *Streams) Logs(ctx context.Context, id market.LeaseID, opts deploy.LogOptions, fn func(deploy.LogLine) error) error {
	if opts.TailLines != nil && *opts.TailLines < 0 {
		return fmt.Errorf("lease %s: negative tail: %w", id, deploy.ErrInvalidRequest)
	}
	if opts.Previous && opts.Follow {
		return fmt.Errorf("lease %s: previous and follow: a container's ended run writes no more: %w", id, deploy.ErrInvalidRequest)
	}
	ns, err := s.leaseNamespace(ctx, id)
	if err != nil {
		return err
	}
	for _, svc := range opts.Services {
		if err := s.checkService(ctx, id, ns, svc); err != nil {
			return err
		}
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := &logMux{s: s, id: id, ns: ns, opts: opts, lines: make(chan deploy.LogLine, logBuffer), started: map[string]bool{}}
	var findErr error
	go func() {
		if opts.Follow {
			findErr = m.watchPods(ctx)
		} else {
			findErr = m.listPods(ctx)
		}
		m.mu.Lock()
		m.closed = true // no stream starts after this
		m.mu.Unlock()
		m.streams.Wait()
		close(m.lines)
	}()
	var fnErr error
	for l := range m.lines {
		if fnErr != nil || len(opts.Services) > 1 && !slices.Contains(opts.Services, l.Service) {
			continue // drained until the streams have seen ctx end; or not asked for
		}
		if fnErr = fn(l); fnErr != nil {
			cancel()
		}
	}
	switch {
	case fnErr != nil:
		return fnErr
	case parent.Err() != nil:
		return nil // the caller is done; what failed meanwhile does not matter
	case findErr != nil: // written before lines was closed
		return findErr
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unread > 0 {
		return fmt.Errorf("lease %s: %d of %d pods: %w", id, m.unread, m.pods, deploy.ErrLogUnreadable)
	}
	return nil
}

// logMux starts one stream per pod (per container instance) and merges their lines.
type logMux struct {
	s     *Streams
	id    market.LeaseID
	ns    string
	opts  deploy.LogOptions
	lines chan deploy.LogLine

	mu      sync.Mutex // guards started, closed, pods and unread, and the Add side of streams
	started map[string]bool
	closed  bool
	streams sync.WaitGroup
	// Without Follow: the pods listed, and those whose log could not be read.
	pods, unread int
}

// service is the one service whose pods are read ("": every service's pods, the lines
// of those not asked for left out by Logs).
func (m *logMux) service() string {
	if len(m.opts.Services) == 1 {
		return m.opts.Services[0]
	}
	return ""
}

// failed counts a pod whose log could not be read, without Follow (following, one
// that has not started yet is streamed when it does, and a failure is only logged).
func (m *logMux) failed() {
	if m.opts.Follow {
		return
	}
	m.mu.Lock()
	m.unread++
	m.mu.Unlock()
}

// listPods streams the pods running now.
func (m *logMux) listPods(ctx context.Context) error {
	pods, err := m.s.cs.CoreV1().Pods(m.ns).List(ctx, metav1.ListOptions{LabelSelector: podSelector(m.service())})
	if err != nil {
		return fmt.Errorf("lease %s: list pods: %w", m.id, err)
	}
	if len(pods.Items) == 0 {
		return fmt.Errorf("lease %s: %w", m.id, deploy.ErrNoPods)
	}
	m.mu.Lock()
	m.pods = len(pods.Items)
	m.mu.Unlock()
	for i := range pods.Items {
		m.start(ctx, &pods.Items[i], m.opts.TailLines)
	}
	return nil
}

// watchPods streams the pods running now, then each pod (or restarted container) as it
// starts, until ctx ends.
func (m *logMux) watchPods(ctx context.Context) error {
	// An informer retries a failing list forever: a list that cannot be made (no
	// permission, say) is an error here rather than a stream that never starts.
	if _, err := m.s.cs.CoreV1().Pods(m.ns).List(ctx, metav1.ListOptions{LabelSelector: podSelector(m.service()), Limit: 1}); err != nil {
		return fmt.Errorf("lease %s: list pods: %w", m.id, err)
	}
	f := informers.NewSharedInformerFactoryWithOptions(m.s.cs, 0, informers.WithNamespace(m.ns),
		informers.WithTransform(stripManagedFields),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = podSelector(m.service()) }))
	reg, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(o any, initial bool) {
			if p, ok := o.(*corev1.Pod); ok {
				tail := m.opts.TailLines
				if !initial {
					tail = nil // all of it is new
				}
				m.start(ctx, p, tail)
			}
		},
		UpdateFunc: func(_, o any) {
			if p, ok := o.(*corev1.Pod); ok {
				m.start(ctx, p, nil)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("lease %s: watch pods: %w", m.id, err)
	}
	return runInformers(ctx, f, "lease "+m.id.String()+" logs", []cache.ResourceEventHandlerRegistration{reg}, func() {})
}

// start streams a pod's log unless its container has not started or is already
// being streamed.
func (m *logMux) start(ctx context.Context, p *corev1.Pod, tail *int64) {
	container := serviceContainer(p)
	var restarts int32
	ready := false
	for i := range p.Status.ContainerStatuses {
		if c := &p.Status.ContainerStatuses[i]; c.Name == container {
			ready = c.State.Running != nil || c.State.Terminated != nil
			restarts = c.RestartCount
		}
	}
	if m.opts.Previous {
		// Only a container that has restarted has an ended run to read; one that has
		// not is no failure: it has nothing to show.
		if restarts == 0 {
			return
		}
		ready = true
	}
	if !ready {
		m.failed()
		return
	}
	// A restarted container has a new log.
	key := string(p.UID) + "/" + strconv.Itoa(int(restarts))
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.started[key] {
		return
	}
	m.started[key] = true
	name, service := p.Name, p.Labels[LabelService]
	m.streams.Go(func() { m.stream(ctx, name, service, container, tail) })
}

// stream reads one pod's log line by line into lines.
func (m *logMux) stream(ctx context.Context, pod, service, container string, tail *int64) {
	body, err := m.s.cs.CoreV1().Pods(m.ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: m.opts.Follow, TailLines: tail, Previous: m.opts.Previous}).Stream(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.failed()
			m.s.log.WarnContext(ctx, "pod log unreadable", slog.String("lease", m.id.String()), slog.String("pod", m.ns+"/"+pod), slog.String("error", err.Error()))
		}
		return
	}
	defer func() { _ = body.Close() }()
	r := bufio.NewReaderSize(body, MaxLogLine)
	for {
		line, _, err := r.ReadLine() // a line, or a MaxLogLine piece of one
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				m.failed()
				m.s.log.WarnContext(ctx, "pod log interrupted", slog.String("lease", m.id.String()), slog.String("pod", m.ns+"/"+pod), slog.String("error", err.Error()))
			}
			return
		}
		select {
		case m.lines <- deploy.LogLine{Service: service, Pod: pod, Message: string(line)}:
		case <-ctx.Done():
			return
		}
	}
}

// stripManagedFields drops what no stream reads from the objects informers keep.
func stripManagedFields(o any) (any, error) {
	if m, ok := o.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return o, nil
}
