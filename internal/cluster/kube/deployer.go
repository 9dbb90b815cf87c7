package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/ownership"
)

// ErrForeign reports an object of a lease's name that belongs to another provider or
// chain (a shared cluster): berth neither writes over it nor deletes it.
var ErrForeign = errors.New("belongs to another provider")

// Deployer puts leases on the cluster and takes them off: the lease's objects and its
// Manifest resource in, the lease's namespace out. It only ever writes, reads back or
// deletes its owner's objects (Settings.Owner: the provider and the chain).
type Deployer struct {
	cs       kubernetes.Interface
	dc       dynamic.Interface
	settings Settings
	owner    ownership.Owner
	log      *slog.Logger

	// recorded is, by lease, what Record did for the manifest it recorded last, which
	// the lease's next Deploy of that very manifest does not do again (a manifest is
	// built and recorded once per change).
	mu       sync.Mutex
	recorded map[market.LeaseID]*recordedManifest
}

// recordedManifest is what Record built and wrote for one manifest of a lease.
type recordedManifest struct {
	version []byte
	routes  deploy.Routes
	objs    *LeaseObjects
	applied *unstructured.Unstructured // the Manifest resource as written
}

// NewDeployer returns a deployer; it starts nothing.
func NewDeployer(cs kubernetes.Interface, dc dynamic.Interface, s Settings, log *slog.Logger) (*Deployer, error) {
	if cs == nil || dc == nil || log == nil {
		return nil, errors.New("deployer: clients and logger are required")
	}
	if err := s.Owner.Validate(); err != nil {
		return nil, fmt.Errorf("deployer: %w", err)
	}
	return &Deployer{cs: cs, dc: dc, settings: s, owner: s.Owner, log: log, recorded: map[market.LeaseID]*recordedManifest{}}, nil
}

// Record writes what a lease must run, durably, and nothing else: the lease's
// namespace (created if needed, refused if another provider's) and its Manifest
// resource's spec. Once it returns nil the manifest survives any stop of the provider;
// Deploy then applies it.
func (d *Deployer) Record(ctx context.Context, id market.LeaseID, version []byte, group market.ManifestGroup, routes deploy.Routes) error {
	if err := d.ours(id); err != nil {
		return err
	}
	objs, err := BuildLease(id, group, d.settings)
	if err != nil {
		return fmt.Errorf("lease %s: %w", id, err)
	}
	if err := d.ensureNamespace(ctx, objs.Namespace); err != nil {
		return fmt.Errorf("lease %s: %w", id, err)
	}
	applied, err := d.applyManifest(ctx, id, version, group, routes)
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.recorded, id)
	if err == nil {
		d.recorded[id] = &recordedManifest{version: bytes.Clone(version), routes: routes, objs: objs, applied: applied}
	}
	return err
}

// forgetRecorded drops what Record did for the lease (it goes).
func (d *Deployer) forgetRecorded(id market.LeaseID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.recorded, id)
}

// takeRecorded is what Record did for this very manifest and routes of the lease, if
// it was the last thing done for it; the lease's record is forgotten in any case.
func (d *Deployer) takeRecorded(id market.LeaseID, version []byte, routes deploy.Routes) *recordedManifest {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.recorded[id]
	delete(d.recorded, id)
	if r == nil || !bytes.Equal(r.version, version) || !slices.Equal(r.routes.Hosts, routes.Hosts) || !slices.Equal(r.routes.IPs, routes.IPs) {
		return nil
	}
	return r
}

// ours refuses leases of another provider.
func (d *Deployer) ours(id market.LeaseID) error {
	if id.Provider != d.owner.Provider {
		return fmt.Errorf("lease %s: %w (this is %s)", id, ErrForeign, d.owner.Provider)
	}
	return nil
}

// ensureNamespace makes sure the lease's namespace exists and is its owner's: created
// when missing, its labels restored when they drifted. A namespace of that name that
// is another provider's (or chain's) is never written to; one being deleted is
// created again once it is gone (the error says so, and the manager retries).
func (d *Deployer) ensureNamespace(ctx context.Context, want *corev1.Namespace) error {
	nss := d.cs.CoreV1().Namespaces()
	for range 3 {
		got, err := nss.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = nss.Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				continue // someone created it meanwhile: look at whose it is
			}
			if err != nil {
				return fmt.Errorf("create namespace %s: %w", want.Name, err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("get namespace %s: %w", want.Name, err)
		}
		if !d.owner.Owns(got.Labels) {
			return fmt.Errorf("namespace %s is %s: %w", want.Name, ownership.Describe(got.Labels), ErrForeign)
		}
		if got.DeletionTimestamp != nil {
			return fmt.Errorf("namespace %s is being deleted; it is created again once it is gone", want.Name)
		}
		if !hasLabels(got.Labels, want.Labels) {
			return Apply(ctx, d.cs, d.dc, &LeaseObjects{Namespace: want})
		}
		return nil
	}
	return fmt.Errorf("namespace %s: created and deleted by someone else while berth looked at it", want.Name)
}

// applyManifest server-side applies the lease's Manifest resource's spec and returns
// the resource as it is now.
func (d *Deployer) applyManifest(ctx context.Context, id market.LeaseID, version []byte, group market.ManifestGroup, routes deploy.Routes) (*unstructured.Unstructured, error) {
	m, err := NewManifest(id, d.owner, version, group, routes)
	if err != nil {
		return nil, err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		return nil, fmt.Errorf("lease %s: manifest: %w", id, err)
	}
	delete(obj, "status")
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("lease %s: manifest: %w", id, err)
	}
	force := true
	applied, err := d.dc.Resource(berthv1.ManifestResource).Namespace(m.Namespace).Patch(ctx, m.Name, types.ApplyPatchType, b,
		metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if err != nil {
		return nil, fmt.Errorf("lease %s: apply manifest resource: %w", id, err)
	}
	return applied, nil
}

// Deploy applies a lease's manifest group. The lease's namespace and its Manifest
// resource come first, so the record of what the lease must run survives a failure or
// a restart part-way (the manager re-applies from it); then the objects; then the
// Manifest's status says Applied, or Failed with the API server's reason. Applying the
// same group again changes nothing, or restores what was edited or deleted; a new
// version is applied in place.
func (d *Deployer) Deploy(ctx context.Context, id market.LeaseID, version []byte, group market.ManifestGroup, routes deploy.Routes) error {
	if err := d.ours(id); err != nil {
		return err
	}
	// Right after Record of this manifest, its objects are built and its namespace and
	// Manifest resource written: they are not again.
	rec := d.takeRecorded(id, version, routes)
	var objs *LeaseObjects
	if rec != nil {
		objs = rec.objs
	} else {
		var err error
		if objs, err = BuildLease(id, group, d.settings); err != nil {
			return fmt.Errorf("lease %s: %w", id, err)
		}
	}
	// Only the routes the lease holds: a hostname or leased-IP port another of the
	// tenant's deployments has stays there until the tenant migrates it.
	objs.Hosts = slices.DeleteFunc(objs.Hosts, func(h *berthv1.ProviderHost) bool { return !routes.HasHost(h.Spec.Hostname) })
	objs.LeasedIPs = slices.DeleteFunc(objs.LeasedIPs, func(ip *berthv1.ProviderLeasedIP) bool {
		return !routes.HasIP(deploy.IPPort{Endpoint: ip.Spec.Name, Port: uint32(ip.Spec.ExternalPort), Proto: ip.Spec.Protocol}) //nolint:gosec // a port, 1–65535
	})
	var applied *unstructured.Unstructured
	if rec != nil {
		applied = rec.applied
	} else {
		if err := d.ensureNamespace(ctx, objs.Namespace); err != nil {
			return fmt.Errorf("lease %s: %w", id, err)
		}
		var err error
		if applied, err = d.applyManifest(ctx, id, version, group, routes); err != nil {
			return err
		}
	}
	ns := objs.Namespace.Name
	if err := applyInNamespace(ctx, d.cs, d.dc, objs); err != nil {
		err = fmt.Errorf("lease %s: %w", id, err)
		d.setStatus(ctx, ns, berthv1.ManifestStatus{ObservedGeneration: applied.GetGeneration(), Phase: PhaseFailed, Message: err.Error()})
		return err
	}
	// Objects of an earlier manifest go once this one is applied. The first manifest
	// has nothing to prune, and one applied before in full (the same generation) has
	// nothing left over: then no list calls are made.
	observed, _, _ := unstructured.NestedInt64(applied.Object, "status", "observedGeneration")
	phase, _, _ := unstructured.NestedString(applied.Object, "status", "phase")
	if observed != 0 && (observed != applied.GetGeneration() || phase != PhaseApplied) {
		if err := Prune(ctx, d.cs, d.dc, objs, d.owner); err != nil {
			err = fmt.Errorf("lease %s: %w", id, err)
			d.setStatus(ctx, ns, berthv1.ManifestStatus{ObservedGeneration: observed, Phase: PhaseFailed, Message: err.Error()})
			return err
		}
	}
	if observed != applied.GetGeneration() || phase != PhaseApplied {
		d.setStatus(ctx, ns, berthv1.ManifestStatus{ObservedGeneration: applied.GetGeneration(), Phase: PhaseApplied})
	}
	return nil
}

// Phases a Manifest's status reports.
const (
	PhaseApplied = "Applied" // every object of the current generation was applied
	PhaseFailed  = "Failed"  // the API server refused an object: Message says which and why
)

// setStatus records the outcome on the Manifest's status (best effort: the manager
// reports the same and retries).
func (d *Deployer) setStatus(ctx context.Context, ns string, st berthv1.ManifestStatus) {
	b, err := json.Marshal(map[string]any{"status": st})
	if err == nil {
		_, err = d.dc.Resource(berthv1.ManifestResource).Namespace(ns).Patch(ctx, ManifestName, types.MergePatchType, b, metav1.PatchOptions{FieldManager: FieldManager}, "status")
	}
	if err != nil && ctx.Err() == nil {
		d.log.WarnContext(ctx, "manifest status not recorded", slog.String("namespace", ns), slog.String("error", err.Error()))
	}
}

// Teardown stops a lease's workloads and deletes its namespace, and with it every
// object and its Manifest. It returns once the deletions are accepted; a lease with
// nothing on the cluster is not an error, and neither is a namespace of that name that
// is another provider's: it is left alone (and logged).
//
// The workloads go first, with their pods after them through the garbage collector:
// the namespace controller empties namespaces a few at a time, and when many leases
// close at once it reaches some only minutes later. Until then the tenant's pods would
// keep running, and holding capacity, on a lease that has ended.
func (d *Deployer) Teardown(ctx context.Context, id market.LeaseID) error {
	if err := d.ours(id); err != nil {
		return err
	}
	d.forgetRecorded(id)
	name := LeaseNamespace(id)
	ns, err := d.cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("lease %s: get namespace %s: %w", id, name, err)
	case !d.owner.Owns(ns.Labels):
		d.log.WarnContext(ctx, "a namespace of our lease's name is another provider's; left alone",
			slog.String("lease", id.String()), slog.String("namespace", name), slog.String("whose", ownership.Describe(ns.Labels)))
		return nil
	case ns.DeletionTimestamp != nil:
		return nil // being deleted already
	}
	policy := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &policy}
	ours := metav1.ListOptions{LabelSelector: d.owner.Selector()}
	if err := d.cs.AppsV1().Deployments(name).DeleteCollection(ctx, del, ours); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lease %s: delete deployments in %s: %w", id, name, err)
	}
	if err := d.cs.AppsV1().StatefulSets(name).DeleteCollection(ctx, del, ours); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lease %s: delete statefulsets in %s: %w", id, name, err)
	}
	// Only the namespace looked at: not one someone re-created meanwhile.
	del.Preconditions = &metav1.Preconditions{UID: &ns.UID}
	err = d.cs.CoreV1().Namespaces().Delete(ctx, name, del)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("lease %s: delete namespace %s: %w", id, name, err)
	}
	if apierrors.IsConflict(err) {
		return fmt.Errorf("lease %s: namespace %s was replaced while it was torn down; trying again", id, name)
	}
	return nil
}

// Deployed lists the leases the cluster runs for this provider on this chain, and the
// routes each has, from their Manifest resources.
func (d *Deployer) Deployed(ctx context.Context) ([]deploy.Deployed, error) {
	ms, err := d.Manifests(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]deploy.Deployed, 0, len(ms))
	for _, m := range ms {
		id, version, group, err := ManifestLease(m)
		if err != nil {
			d.log.WarnContext(ctx, "unreadable manifest resource", slog.String("namespace", m.Namespace), slog.String("error", err.Error()))
			continue
		}
		if id.Provider != d.owner.Provider || m.Namespace != LeaseNamespace(id) {
			d.log.WarnContext(ctx, "manifest resource labelled ours names another lease or namespace; ignored",
				slog.String("namespace", m.Namespace), slog.String("lease", id.String()))
			continue
		}
		if err := d.restorePasswords(ctx, id, &group); err != nil {
			return nil, err
		}
		out = append(out, deploy.Deployed{Lease: id, Version: version, Group: group, Routes: ManifestRoutes(m)})
	}
	return out, nil
}

// restorePasswords puts back the registry passwords the Manifest resource leaves out,
// from the lease's pull Secrets, so that the lease can be applied again after a
// restart. A Secret that is gone or unreadable leaves the password empty: applying then
// fails with a reported reason rather than running without credentials.
func (d *Deployer) restorePasswords(ctx context.Context, id market.LeaseID, g *market.ManifestGroup) error {
	ns := LeaseNamespace(id)
	for i := range g.Services {
		c := g.Services[i].Credentials
		if c == nil || c.Password != "" {
			continue
		}
		name := g.Services[i].Name + "-pull"
		s, err := d.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			d.log.WarnContext(ctx, "pull secret gone; the lease cannot be applied again until a manifest arrives",
				slog.String("lease", id.String()), slog.String("secret", ns+"/"+name))
			continue
		case err != nil:
			return fmt.Errorf("lease %s: read pull secret %s: %w", id, name, err)
		}
		var cfg struct {
			Auths map[string]struct {
				Username string `json:"username"`
				Password string `json:"password"`
			} `json:"auths"`
		}
		if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
			d.log.WarnContext(ctx, "unreadable pull secret", slog.String("lease", id.String()), slog.String("secret", ns+"/"+name), slog.String("error", err.Error()))
			continue
		}
		if a, ok := cfg.Auths[c.Host]; ok && a.Username == c.Username {
			restored := *c
			restored.Password = a.Password
			g.Services[i].Credentials = &restored
		}
	}
	return nil
}

// Manifests lists the Manifest resources of this provider's leases on this chain:
// what the cluster runs, to rebuild from after a restart. Other providers' are never
// read. Manifests that cannot be read are skipped and logged.
func (d *Deployer) Manifests(ctx context.Context) ([]*berthv1.Manifest, error) {
	list, err := d.dc.Resource(berthv1.ManifestResource).List(ctx, metav1.ListOptions{LabelSelector: d.owner.Selector()})
	if err != nil {
		return nil, fmt.Errorf("list manifests: %w", err)
	}
	out := make([]*berthv1.Manifest, 0, len(list.Items))
	for i := range list.Items {
		if !d.owner.Owns(list.Items[i].GetLabels()) {
			continue // this provider on another chain
		}
		var m berthv1.Manifest
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &m); err != nil {
			d.log.WarnContext(ctx, "unreadable manifest resource", slog.String("namespace", list.Items[i].GetNamespace()), slog.String("error", err.Error()))
			continue
		}
		out = append(out, &m)
	}
	return out, nil
}

// Orphan is a lease namespace whose lease is not active on the ledger.
type Orphan struct {
	Namespace string
	Lease     market.LeaseID
	// Removed: handed to remove (false in a dry run, or when remove failed).
	Removed bool
}

// RemoveOrphans finds the namespaces berth made for this provider's leases on this
// chain that the ledger no longer shows active, and hands each lease to remove (nil:
// a dry run, only reported). The provider's remove closes the lease in the deployment
// manager, so that the manager, which may still run it (its close was missed), tears
// it down rather than restoring what the orphan check deleted.
// Other providers' namespaces are never looked at. A namespace whose lease the ledger
// cannot answer for is kept: an outage never removes a lease. Namespaces labelled as
// ours but naming no lease are reported as an error, not deleted.
func (d *Deployer) RemoveOrphans(ctx context.Context, active deploy.LeaseActive, remove func(context.Context, market.LeaseID) error) ([]Orphan, error) {
	list, err := d.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: d.owner.Selector()})
	if err != nil {
		return nil, fmt.Errorf("list lease namespaces: %w", err)
	}
	var out []Orphan
	var errs []error
	for i := range list.Items {
		ns := &list.Items[i]
		if ns.DeletionTimestamp != nil || !d.owner.Owns(ns.Labels) {
			continue
		}
		id, ok := d.owner.LeaseOf(ns.Labels)
		if !ok || LeaseNamespace(id) != ns.Name || id.Provider != d.owner.Provider {
			errs = append(errs, fmt.Errorf("namespace %s is labelled as ours but names no lease of ours", ns.Name))
			continue
		}
		ok, err := active(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("lease %s: %w", id, err))
			continue
		}
		if ok {
			continue
		}
		o := Orphan{Namespace: ns.Name, Lease: id}
		if remove != nil {
			if err := remove(ctx, id); err != nil {
				errs = append(errs, err)
				continue
			}
			o.Removed = true
		}
		out = append(out, o)
	}
	return out, errors.Join(errs...)
}

// RemoveFailedPods deletes this provider's lease pods that failed (evicted, or their
// node lost) at least olderThan ago and that a ReplicaSet replaces — a Deployment's:
// Kubernetes keeps failed pods until thousands pile up across the cluster, so
// providers ran clean-up jobs for them. Pods of StatefulSets (their controller replaces
// them itself) and pods without a controller are left. It returns the pods deleted.
func (d *Deployer) RemoveFailedPods(ctx context.Context, olderThan time.Duration) ([]string, error) {
	list, err := d.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: d.owner.Selector(), FieldSelector: "status.phase=Failed"})
	if err != nil {
		return nil, fmt.Errorf("list failed pods: %w", err)
	}
	var out []string
	var errs []error
	for i := range list.Items {
		p := &list.Items[i]
		ref := metav1.GetControllerOf(p)
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodFailed || !d.owner.Owns(p.Labels) || ref == nil || ref.Kind != "ReplicaSet" {
			continue
		}
		if time.Since(failedAt(p)) < olderThan {
			continue
		}
		uid := p.UID
		err := d.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil:
			out = append(out, p.Namespace+"/"+p.Name)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		default:
			errs = append(errs, fmt.Errorf("delete failed pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	return out, errors.Join(errs...)
}

// failedAt is when a pod failed, as well as it says: its latest condition change or
// container end, else its creation.
func failedAt(p *corev1.Pod) time.Time {
	at := p.CreationTimestamp.Time
	for _, c := range p.Status.Conditions {
		if c.LastTransitionTime.After(at) {
			at = c.LastTransitionTime.Time
		}
	}
	for i := range p.Status.ContainerStatuses {
		if t := p.Status.ContainerStatuses[i].State.Terminated; t != nil && t.FinishedAt.After(at) {
			at = t.FinishedAt.Time
		}
	}
	return at
}

var _ deploy.Deployer = (*Deployer)(nil)
