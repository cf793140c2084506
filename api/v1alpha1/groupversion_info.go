// Package v1alpha1 holds the etcd.steward.dev/v1alpha1 API: EtcdCluster, the user's desired etcd cluster, and
// the kinds that act on one: its users (EtcdUser), backups (EtcdBackup, EtcdBackupSchedule) and restores
// (EtcdRestore). Types carry the controller-gen markers that generate the CRDs with their validation; behaviour
// lives in the controllers, not here.
// +kubebuilder:object:generate=true
// +groupName=etcd.steward.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "etcd.steward.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the API's types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
