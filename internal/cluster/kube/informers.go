package kube

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// unindexedInformer is f's informer of obj's kind, in every namespace, listing with
// tweak (nil: everything), without the namespace index a factory's informers have.
// That index is a set per namespace and kind: for a store nobody reads by namespace
// it costs a few hundred bytes per lease and kind for nothing. The kinds are those
// berth watches; another is a programming error (a panic at the informer's creation,
// which every caller's tests reach).
func unindexedInformer(f informers.SharedInformerFactory, obj runtime.Object, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	return f.InformerFor(obj, func(cs kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
		none, all := cache.Indexers{}, metav1.NamespaceAll
		switch obj.(type) {
		case *corev1.Namespace:
			return coreinformers.NewFilteredNamespaceInformer(cs, r, none, tweak)
		case *corev1.Node:
			return coreinformers.NewFilteredNodeInformer(cs, r, none, tweak)
		case *corev1.Pod:
			return coreinformers.NewFilteredPodInformer(cs, all, r, none, tweak)
		case *corev1.PersistentVolumeClaim:
			return coreinformers.NewFilteredPersistentVolumeClaimInformer(cs, all, r, none, tweak)
		case *corev1.Service:
			return coreinformers.NewFilteredServiceInformer(cs, all, r, none, tweak)
		case *corev1.ServiceAccount:
			return coreinformers.NewFilteredServiceAccountInformer(cs, all, r, none, tweak)
		case *corev1.Secret:
			return coreinformers.NewFilteredSecretInformer(cs, all, r, none, tweak)
		case *corev1.Event:
			return coreinformers.NewFilteredEventInformer(cs, all, r, none, tweak)
		case *networkingv1.NetworkPolicy:
			return networkinginformers.NewFilteredNetworkPolicyInformer(cs, all, r, none, tweak)
		case *appsv1.Deployment:
			return appsinformers.NewFilteredDeploymentInformer(cs, all, r, none, tweak)
		case *appsv1.StatefulSet:
			return appsinformers.NewFilteredStatefulSetInformer(cs, all, r, none, tweak)
		}
		panic(fmt.Sprintf("unindexedInformer: no informer of %T", obj))
	})
}
