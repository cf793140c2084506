package etcdauth

import (
	"slices"
	"sort"
)

// The fence of a standby cluster. A standby's auth store comes from its primary's snapshot: the primary's users
// (with their passwords) and roles (with their write permissions), which must survive promotion, since the
// primary's clients reconnect with them. While it is a standby, nobody but root and Steward's own identity may
// write: every other role keeps only its read permissions, and no other user holds the root role. What the fence
// takes away it records first, so that promotion gives back exactly that. etcd enforces the result on every
// request.

// Role is a role as etcd holds it.
type Role struct {
	Name        string
	Permissions []Permission
}

// UserRoles is a user and the roles etcd grants it.
type UserRoles struct {
	Name  string
	Roles []string
}

// FenceRecord is what a fence took away: each role's permissions before it (the first time the fence changed
// the role), and the users it revoked the root role from. It is the controller's memory, kept outside etcd
// before any change is made.
type FenceRecord struct {
	Roles  map[string][]Permission `json:"roles,omitempty"`
	RootOf []string                `json:"rootOf,omitempty"`
}

// FenceOp is one auth call of a fence or its undoing: Op on Op.Role, or for GrantRole and RevokeRole, on User.
type FenceOp struct {
	User string
	Op
}

// ReadOnly is perms with write taken away: readwrite becomes read, write-only ranges go.
func ReadOnly(perms []Permission) []Permission {
	var out []Permission
	for _, p := range perms {
		switch p.Access {
		case Read:
			out = append(out, p)
		case ReadWrite:
			p.Access = Read
			out = append(out, p)
		}
	}
	return normalize(out)
}

// Fence plans the calls that leave no write permission in any role but root and no root role with any user
// but those exempt (root and Steward's identity), and returns the record to keep before making them: the given
// record with what these calls take away added (a role already recorded keeps its first, original, permissions).
// Called again on a fenced store it plans nothing.
func Fence(roles []Role, users []UserRoles, exempt map[string]bool, record FenceRecord) ([]FenceOp, FenceRecord) {
	next := FenceRecord{Roles: map[string][]Permission{}, RootOf: slices.Clone(record.RootOf)}
	for name, perms := range record.Roles {
		next.Roles[name] = perms
	}
	var ops []FenceOp
	for _, r := range sortedRoles(roles) {
		if r.Name == RootRole {
			continue
		}
		have := normalize(r.Permissions)
		want := ReadOnly(have)
		if slices.Equal(have, want) {
			continue
		}
		if _, ok := next.Roles[r.Name]; !ok {
			next.Roles[r.Name] = have
		}
		ops = append(ops, permissionChanges(r.Name, have, want)...)
	}
	for _, u := range sortedUsers(users) {
		if exempt[u.Name] || !slices.Contains(u.Roles, RootRole) {
			continue
		}
		if !slices.Contains(next.RootOf, u.Name) {
			next.RootOf = append(next.RootOf, u.Name)
		}
		ops = append(ops, FenceOp{User: u.Name, Op: Op{Kind: RevokeRole, Role: RootRole}})
	}
	sort.Strings(next.RootOf)
	if len(next.Roles) == 0 {
		next.Roles = nil
	}
	return ops, next
}

// Unfence plans the calls that give back what record says the fence took: each recorded role's permissions
// (of roles that still exist) and the root role to each recorded user that still exists.
func Unfence(roles []Role, users []UserRoles, record FenceRecord) []FenceOp {
	var ops []FenceOp
	for _, r := range sortedRoles(roles) {
		want, ok := record.Roles[r.Name]
		if !ok {
			continue
		}
		ops = append(ops, permissionChanges(r.Name, normalize(r.Permissions), normalize(want))...)
	}
	for _, u := range sortedUsers(users) {
		if slices.Contains(record.RootOf, u.Name) && !slices.Contains(u.Roles, RootRole) {
			ops = append(ops, FenceOp{User: u.Name, Op: Op{Kind: GrantRole, Role: RootRole}})
		}
	}
	return ops
}

// permissionChanges turns role's permissions from have into want (both normalized): grants first (etcd replaces
// the access of an identical range), then revocations of ranges want does not hold.
func permissionChanges(role string, have, want []Permission) []FenceOp {
	var ops []FenceOp
	for _, p := range want {
		if !slices.Contains(have, p) {
			ops = append(ops, FenceOp{Op: Op{Kind: GrantPermission, Role: role, Permission: p}})
		}
	}
	for _, p := range have {
		if !slices.ContainsFunc(want, func(w Permission) bool { return w.Key == p.Key && w.RangeEnd == p.RangeEnd }) {
			ops = append(ops, FenceOp{Op: Op{Kind: RevokePermission, Role: role, Permission: p}})
		}
	}
	return ops
}

func sortedRoles(roles []Role) []Role {
	out := slices.Clone(roles)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func sortedUsers(users []UserRoles) []UserRoles {
	out := slices.Clone(users)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// FencedUser is what etcd holds for an EtcdUser while its cluster is a standby: its own role with the read
// permissions of its spec only (the role not granted when none is left), and not the root role, which the fence
// would revoke again. After promotion the user gets what it declares.
func FencedUser(u User) User {
	fenced := User{Name: u.Name, Password: u.Password, Permissions: ReadOnly(u.Permissions)}
	for _, r := range u.Roles {
		if r == RootRole || (r == u.Name && len(fenced.Permissions) == 0) {
			continue
		}
		fenced.Roles = append(fenced.Roles, r)
	}
	return fenced
}
