package localenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// DevProvisionerName is the provisioner of the simulated cluster's storage classes.
const DevProvisionerName = "dev.berth.dev/simulated"

// DevStorageClasses are the storage classes the simulated cluster offers (Akash's
// persistent storage class names).
var DevStorageClasses = []string{"beta1", "beta2", "beta3"}

// Provisioner provisions the local cluster's persistent volumes: a claim of one of its
// storage classes gets a PersistentVolume of the size asked, bound to it (the
// controller manager completes the binding), and a released volume is deleted with its
// data. The volumes are directories under the provisioner's own, made when the claim
// is provisioned, writable by every user: on a real node (RealNode) they keep a pod's
// data across its restarts; kwok's pods mount nothing. Their size is not enforced.
type Provisioner struct {
	cs      kubernetes.Interface
	dir     string
	classes []string
	log     *slog.Logger
	queue   workqueue.TypedRateLimitingInterface[string]
	claims  cache.Indexer
	vols    cache.Indexer
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// StartProvisioner creates the storage classes (when missing) and starts provisioning
// for them until Stop. dir holds the volumes' directories.
func StartProvisioner(ctx context.Context, cs kubernetes.Interface, classes []string, dir string, log *slog.Logger) (*Provisioner, error) {
	immediate := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimDelete
	for _, c := range classes {
		sc := &storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: c, Labels: map[string]string{"app.kubernetes.io/managed-by": "berth-dev"}},
			Provisioner:       DevProvisionerName,
			ReclaimPolicy:     &reclaim,
			VolumeBindingMode: &immediate,
		}
		if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create storage class %s: %w", c, err)
		}
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	f := informers.NewSharedInformerFactory(cs, 0)
	pvcs, pvs := f.Core().V1().PersistentVolumeClaims().Informer(), f.Core().V1().PersistentVolumes().Informer()
	p := &Provisioner{
		cs: cs, dir: dir, classes: classes, log: log, stop: stop,
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		claims: pvcs.GetIndexer(), vols: pvs.GetIndexer(),
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			p.queue.Add(key)
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }}
	for _, inf := range []cache.SharedIndexInformer{pvcs, pvs} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			stop()
			return nil, err
		}
	}
	f.Start(runCtx.Done())
	p.wg.Go(func() {
		<-runCtx.Done()
		p.queue.ShutDown()
		f.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), pvcs.HasSynced, pvs.HasSynced) {
		p.Stop()
		return nil, errors.New("storage provisioner: informers did not sync")
	}
	p.wg.Go(func() {
		for p.next(runCtx) {
		}
	})
	return p, nil
}

// Stop ends provisioning and waits for its goroutines.
func (p *Provisioner) Stop() {
	p.stop()
	p.wg.Wait()
}

func (p *Provisioner) next(ctx context.Context) bool {
	key, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(key)
	if err := p.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			p.log.WarnContext(ctx, "storage provisioner", slog.String("object", key), slog.String("error", err.Error()))
			p.queue.AddRateLimited(key)
		}
		return true
	}
	p.queue.Forget(key)
	return true
}

// sync handles a claim (namespace/name) or a volume (name).
func (p *Provisioner) sync(ctx context.Context, key string) error {
	if obj, ok, _ := p.claims.GetByKey(key); ok {
		if c, isClaim := obj.(*corev1.PersistentVolumeClaim); isClaim {
			return p.provision(ctx, c)
		}
	}
	if obj, ok, _ := p.vols.GetByKey(key); ok {
		pv, isVolume := obj.(*corev1.PersistentVolume)
		if isVolume && pv.Spec.StorageClassName != "" && slices.Contains(p.classes, pv.Spec.StorageClassName) &&
			pv.Status.Phase == corev1.VolumeReleased && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete {
			err := p.cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("delete released volume %s: %w", pv.Name, err)
			}
			// Only a directory of this provisioner's: the volume names the path.
			if hp := pv.Spec.HostPath; (err == nil || apierrors.IsNotFound(err)) && hp != nil && filepath.Dir(hp.Path) == p.dir {
				if err := os.RemoveAll(hp.Path); err != nil {
					return fmt.Errorf("remove the data of released volume %s: %w", pv.Name, err)
				}
			}
		}
	}
	return nil
}

func (p *Provisioner) provision(ctx context.Context, c *corev1.PersistentVolumeClaim) error {
	if c.Spec.StorageClassName == nil || !slices.Contains(p.classes, *c.Spec.StorageClassName) ||
		c.Spec.VolumeName != "" || c.Status.Phase != corev1.ClaimPending || c.DeletionTimestamp != nil {
		return nil
	}
	size, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return fmt.Errorf("claim %s/%s asks for no storage size", c.Namespace, c.Name)
	}
	modes := c.Spec.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	name := "pvc-" + string(c.UID)
	// Made here, writable by any user: a hostPath volume ignores the pod's fsGroup, and
	// the pod may run as any UID (the chart's as 65532), as with local-path-provisioner.
	dir := filepath.Join(p.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("provision a volume for claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { //nolint:gosec // G302: a volume any pod user writes, as on a cluster's local volumes
		return fmt.Errorf("provision a volume for claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": DevProvisionerName}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   modes,
			StorageClassName:              *c.Spec.StorageClassName,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirOrCreate}},
		},
	}
	if _, err := p.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("provision a volume for claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}
