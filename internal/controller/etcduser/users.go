package etcduser

import (
	"slices"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcdauth"
)

// authSpec is what an EtcdUser asks of etcd, as the plain values etcdauth decides on.
func authSpec(u *etcdv1alpha1.EtcdUser) etcdauth.Spec {
	spec := etcdauth.Spec{Name: etcdv1alpha1.EtcdUserName(u), Password: u.Spec.Password != nil, Roles: u.Spec.Roles}
	for _, p := range u.Spec.Permissions {
		spec.Permissions = append(spec.Permissions, etcdauth.KeyPermission{Prefix: p.Prefix, Key: p.Key, RangeEnd: p.RangeEnd, Access: string(p.Access)})
	}
	return spec
}

// roleCreatedBySteward reports whether the role named like u's etcd user is one Steward created for it:
// status.createdRole, or (recorded by releases before that field) the user's own role in status.roles when
// spec.roles does not name it.
func roleCreatedBySteward(u *etcdv1alpha1.EtcdUser) bool {
	name := etcdv1alpha1.EtcdUserName(u)
	return u.Status.CreatedRole || (slices.Contains(u.Status.Roles, name) && !slices.Contains(u.Spec.Roles, name))
}

// ownerOf is the EtcdUser, of users, that owns etcd user name on cluster: the oldest (by creation, then name) of
// those declaring it that are not being deleted; nil when none does. Decided from the objects alone, so every
// pass of every claimant agrees: the others report the conflict and change nothing in etcd, and when the owner
// goes, its etcd user stays for the next oldest.
func ownerOf(users []etcdv1alpha1.EtcdUser, cluster, name string) *etcdv1alpha1.EtcdUser {
	var owner *etcdv1alpha1.EtcdUser
	for i := range users {
		u := &users[i]
		if u.Spec.ClusterName != cluster || etcdv1alpha1.EtcdUserName(u) != name || !u.DeletionTimestamp.IsZero() {
			continue
		}
		if owner == nil || u.CreationTimestamp.Before(&owner.CreationTimestamp) ||
			(u.CreationTimestamp.Equal(&owner.CreationTimestamp) && u.Name < owner.Name) {
			owner = u
		}
	}
	return owner
}
