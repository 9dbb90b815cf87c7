package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/ownership"
)

// Streams serves a lease's tenant what the provider gateway exposes of the lease's
// pods: their logs (Logs), the Kubernetes events of the lease's namespace (Events) and
// commands run in their containers (Exec), all through the API server. It holds no
// state between calls and is safe for concurrent use. Logs and Events return only
// after every goroutine they started has exited; Exec's session goroutines are
// client-go's, and one may still read ExecRequest.Stdin after it returns.
//
// The provider's identity needs, in lease namespaces: get namespaces; list pods,
// deployments and statefulsets; get pods/log; get and create pods/exec (websockets are
// a GET, SPDY a POST); list and watch events (config/rbac grants them).
type Streams struct {
	cs  kubernetes.Interface
	cfg *rest.Config // for exec's connections
	log *slog.Logger
}

// NewStreams returns the tenant streams of the cluster cfg reaches. cfg's Timeout is
// not applied (a followed log or a shell lasts as long as the tenant wants); ctx ends
// each call.
func NewStreams(cfg *rest.Config, log *slog.Logger) (*Streams, error) {
	if cfg == nil || log == nil {
		return nil, errors.New("streams: client configuration and logger are required")
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("streams: kubernetes client: %w", err)
	}
	return &Streams{cs: cs, cfg: cfg, log: log}, nil
}

// leaseNamespace is the lease's namespace, ErrNoSuchLease when the cluster has none
// (or a namespace of that name belongs to another lease).
func (s *Streams) leaseNamespace(ctx context.Context, id market.LeaseID) (string, error) {
	name := LeaseNamespace(id)
	ns, err := s.cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("lease %s: %w", id, deploy.ErrNoSuchLease)
	}
	if err != nil {
		return "", fmt.Errorf("lease %s: get namespace %s: %w", id, name, err)
	}
	if got, ok := ownership.LeaseFromLabels(ns.Labels); !ok || got != id {
		return "", fmt.Errorf("lease %s: namespace %s is not its: %w", id, name, deploy.ErrNoSuchLease)
	}
	return name, nil
}

// checkService returns ErrNoSuchService unless the lease runs a workload for service.
func (s *Streams) checkService(ctx context.Context, id market.LeaseID, ns, service string) error {
	if len(validation.IsValidLabelValue(service)) > 0 || service == "" {
		// Not a name the manifest could have (and not to be put in a label selector).
		return fmt.Errorf("lease %s: service %q: %w", id, service, deploy.ErrNoSuchService)
	}
	opts := metav1.ListOptions{LabelSelector: ownership.LabelManaged + "=true," + LabelService + "=" + service}
	deps, err := s.cs.AppsV1().Deployments(ns).List(ctx, opts)
	if err != nil {
		return fmt.Errorf("lease %s: list deployments: %w", id, err)
	}
	if len(deps.Items) > 0 {
		return nil
	}
	sets, err := s.cs.AppsV1().StatefulSets(ns).List(ctx, opts)
	if err != nil {
		return fmt.Errorf("lease %s: list statefulsets: %w", id, err)
	}
	if len(sets.Items) > 0 {
		return nil
	}
	return fmt.Errorf("lease %s: service %q: %w", id, service, deploy.ErrNoSuchService)
}

// podSelector selects the lease's pods, or one service's.
func podSelector(service string) string {
	sel := ownership.LabelManaged + "=true"
	if service != "" {
		sel += "," + LabelService + "=" + service
	}
	return sel
}

// serviceContainer is the container of a lease pod that runs its service: the one
// named after it (the builders make one per pod), else the first.
func serviceContainer(p *corev1.Pod) string {
	service := p.Labels[LabelService]
	if i := slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == service }); i >= 0 {
		return service
	}
	if len(p.Spec.Containers) > 0 {
		return p.Spec.Containers[0].Name
	}
	return ""
}
