package etcdauth

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"
)

// store is an auth store the tests apply fence calls to, as etcd would.
type store struct {
	roles map[string][]Permission
	users map[string][]string
}

func (s *store) apply(t *testing.T, ops []FenceOp) {
	t.Helper()
	for _, op := range ops {
		switch op.Kind {
		case GrantPermission:
			perms := slices.DeleteFunc(slices.Clone(s.roles[op.Role]), func(p Permission) bool {
				return p.Key == op.Permission.Key && p.RangeEnd == op.Permission.RangeEnd
			})
			s.roles[op.Role] = normalize(append(perms, op.Permission))
		case RevokePermission:
			s.roles[op.Role] = normalize(slices.DeleteFunc(slices.Clone(s.roles[op.Role]), func(p Permission) bool {
				return p.Key == op.Permission.Key && p.RangeEnd == op.Permission.RangeEnd
			}))
		case RevokeRole:
			s.users[op.User] = slices.DeleteFunc(slices.Clone(s.users[op.User]), func(r string) bool { return r == op.Role })
		case GrantRole:
			s.users[op.User] = append(slices.Clone(s.users[op.User]), op.Role)
			slices.Sort(s.users[op.User])
		default:
			t.Fatalf("unexpected call %s", op)
		}
	}
}

func (s *store) observed() ([]Role, []UserRoles) {
	var roles []Role
	for name, perms := range s.roles {
		roles = append(roles, Role{Name: name, Permissions: perms})
	}
	var users []UserRoles
	for name, rs := range s.users {
		users = append(users, UserRoles{Name: name, Roles: rs})
	}
	return roles, users
}

func (s *store) clone() *store {
	c := &store{roles: map[string][]Permission{}, users: map[string][]string{}}
	for k, v := range s.roles {
		c.roles[k] = slices.Clone(v)
	}
	for k, v := range s.users {
		c.users[k] = slices.Clone(v)
	}
	return c
}

var exemptUsers = map[string]bool{RootUser: true, OperatorUser: true}

// TestFence: a primary's auth store as a standby's seed brings it: roles with readwrite, write-only and read
// ranges, a user holding root besides root itself. The fence leaves read only, records what it took, does nothing
// on a fenced store, keeps the first record across a second fence, and its undoing gives back exactly the store.
func TestFence(t *testing.T) {
	primary := &store{
		roles: map[string][]Permission{
			RootRole:    nil,
			"apiserver": {{Key: "/registry/", RangeEnd: "/registry0", Access: ReadWrite}},
			"reporter":  {{Key: "/metrics/", RangeEnd: "/metrics0", Access: Read}},
			"ingest":    {{Key: "/in/", RangeEnd: "/in0", Access: Write}, {Key: "/cfg", Access: Read}},
		},
		users: map[string][]string{RootUser: {RootRole}, OperatorUser: {RootRole}, "admin": {"apiserver", RootRole}, "kube": {"apiserver"}, "job": {"ingest"}},
	}
	s := primary.clone()
	roles, users := s.observed()
	ops, record := Fence(roles, users, exemptUsers, FenceRecord{})
	var calls []string
	for _, op := range ops {
		calls = append(calls, fmt.Sprintf("%s %s", op.User, op.Op))
	}
	want := []string{
		` GrantPermission apiserver read ["/registry/", "/registry0")`,
		` RevokePermission ingest write ["/in/", "/in0")`,
		`admin RevokeRole root`,
	}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("fence calls:\n%q\nwant\n%q", calls, want)
	}
	wantRecord := FenceRecord{Roles: map[string][]Permission{"apiserver": primary.roles["apiserver"], "ingest": normalize(primary.roles["ingest"])}, RootOf: []string{"admin"}}
	if !reflect.DeepEqual(record, wantRecord) {
		t.Fatalf("record %+v, want %+v", record, wantRecord)
	}
	s.apply(t, ops)
	for name, perms := range s.roles {
		for _, p := range perms {
			if p.Access != Read {
				t.Fatalf("role %s keeps %s", name, p)
			}
		}
	}
	if slices.Contains(s.users["admin"], RootRole) || !slices.Contains(s.users[OperatorUser], RootRole) {
		t.Fatalf("users after the fence: %v", s.users)
	}
	// Fenced already: nothing to do, and the record keeps the originals.
	roles, users = s.observed()
	again, record2 := Fence(roles, users, exemptUsers, record)
	if len(again) != 0 || !reflect.DeepEqual(record2, record) {
		t.Fatalf("second fence: %v, record %+v", again, record2)
	}
	// Promotion gives back exactly what the fence took.
	s.apply(t, Unfence(roles, users, record))
	if !reflect.DeepEqual(s.roles, normalizedRoles(primary.roles)) || !reflect.DeepEqual(s.users, primary.users) {
		t.Fatalf("after unfencing:\n%v %v\nwant\n%v %v", s.roles, s.users, primary.roles, primary.users)
	}
}

func normalizedRoles(roles map[string][]Permission) map[string][]Permission {
	out := map[string][]Permission{}
	for k, v := range roles {
		out[k] = normalize(v)
	}
	return out
}

// TestFenceProperty: for random stores, one fence leaves no write permission outside root and no root role
// outside the exempt users, a second plans nothing, and undoing it restores the store.
func TestFenceProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(45))
	keys := []string{"/a", "/b", "/c"}
	for i := range 500 {
		s := &store{roles: map[string][]Permission{RootRole: nil}, users: map[string][]string{RootUser: {RootRole}}}
		for r := range rng.Intn(4) {
			name := fmt.Sprintf("r%d", r)
			var perms []Permission
			for _, k := range keys {
				if rng.Intn(2) == 0 {
					perms = append(perms, Permission{Key: k, Access: Access(rng.Intn(3))})
				}
			}
			s.roles[name] = normalize(perms)
		}
		for u := range rng.Intn(4) {
			var rs []string
			for name := range s.roles {
				if rng.Intn(2) == 0 {
					rs = append(rs, name)
				}
			}
			slices.Sort(rs)
			s.users[fmt.Sprintf("u%d", u)] = rs
		}
		before := s.clone()
		roles, users := s.observed()
		ops, record := Fence(roles, users, exemptUsers, FenceRecord{})
		// A run cut short after the record and some of its calls: the next run, planned from the store and the
		// record, keeps the record as it was and makes the rest.
		cut := rng.Intn(len(ops) + 1)
		s.apply(t, ops[:cut])
		roles, users = s.observed()
		rest, again := Fence(roles, users, exemptUsers, record)
		if !reflect.DeepEqual(again, record) {
			t.Fatalf("case %d: re-run after %d of %d calls records %+v, want %+v", i, cut, len(ops), again, record)
		}
		s.apply(t, rest)
		for name, perms := range s.roles {
			for _, p := range perms {
				if name != RootRole && p.Access != Read {
					t.Fatalf("case %d: role %s keeps %s", i, name, p)
				}
			}
		}
		for name, rs := range s.users {
			if !exemptUsers[name] && slices.Contains(rs, RootRole) {
				t.Fatalf("case %d: user %s keeps root", i, name)
			}
		}
		roles, users = s.observed()
		if again, _ := Fence(roles, users, exemptUsers, record); len(again) != 0 {
			t.Fatalf("case %d: a fenced store gets %v", i, again)
		}
		s.apply(t, Unfence(roles, users, record))
		if !reflect.DeepEqual(normalizedRoles(s.roles), normalizedRoles(before.roles)) || !reflect.DeepEqual(s.users, before.users) {
			t.Fatalf("case %d: unfenced %v %v, want %v %v", i, s.roles, s.users, before.roles, before.users)
		}
	}
}

// TestFencedUser: an EtcdUser on a standby gets its read permissions only, its own role only while it has any,
// and never root; its other roles and its password stay.
func TestFencedUser(t *testing.T) {
	rw := Permission{Key: "/app/", RangeEnd: "/app0", Access: ReadWrite}
	w := Permission{Key: "/in/", RangeEnd: "/in0", Access: Write}
	r := Permission{Key: "/cfg", Access: Read}
	tests := map[string]struct {
		in, want User
	}{
		"readwrite and write-only": {User{Name: "app", Password: true, Permissions: []Permission{rw, w}, Roles: []string{"app", "audit"}},
			User{Name: "app", Password: true, Permissions: []Permission{{Key: "/app/", RangeEnd: "/app0", Access: Read}}, Roles: []string{"app", "audit"}}},
		"write-only: no own role": {User{Name: "ingest", Permissions: []Permission{w}, Roles: []string{"ingest"}},
			User{Name: "ingest"}},
		"read stays":     {User{Name: "ro", Permissions: []Permission{r}, Roles: []string{"ro"}}, User{Name: "ro", Permissions: []Permission{r}, Roles: []string{"ro"}}},
		"root withheld":  {User{Name: "admin", Roles: []string{"audit", RootRole}}, User{Name: "admin", Roles: []string{"audit"}}},
		"no permissions": {User{Name: "x"}, User{Name: "x"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := FencedUser(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("FencedUser(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}
