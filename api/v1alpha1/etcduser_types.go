package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdUserSpec is one application's identity on one cluster: the etcd user it authenticates as, how it
// authenticates (a client certificate issued from the cluster's CA, a generated password, or both, each in a
// Secret the application mounts), and what it may do (key prefixes or ranges, and named etcd roles).
// +kubebuilder:validation:XValidation:rule="has(self.certificate) || has(self.password)",message="set certificate, password or both: an EtcdUser without credentials cannot connect"
// +kubebuilder:validation:XValidation:rule="(has(self.permissions) && size(self.permissions) > 0) || (has(self.roles) && size(self.roles) > 0)",message="set permissions or roles: a user whose role grants nothing can do nothing"
// +kubebuilder:validation:XValidation:rule="!has(self.certificate) || !has(self.password) || self.certificate.secretName != self.password.secretName",message="certificate.secretName and password.secretName must differ"
type EtcdUserSpec struct {
	// ClusterName is the EtcdCluster in the EtcdUser's namespace the user belongs to. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterName is immutable: create a new EtcdUser instead"
	// +required
	ClusterName string `json:"clusterName"`

	// UserName is the user's name in etcd and the common name of its client certificate; it defaults to the
	// EtcdUser's name. "root" and names starting with "steward:" are Steward's own. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="userName is immutable: create a new EtcdUser instead"
	// +kubebuilder:validation:XValidation:rule="self != 'root' && !self.startsWith('steward:')",message="root and names starting with steward: are reserved for Steward"
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._:@/-]*$`
	// +optional
	UserName string `json:"userName,omitempty"`

	// Permissions are the key prefixes and ranges the user may read, write or both. Steward keeps them in an
	// etcd role of the same name as the user, which it owns: changes made to that role in etcd are undone.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Permissions []KeyPermission `json:"permissions,omitempty"`

	// Roles are etcd roles, managed outside Steward, that the user is granted as well, for example "root" for
	// an administrator. A role that does not exist in etcd is reported, not created.
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +optional
	Roles []string `json:"roles,omitempty"`

	// Certificate asks for a client certificate with the user's name as common name, issued from the cluster's
	// CA (TLS provider Steward) or by a cert-manager Certificate from the cluster's issuer (provider CertManager)
	// into a Secret of type kubernetes.io/tls (tls.crt, tls.key, ca.crt), renewed in place before it expires.
	// Not for provider Secrets (Steward has nothing to sign with) or None.
	// +optional
	Certificate *UserCertificate `json:"certificate,omitempty"`

	// Password asks for a generated password, kept in a Secret (keys username and password) and set on the
	// etcd user. Works on every cluster, including those without TLS.
	// +optional
	Password *UserPassword `json:"password,omitempty"`
}

// KeyPermission is one key prefix or key range and what the user may do with it.
// +kubebuilder:validation:XValidation:rule="has(self.prefix) != has(self.key)",message="set exactly one of prefix or key"
// +kubebuilder:validation:XValidation:rule="!has(self.rangeEnd) || has(self.key)",message="rangeEnd goes with key, not with prefix"
// +kubebuilder:validation:XValidation:rule="!has(self.rangeEnd) || self.rangeEnd > self.key",message="rangeEnd must sort after key: the range is [key, rangeEnd)"
type KeyPermission struct {
	// Prefix grants every key that starts with it, for example "/registry/tenant-a/".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Prefix *string `json:"prefix,omitempty"`
	// Key grants this one key, or with RangeEnd the keys in [key, rangeEnd).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Key *string `json:"key,omitempty"`
	// RangeEnd ends the range that starts at Key (exclusive).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	RangeEnd *string `json:"rangeEnd,omitempty"`
	// Access is Read, Write or ReadWrite.
	// +kubebuilder:validation:Enum=Read;Write;ReadWrite
	// +required
	Access KeyAccess `json:"access"`
}

// KeyAccess is what a permission allows.
type KeyAccess string

// Key access levels, etcd's READ, WRITE and READWRITE.
const (
	AccessRead      KeyAccess = "Read"
	AccessWrite     KeyAccess = "Write"
	AccessReadWrite KeyAccess = "ReadWrite"
)

// UserCertificate is where the user's client certificate goes.
type UserCertificate struct {
	// SecretName is the Secret in the EtcdUser's namespace Steward writes the certificate to. A Secret of that
	// name that Steward did not create is never overwritten: the EtcdUser is reported instead.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	SecretName string `json:"secretName"`
}

// UserPassword is where the user's password goes.
type UserPassword struct {
	// SecretName is the Secret in the EtcdUser's namespace Steward writes the user name and password to. A
	// Secret of that name that Steward did not create is never overwritten: the EtcdUser is reported instead.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	SecretName string `json:"secretName"`
}

// EtcdUserStatus is what Steward applied.
type EtcdUserStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (the user, its role and its credentials are in place; its reason says what is missing).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// UserName is the user's name in etcd.
	// +optional
	UserName string `json:"userName,omitempty"`
	// Roles are the etcd roles the user holds: its own (named like the user) and those of spec.roles.
	// +optional
	Roles []string `json:"roles,omitempty"`
	// CreatedRole records that Steward created the role named like the user (for spec.permissions): only such
	// a role is changed or deleted; one of that name made by hand is left alone. The controller's memory:
	// etcd's roles carry no mark of who made them. Set before the role is created, so that a crash between the
	// two leaves a record of a role to create, never a role taken for hand-made.
	// +optional
	CreatedRole bool `json:"createdRole,omitempty"`
	// CertificateSecretName is the Secret holding the user's client certificate, key and the cluster's CA.
	// +optional
	CertificateSecretName string `json:"certificateSecretName,omitempty"`
	// PasswordSecretName is the Secret holding the user's name and password.
	// +optional
	PasswordSecretName string `json:"passwordSecretName,omitempty"`
	// CertificateNotAfter is when the user's certificate expires; Steward renews it at two thirds of its life.
	// +optional
	CertificateNotAfter *metav1.Time `json:"certificateNotAfter,omitempty"`
	// AuthEnabled says whether the cluster enforces authentication (spec.auth.enabled of the EtcdCluster):
	// until it does, every client may do anything and the permissions above are only prepared.
	// +optional
	AuthEnabled bool `json:"authEnabled,omitempty"`
}

// EtcdUser is an application's identity on an EtcdCluster: an etcd user with key-prefix permissions, and its
// credentials in Secrets.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcduser,categories=steward
// +kubebuilder:validation:XValidation:rule="has(self.spec.userName) || self.metadata.name != 'root'",message="the user name defaults to the EtcdUser's name, and root is reserved for Steward: set spec.userName or choose another name"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="User",type=string,JSONPath=`.status.userName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Auth",type=boolean,JSONPath=`.status.authEnabled`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: Steward labels the objects it makes for the EtcdUser with its name (a label value)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdUser struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EtcdUserSpec `json:"spec"`
	// +optional
	Status EtcdUserStatus `json:"status,omitempty"`
}

// EtcdUserList is a list of EtcdUsers.
// +kubebuilder:object:root=true
type EtcdUserList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdUser `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdUser{}, &EtcdUserList{})
}

// EtcdUserName is the etcd user of an EtcdUser: spec.userName, or the object's name.
func EtcdUserName(u *EtcdUser) string {
	if u.Spec.UserName != "" {
		return u.Spec.UserName
	}
	return u.Name
}
