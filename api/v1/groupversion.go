// Package v1 holds berth's custom resources (group berth.dev, version v1): Manifest,
// the durable record of what a lease runs; ProviderHost, a hostname a lease serves;
// ProviderLeasedIP, a port on a leased IP address; Inventory, the cluster's nodes, GPUs
// and storage as the inventory operator reports them. The CRD YAML under config/crd and
// zz_generated.deepcopy.go are generated from these types by `make generate`.
//
// +kubebuilder:object:generate=true
// +groupName=berth.dev
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is berth.dev/v1.
var GroupVersion = schema.GroupVersion{Group: "berth.dev", Version: "v1"}

// The resources of berth's kinds, for dynamic clients and informers.
var (
	ManifestResource         = GroupVersion.WithResource("manifests")
	ProviderHostResource     = GroupVersion.WithResource("providerhosts")
	ProviderLeasedIPResource = GroupVersion.WithResource("providerleasedips")
	InventoryResource        = GroupVersion.WithResource("inventories")
)

var (
	// SchemeBuilder registers the types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Manifest{}, &ManifestList{},
		&ProviderHost{}, &ProviderHostList{},
		&ProviderLeasedIP{}, &ProviderLeasedIPList{},
		&Inventory{}, &InventoryList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
