package kube

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// objectMeta is what a view keeps of its object's metadata: the names the informers'
// stores key and index it by, and the version. It is a metav1.Object, as informers
// need, whose other fields read as empty and are not kept (setting them does
// nothing): 48 bytes where metav1.ObjectMeta is 232, for each of the tens of objects a
// lease has in the caches.
type objectMeta struct {
	Name, Namespace, ResourceVersion string
}

var _ metav1.Object = (*objectMeta)(nil)

// GetObjectKind: views carry no type; the informer that holds one knows it.
func (*objectMeta) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (m *objectMeta) GetNamespace() string                        { return m.Namespace }
func (m *objectMeta) SetNamespace(ns string)                      { m.Namespace = ns }
func (m *objectMeta) GetName() string                             { return m.Name }
func (m *objectMeta) SetName(name string)                         { m.Name = name }
func (m *objectMeta) GetResourceVersion() string                  { return m.ResourceVersion }
func (m *objectMeta) SetResourceVersion(v string)                 { m.ResourceVersion = v }
func (*objectMeta) GetGenerateName() string                       { return "" }
func (*objectMeta) SetGenerateName(string)                        {}
func (*objectMeta) GetUID() types.UID                             { return "" }
func (*objectMeta) SetUID(types.UID)                              {}
func (*objectMeta) GetGeneration() int64                          { return 0 }
func (*objectMeta) SetGeneration(int64)                           {}
func (*objectMeta) GetSelfLink() string                           { return "" }
func (*objectMeta) SetSelfLink(string)                            {}
func (*objectMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (*objectMeta) SetCreationTimestamp(metav1.Time)              {}
func (*objectMeta) GetDeletionTimestamp() *metav1.Time            { return nil }
func (*objectMeta) SetDeletionTimestamp(*metav1.Time)             {}
func (*objectMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (*objectMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (*objectMeta) GetLabels() map[string]string                  { return nil }
func (*objectMeta) SetLabels(map[string]string)                   {}
func (*objectMeta) GetAnnotations() map[string]string             { return nil }
func (*objectMeta) SetAnnotations(map[string]string)              {}
func (*objectMeta) GetFinalizers() []string                       { return nil }
func (*objectMeta) SetFinalizers([]string)                        {}
func (*objectMeta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (*objectMeta) SetOwnerReferences([]metav1.OwnerReference)    {}
func (*objectMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (*objectMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
