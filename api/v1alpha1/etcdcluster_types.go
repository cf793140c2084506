package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdClusterSpec is the desired state of an etcd cluster.
type EtcdClusterSpec struct {
	// Replicas is the number of voting members. Odd, so that every member counts toward quorum.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +kubebuilder:validation:XValidation:rule="self % 2 == 1",message="replicas must be odd (1, 3, 5, 7 or 9): an even member count tolerates no more failures than the odd count below it"
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Version is the etcd version the members run, for example "3.6.16".
	// +kubebuilder:validation:Pattern=`^3\.[0-9]+\.[0-9]+$`
	// +required
	Version string `json:"version"`

	// Paused stops Steward from changing the cluster; it still observes and reports status.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// EtcdClusterStatus is the observed state of an etcd cluster.
type EtcdClusterStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Available, Progressing and Degraded (see conditions.go).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ReadyReplicas is the number of healthy voting members.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// CurrentVersion is the etcd cluster version the members agree on.
	// +optional
	CurrentVersion string `json:"currentVersion,omitempty"`

	// Leader is the name of the member that leads the cluster.
	// +optional
	Leader string `json:"leader,omitempty"`

	// ClusterID is etcd's cluster ID, in hex.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
}

// EtcdCluster is an etcd cluster managed by Steward.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcd,categories=steward
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.currentVersion`
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EtcdClusterSpec `json:"spec"`
	// +optional
	Status EtcdClusterStatus `json:"status,omitempty"`
}

// EtcdClusterList is a list of EtcdClusters.
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdCluster{}, &EtcdClusterList{})
}
