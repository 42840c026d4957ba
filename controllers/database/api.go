package database

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupVersion is the Database API's group and version.
var GroupVersion = schema.GroupVersion{Group: "apps.kubeprop.dev", Version: "v1"}

var schemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

// AddToScheme adds Database and DatabaseList to a scheme.
var AddToScheme = schemeBuilder.AddToScheme

func init() { schemeBuilder.Register(&Database{}, &DatabaseList{}) }

// Database is a replicated database: Replicas members, each with a volume
// of Storage.
type Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DatabaseSpec   `json:"spec"`
	Status DatabaseStatus `json:"status,omitempty"`
}

// DatabaseSpec is the desired state.
type DatabaseSpec struct {
	// Replicas defaults to 3 (in the CRD).
	Replicas *int32 `json:"replicas,omitempty"`
	// Storage is each member's volume, a quantity such as "1Gi". It may
	// grow; a smaller value is refused.
	Storage string `json:"storage"`
	Image   string `json:"image"`
}

// DatabaseStatus is the observed state.
type DatabaseStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	ReadyReplicas      int32 `json:"readyReplicas,omitempty"`
	// Storage is the volume size the operator last applied.
	Storage    string             `json:"storage,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DatabaseList is a list of Databases.
type DatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Database `json:"items"`
}

// DeepCopyInto copies d into out.
func (d *Database) DeepCopyInto(out *Database) {
	*out = *d
	out.TypeMeta = d.TypeMeta
	d.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if d.Spec.Replicas != nil {
		out.Spec.Replicas = new(int32)
		*out.Spec.Replicas = *d.Spec.Replicas
	}
	d.Status.DeepCopyInto(&out.Status)
}

// DeepCopyInto copies s into out.
func (s *DatabaseStatus) DeepCopyInto(out *DatabaseStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

// DeepCopy returns a copy of d.
func (d *Database) DeepCopy() *Database {
	if d == nil {
		return nil
	}
	out := new(Database)
	d.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (d *Database) DeepCopyObject() runtime.Object { return d.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *DatabaseList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &DatabaseList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Database, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// Replicas is spec.replicas, 3 when unset.
func (d *Database) Replicas() int32 {
	if d.Spec.Replicas == nil {
		return 3
	}
	return *d.Spec.Replicas
}

// StorageSize is spec.storage parsed.
func (d *Database) StorageSize() (resource.Quantity, error) {
	q, err := resource.ParseQuantity(d.Spec.Storage)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("Database %s: spec.storage %q: %w", d.Name, d.Spec.Storage, err)
	}
	return q, nil
}
