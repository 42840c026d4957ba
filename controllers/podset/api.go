package podset

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupVersion is the PodSet API's group and version.
var GroupVersion = schema.GroupVersion{Group: "apps.kubeprop.dev", Version: "v1"}

var schemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

// AddToScheme adds PodSet and PodSetList to a scheme.
var AddToScheme = schemeBuilder.AddToScheme

func init() { schemeBuilder.Register(&PodSet{}, &PodSetList{}) }

// PodSet runs Replicas copies of a pod template.
type PodSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodSetSpec   `json:"spec"`
	Status PodSetStatus `json:"status,omitempty"`
}

// PodSetSpec is the desired state.
type PodSetSpec struct {
	// Replicas defaults to 1 (in the CRD).
	Replicas *int32                 `json:"replicas,omitempty"`
	Template corev1.PodTemplateSpec `json:"template"`
}

// PodSetStatus is the observed state.
type PodSetStatus struct {
	Replicas           int32              `json:"replicas,omitempty"`
	ReadyReplicas      int32              `json:"readyReplicas,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	// LastReconcileTime is not written by the correct controller; the
	// field exists for a seeded bug.
	LastReconcileTime string `json:"lastReconcileTime,omitempty"`
}

// PodSetList is a list of PodSets.
type PodSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodSet `json:"items"`
}

// DeepCopyInto copies p into out.
func (p *PodSet) DeepCopyInto(out *PodSet) {
	*out = *p
	out.TypeMeta = p.TypeMeta
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if p.Spec.Replicas != nil {
		out.Spec.Replicas = new(int32)
		*out.Spec.Replicas = *p.Spec.Replicas
	}
	p.Spec.Template.DeepCopyInto(&out.Spec.Template)
	if p.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(p.Status.Conditions))
		for i := range p.Status.Conditions {
			p.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
}

// DeepCopy returns a copy of p.
func (p *PodSet) DeepCopy() *PodSet {
	if p == nil {
		return nil
	}
	out := new(PodSet)
	p.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (p *PodSet) DeepCopyObject() runtime.Object { return p.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *PodSetList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &PodSetList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]PodSet, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// Replicas is spec.replicas, 1 when unset.
func (p *PodSet) Replicas() int32 {
	if p.Spec.Replicas == nil {
		return 1
	}
	return *p.Spec.Replicas
}
