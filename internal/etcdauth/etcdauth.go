// Package etcdauth maps an EtcdUser's spec, as plain values (Spec, which the controller fills in), to what etcd's
// auth store must hold (a user, a role named like it with key permissions, and the named roles granted to it) and
// computes the changes that bring etcd's state there. It is pure: the controller reads etcd's users and roles,
// calls Changes, and applies the result one call at a time, so that every decision is table-tested without a
// cluster. It imports no API types, so neither does internal/etcd, which makes the calls in its vocabulary.
package etcdauth

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// RootRole and RootUser are etcd's built-in administrator role and the user etcd requires before it enables
// authentication.
const (
	RootRole = "root"
	RootUser = "root"
	// OperatorUser is the password user Steward acts as on clusters whose members do not verify client
	// certificates (tls.provider None): it holds the root role. Its password is in the cluster's operator
	// credentials Secret. root itself keeps no password, so nobody logs in as root.
	OperatorUser = "steward:operator"
)

// Access is etcd's permission type: READ, WRITE or READWRITE (authpb.Permission_Type's values).
type Access int32

// etcd's permission types, in the order of authpb.Permission_Type.
const (
	Read Access = iota
	Write
	ReadWrite
)

func (a Access) String() string {
	switch a {
	case Read:
		return "read"
	case Write:
		return "write"
	default:
		return "readwrite"
	}
}

// Permission is one key range of a role: [Key, RangeEnd), or the single Key when RangeEnd is empty.
type Permission struct {
	Key      string
	RangeEnd string
	Access   Access
}

func (p Permission) String() string {
	if p.RangeEnd == "" {
		return fmt.Sprintf("%s %q", p.Access, p.Key)
	}
	return fmt.Sprintf("%s [%q, %q)", p.Access, p.Key, p.RangeEnd)
}

// User is what etcd must hold for one EtcdUser.
type User struct {
	// Name is the etcd user, which is also the etcd role holding its permissions.
	Name string
	// Permissions of the user's own role, sorted and without duplicates.
	Permissions []Permission
	// Roles granted to the user: its own role when it has permissions, and the named ones; sorted.
	Roles []string
	// Password is set for users that log in with a password; certificate-only users have none in etcd.
	Password bool
}

// Spec is what an EtcdUser asks of etcd, as plain values.
type Spec struct {
	// Name is the etcd user: spec.userName, or the object's name.
	Name string
	// Password: the user logs in with a password (spec.password is set).
	Password    bool
	Permissions []KeyPermission
	// Roles are spec.roles: roles, made by hand, granted to the user.
	Roles []string
}

// KeyPermission is one of spec.permissions: exactly one of Prefix or Key (RangeEnd only with Key), and Access,
// the API's KeyAccess (Read, Write or ReadWrite).
type KeyPermission struct {
	Prefix, Key, RangeEnd *string
	Access                string
}

// Desired maps an EtcdUser's spec to what etcd must hold for it. It refuses permissions etcd would misread: a
// range whose end does not sort after its key, or a prefix whose range cannot be expressed.
func Desired(u Spec) (User, error) {
	name := u.Name
	if name == RootUser || strings.HasPrefix(name, "steward:") {
		return User{}, fmt.Errorf("user name %q is reserved for Steward", name)
	}
	user := User{Name: name, Password: u.Password}
	for i, p := range u.Permissions {
		perm, err := permission(p)
		if err != nil {
			return User{}, fmt.Errorf("permissions[%d]: %w", i, err)
		}
		user.Permissions = append(user.Permissions, perm)
	}
	user.Permissions = normalize(user.Permissions)
	roles := map[string]bool{}
	if len(user.Permissions) > 0 {
		roles[name] = true
	}
	for _, r := range u.Roles {
		roles[r] = true
	}
	for r := range roles {
		user.Roles = append(user.Roles, r)
	}
	sort.Strings(user.Roles)
	return user, nil
}

// permission maps one KeyPermission to etcd's range form.
func permission(p KeyPermission) (Permission, error) {
	access, err := accessOf(p.Access)
	if err != nil {
		return Permission{}, err
	}
	switch {
	case p.Prefix != nil && p.Key == nil && p.RangeEnd == nil:
		end, err := PrefixEnd(*p.Prefix)
		if err != nil {
			return Permission{}, err
		}
		return Permission{Key: *p.Prefix, RangeEnd: end, Access: access}, nil
	case p.Key != nil && p.Prefix == nil:
		if *p.Key == "" {
			return Permission{}, fmt.Errorf("key is empty")
		}
		perm := Permission{Key: *p.Key, Access: access}
		if p.RangeEnd != nil {
			if *p.RangeEnd <= *p.Key {
				return Permission{}, fmt.Errorf("rangeEnd %q does not sort after key %q", *p.RangeEnd, *p.Key)
			}
			perm.RangeEnd = *p.RangeEnd
		}
		return perm, nil
	default:
		return Permission{}, fmt.Errorf("set exactly one of prefix or key (rangeEnd only with key)")
	}
}

// accessOf maps the API's KeyAccess values (etcdv1alpha1.AccessRead, AccessWrite, AccessReadWrite; the
// etcduser controller's test holds the two lists together) to etcd's permission types.
func accessOf(a string) (Access, error) {
	switch a {
	case "Read":
		return Read, nil
	case "Write":
		return Write, nil
	case "ReadWrite":
		return ReadWrite, nil
	}
	return 0, fmt.Errorf("access %q is not Read, Write or ReadWrite", a)
}

// PrefixEnd is the end of the range holding exactly the keys that start with prefix: the prefix with its last
// byte below 0xff incremented and what follows dropped. A prefix of only 0xff bytes has no such end; etcd's
// "\x00" (to the end of the keyspace) would grant more than asked, so it is refused.
func PrefixEnd(prefix string) (string, error) {
	if prefix == "" {
		return "", fmt.Errorf("prefix is empty")
	}
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return string(end[:i+1]), nil
		}
	}
	return "", fmt.Errorf("prefix %q has no range end (all bytes 0xff)", prefix)
}

// normalize sorts permissions and merges those of one range (read and write make readwrite), so that a spec
// and etcd's role compare equal however either lists them: etcd keeps one access per range. Overlapping ranges
// are kept as they are: etcd merges them itself when it checks a request.
func normalize(perms []Permission) []Permission {
	byRange := map[[2]string]Access{}
	for _, p := range perms {
		r := [2]string{p.Key, p.RangeEnd}
		if have, ok := byRange[r]; ok && have != p.Access {
			byRange[r] = ReadWrite
			continue
		}
		byRange[r] = p.Access
	}
	if len(byRange) == 0 {
		return nil
	}
	out := make([]Permission, 0, len(byRange))
	for r, a := range byRange {
		out = append(out, Permission{Key: r[0], RangeEnd: r[1], Access: a})
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out
}

func less(a, b Permission) bool {
	if c := bytes.Compare([]byte(a.Key), []byte(b.Key)); c != 0 {
		return c < 0
	}
	if c := bytes.Compare([]byte(a.RangeEnd), []byte(b.RangeEnd)); c != 0 {
		return c < 0
	}
	return a.Access < b.Access
}

// Observed is what etcd holds for one user: whether the user exists, its roles, and the permissions of the
// role named like it (nil when that role does not exist).
type Observed struct {
	UserExists bool
	// Password: the user was created with a password (etcd does not say; the controller knows from status
	// whether it set one). etcd cannot add a password to a user created without one, nor take one away.
	Password   bool
	Roles      []string
	RoleExists bool
	// RoleCreated: Steward created the role named like the user (an EtcdUser's status records it, see the
	// etcduser controller's roleCreatedBySteward). Only such a role is changed or deleted: one of that name made by hand is somebody
	// else's, whatever users hold it.
	RoleCreated bool
	Permissions []Permission
}

// RoleConflict reports whether want needs its own role and etcd holds a role of that name Steward did not
// create: Steward leaves it alone and reports the user instead.
func RoleConflict(want User, observed Observed) bool {
	return len(want.Permissions) > 0 && observed.RoleExists && !observed.RoleCreated
}

// Op is one auth call the controller makes, in order.
type Op struct {
	Kind       OpKind
	Role       string
	Permission Permission
}

// OpKind names one etcd auth call.
type OpKind string

// The calls Changes emits, in the order it emits them.
const (
	// DeleteUser goes first when the user must be created again: to add or drop its password (etcd keeps a
	// user's password option for its life). Its roles are granted again after.
	DeleteUser      OpKind = "DeleteUser"
	AddUser         OpKind = "AddUser"
	SetPassword     OpKind = "SetPassword"
	AddRole         OpKind = "AddRole"
	GrantPermission OpKind = "GrantPermission"
	// RevokePermission goes after the grants: a permission narrowed from readwrite to read is granted as read
	// (etcd replaces the type of an identical range) before anything is revoked, so the user never loses a range it
	// keeps.
	RevokePermission OpKind = "RevokePermission"
	GrantRole        OpKind = "GrantRole"
	RevokeRole       OpKind = "RevokeRole"
	DeleteRole       OpKind = "DeleteRole"
)

func (o Op) String() string {
	switch o.Kind {
	case GrantPermission, RevokePermission:
		return fmt.Sprintf("%s %s %s", o.Kind, o.Role, o.Permission)
	case AddRole, GrantRole, RevokeRole, DeleteRole:
		return fmt.Sprintf("%s %s", o.Kind, o.Role)
	}
	return string(o.Kind)
}

// Changes lists the calls that turn observed into want, grants before revocations. passwordStale says the
// password in etcd must be (re)set: the user is new, or its Secret's password changed since it was last set.
// Roles named in want.Roles that etcd lacks are not created here; missing lists them for the caller to report.
func Changes(want User, observed Observed, existingRoles map[string]bool, passwordStale bool) (ops []Op, missing []string) {
	if observed.UserExists && observed.Password != want.Password {
		ops = append(ops, Op{Kind: DeleteUser})
		observed.UserExists, observed.Roles = false, nil
	}
	if !observed.UserExists {
		// With a password, AddUser sets it: SetPassword is only for a user that stays.
		ops = append(ops, Op{Kind: AddUser})
	} else if want.Password && passwordStale {
		ops = append(ops, Op{Kind: SetPassword})
	}
	own := want.Name
	if len(want.Permissions) > 0 {
		if !observed.RoleExists {
			ops = append(ops, Op{Kind: AddRole, Role: own})
		}
		have := map[Permission]bool{}
		for _, p := range normalize(append([]Permission(nil), observed.Permissions...)) {
			have[p] = true
		}
		wanted := map[Permission]bool{}
		for _, p := range want.Permissions {
			wanted[p] = true
			if !have[p] {
				ops = append(ops, Op{Kind: GrantPermission, Role: own, Permission: p})
			}
		}
		// etcd keys a role's permissions by range: granting a range it holds with another access replaces that
		// access, so a range that is still wanted must not be revoked afterwards.
		wantedRange := map[[2]string]bool{}
		for p := range wanted {
			wantedRange[[2]string{p.Key, p.RangeEnd}] = true
		}
		for _, p := range normalize(append([]Permission(nil), observed.Permissions...)) {
			if !wanted[p] && !wantedRange[[2]string{p.Key, p.RangeEnd}] {
				ops = append(ops, Op{Kind: RevokePermission, Role: own, Permission: p})
			}
		}
	}
	holding := map[string]bool{}
	for _, r := range observed.Roles {
		holding[r] = true
	}
	wantRoles := map[string]bool{}
	for _, r := range want.Roles {
		wantRoles[r] = true
		if holding[r] {
			continue
		}
		if r != own && !existingRoles[r] {
			missing = append(missing, r)
			continue
		}
		ops = append(ops, Op{Kind: GrantRole, Role: r})
	}
	for _, r := range sortedKeys(holding) {
		if !wantRoles[r] {
			ops = append(ops, Op{Kind: RevokeRole, Role: r})
		}
	}
	if len(want.Permissions) == 0 && observed.RoleExists && observed.RoleCreated {
		ops = append(ops, Op{Kind: DeleteRole, Role: own})
	}
	return ops, missing
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Undeclared returns the users of etcd that no EtcdUser declares and that are not protected (root, and the
// identities Steward acts as: its certificate's and OperatorUser), sorted.
func Undeclared(users []string, declared, protected map[string]bool) []string {
	var out []string
	for _, u := range users {
		if !declared[u] && !protected[u] && u != RootUser && u != OperatorUser {
			out = append(out, u)
		}
	}
	sort.Strings(out)
	return out
}
