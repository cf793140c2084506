package etcdauth

import (
	"reflect"
	"strings"
	"testing"
)

func ptr(s string) *string { return &s }

func TestDesired(t *testing.T) {
	tests := []struct {
		name    string
		user    Spec
		want    User
		wantErr string
	}{
		{
			name: "a prefix becomes the range that holds exactly its keys, in a role named like the user",
			user: Spec{Name: "app-a", Permissions: []KeyPermission{{Prefix: ptr("/app-a/"), Access: "ReadWrite"}}},
			want: User{Name: "app-a", Permissions: []Permission{{Key: "/app-a/", RangeEnd: "/app-a0", Access: ReadWrite}}, Roles: []string{"app-a"}},
		},
		{
			name: "a password user; named roles join its own, sorted",
			user: Spec{Name: "kube-apiserver-tenant-a",
				Permissions: []KeyPermission{{Key: ptr("/a"), RangeEnd: ptr("/b"), Access: "Read"}},
				Roles:       []string{"zeta", "alpha"}, Password: true},
			want: User{Name: "kube-apiserver-tenant-a", Password: true,
				Permissions: []Permission{{Key: "/a", RangeEnd: "/b", Access: Read}},
				Roles:       []string{"alpha", "kube-apiserver-tenant-a", "zeta"}},
		},
		{
			name: "roles only: no own role",
			user: Spec{Name: "admin", Roles: []string{"root"}},
			want: User{Name: "admin", Roles: []string{"root"}},
		},
		{
			name: "read and write of one range merge into readwrite; duplicates go; a single key has no range end",
			user: Spec{Name: "u", Permissions: []KeyPermission{
				{Prefix: ptr("/p/"), Access: "Write"},
				{Key: ptr("/one"), Access: "Read"},
				{Prefix: ptr("/p/"), Access: "Read"},
				{Key: ptr("/one"), Access: "Read"},
			}, Password: true},
			want: User{Name: "u", Password: true, Roles: []string{"u"}, Permissions: []Permission{
				{Key: "/one", Access: Read}, {Key: "/p/", RangeEnd: "/p0", Access: ReadWrite}}},
		},
		{
			name: "a prefix ending in 0xff bytes carries into the byte before",
			user: Spec{Name: "u", Permissions: []KeyPermission{
				{Prefix: ptr("a\xff\xff"), Access: "Read"}}, Password: true},
			want: User{Name: "u", Password: true, Roles: []string{"u"}, Permissions: []Permission{{Key: "a\xff\xff", RangeEnd: "b", Access: Read}}},
		},
		{
			name: "a range whose end does not sort after its key is refused",
			user: Spec{Name: "u", Permissions: []KeyPermission{
				{Key: ptr("/b"), RangeEnd: ptr("/a"), Access: "Read"}}},
			wantErr: "permissions[0]: rangeEnd",
		},
		{
			name: "a prefix of only 0xff bytes has no range end and is refused rather than widened",
			user: Spec{Name: "u", Permissions: []KeyPermission{
				{Prefix: ptr("\xff"), Access: "Read"}}},
			wantErr: "no range end",
		},
		{
			name: "prefix and key together are refused",
			user: Spec{Name: "u", Permissions: []KeyPermission{
				{Prefix: ptr("/a"), Key: ptr("/a"), Access: "Read"}}},
			wantErr: "exactly one of prefix or key",
		},
		{
			name:    "root is Steward's",
			user:    Spec{Name: "root", Roles: []string{"r"}},
			wantErr: "reserved for Steward",
		},
		{
			name: "an unknown access is refused",
			user: Spec{Name: "u", Permissions: []KeyPermission{
				{Prefix: ptr("/a"), Access: "Admin"}}},
			wantErr: `access "Admin"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Desired(tt.user)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Desired() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Desired(): %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Desired() = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestChanges(t *testing.T) {
	appA := User{Name: "app-a", Roles: []string{"app-a"}, Permissions: []Permission{{Key: "/a/", RangeEnd: "/a0", Access: ReadWrite}}}
	tests := []struct {
		name          string
		want          User
		observed      Observed
		existing      map[string]bool
		passwordStale bool
		wantOps       []string
		wantMissing   []string
	}{
		{
			name:    "a new certificate user: user, role, permission, grant",
			want:    appA,
			wantOps: []string{"AddUser", "AddRole app-a", `GrantPermission app-a readwrite ["/a/", "/a0")`, "GrantRole app-a"},
		},
		{
			name:     "in place: nothing to do",
			want:     appA,
			observed: Observed{UserExists: true, Roles: []string{"app-a"}, RoleExists: true, Permissions: appA.Permissions},
		},
		{
			name: "drift in etcd is undone: a permission added by hand is revoked, a revoked one granted again",
			want: appA,
			observed: Observed{UserExists: true, Roles: []string{"app-a"}, RoleExists: true,
				Permissions: []Permission{{Key: "/other/", RangeEnd: "/other0", Access: Read}}},
			wantOps: []string{`GrantPermission app-a readwrite ["/a/", "/a0")`, `RevokePermission app-a read ["/other/", "/other0")`},
		},
		{
			name: "narrowed access is granted over the old one and not revoked after (etcd keeps one access per range)",
			want: User{Name: "app-a", Roles: []string{"app-a"}, Permissions: []Permission{{Key: "/a/", RangeEnd: "/a0", Access: Read}}},
			observed: Observed{UserExists: true, Roles: []string{"app-a"}, RoleExists: true,
				Permissions: []Permission{{Key: "/a/", RangeEnd: "/a0", Access: ReadWrite}}},
			wantOps: []string{`GrantPermission app-a read ["/a/", "/a0")`},
		},
		{
			name:        "a named role that etcd lacks is reported, not created; one that exists is granted; a role granted by hand is revoked",
			want:        User{Name: "ops", Roles: []string{"missing", "root"}},
			observed:    Observed{UserExists: true, Roles: []string{"extra"}},
			existing:    map[string]bool{"root": true, "extra": true},
			wantOps:     []string{"GrantRole root", "RevokeRole extra"},
			wantMissing: []string{"missing"},
		},
		{
			name:     "permissions dropped for roles only: the own role is revoked and deleted",
			want:     User{Name: "app-a", Roles: []string{"root"}},
			observed: Observed{UserExists: true, Roles: []string{"app-a"}, RoleExists: true, RoleCreated: true, Permissions: appA.Permissions},
			existing: map[string]bool{"root": true, "app-a": true},
			wantOps:  []string{"GrantRole root", "RevokeRole app-a", "DeleteRole app-a"},
		},
		{
			name:     "a role named like the user that Steward did not create is granted, never deleted",
			want:     User{Name: "app-a", Roles: []string{"app-a"}},
			observed: Observed{RoleExists: true, Permissions: appA.Permissions},
			existing: map[string]bool{"app-a": true},
			wantOps:  []string{"AddUser", "GrantRole app-a"},
		},
		{
			name:     "a password user: created with its password",
			want:     User{Name: "pw", Password: true, Roles: []string{"root"}},
			existing: map[string]bool{"root": true},
			wantOps:  []string{"AddUser", "GrantRole root"},
		},
		{
			name:          "a password user whose Secret changed: the password is set again",
			want:          User{Name: "pw", Password: true, Roles: []string{"root"}},
			observed:      Observed{UserExists: true, Password: true, Roles: []string{"root"}},
			existing:      map[string]bool{"root": true},
			passwordStale: true,
			wantOps:       []string{"SetPassword"},
		},
		{
			name:     "a certificate user that gets a password is created again (etcd cannot add one), its roles granted again",
			want:     User{Name: "app-a", Password: true, Roles: []string{"app-a"}, Permissions: appA.Permissions},
			observed: Observed{UserExists: true, Roles: []string{"app-a"}, RoleExists: true, Permissions: appA.Permissions},
			wantOps:  []string{"DeleteUser", "AddUser", "GrantRole app-a"},
		},
		{
			name:     "a password user that drops its password is created again without one",
			want:     appA,
			observed: Observed{UserExists: true, Password: true, Roles: []string{"app-a"}, RoleExists: true, Permissions: appA.Permissions},
			wantOps:  []string{"DeleteUser", "AddUser", "GrantRole app-a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, missing := Changes(tt.want, tt.observed, tt.existing, tt.passwordStale)
			var got []string
			for _, op := range ops {
				got = append(got, op.String())
			}
			if !reflect.DeepEqual(got, tt.wantOps) {
				t.Errorf("Changes() ops =\n  %q\nwant\n  %q", got, tt.wantOps)
			}
			if !reflect.DeepEqual(missing, tt.wantMissing) {
				t.Errorf("Changes() missing = %q, want %q", missing, tt.wantMissing)
			}
		})
	}
}

// applyOps plays ops onto observed the way etcd's auth store does, for the convergence check below.
func applyOps(o Observed, want User, ops []Op) Observed {
	name := want.Name
	for _, op := range ops {
		switch op.Kind {
		case DeleteUser:
			o.UserExists, o.Roles = false, nil
		case AddUser:
			o.UserExists, o.Password = true, want.Password
		case AddRole:
			o.RoleExists = true
		case GrantPermission:
			replaced := false
			for i, p := range o.Permissions {
				if p.Key == op.Permission.Key && p.RangeEnd == op.Permission.RangeEnd {
					o.Permissions[i].Access, replaced = op.Permission.Access, true
				}
			}
			if !replaced {
				o.Permissions = append(o.Permissions, op.Permission)
			}
		case RevokePermission:
			var kept []Permission
			for _, p := range o.Permissions {
				if p.Key != op.Permission.Key || p.RangeEnd != op.Permission.RangeEnd {
					kept = append(kept, p)
				}
			}
			o.Permissions = kept
		case GrantRole:
			o.Roles = append(o.Roles, op.Role)
		case RevokeRole:
			var kept []string
			for _, r := range o.Roles {
				if r != op.Role {
					kept = append(kept, r)
				}
			}
			o.Roles = kept
		case DeleteRole:
			if op.Role == name {
				o.RoleExists, o.Permissions = false, nil
			}
		}
	}
	return o
}

// FuzzPrefixEnd checks that the range PrefixEnd gives holds exactly the keys that start with the prefix: the
// prefix itself and its extensions are inside, and the range ends at the first key above all of them.
func FuzzPrefixEnd(f *testing.F) {
	for _, seed := range []string{"/", "/registry/", "a\xff", "\xff\xfe", "\x00", "\xff"} {
		f.Add(seed, "x")
	}
	f.Fuzz(func(t *testing.T, prefix, suffix string) {
		end, err := PrefixEnd(prefix)
		if err != nil {
			if prefix != "" && strings.Count(prefix, "\xff") != len(prefix) {
				t.Fatalf("PrefixEnd(%q) refused a prefix with a byte below 0xff: %v", prefix, err)
			}
			return
		}
		inside := func(k string) bool { return k >= prefix && k < end }
		if !inside(prefix) || !inside(prefix+suffix) || !inside(prefix+"\xff\xff\xff") {
			t.Fatalf("PrefixEnd(%q) = %q leaves out a key with the prefix", prefix, end)
		}
		if k := suffix; !strings.HasPrefix(k, prefix) && inside(k) {
			t.Fatalf("PrefixEnd(%q) = %q takes in %q, which lacks the prefix", prefix, end, k)
		}
		if strings.HasPrefix(end, prefix) {
			t.Fatalf("PrefixEnd(%q) = %q: the end itself has the prefix", prefix, end)
		}
	})
}

// FuzzChangesConverge checks that applying Changes to any observed state reaches the desired one, and that a
// second pass has nothing left to do: the controller's pass is idempotent.
func FuzzChangesConverge(f *testing.F) {
	f.Add("/a/", "/b", "/c", byte(2), byte(0), "/a/", byte(1), true, "x", true, false)
	f.Fuzz(func(t *testing.T, p1, k2, e2 string, a1, a2 byte, op1 string, oa byte, exists bool, extraRole string, wantPassword, hadPassword bool) {
		spec := Spec{Name: "u", Password: wantPassword}
		accesses := []string{"Read", "Write", "ReadWrite"}
		if p1 != "" {
			spec.Permissions = append(spec.Permissions, KeyPermission{Prefix: ptr(p1), Access: accesses[int(a1)%3]})
		}
		if k2 != "" {
			perm := KeyPermission{Key: ptr(k2), Access: accesses[int(a2)%3]}
			if e2 > k2 {
				perm.RangeEnd = ptr(e2)
			}
			spec.Permissions = append(spec.Permissions, perm)
		}
		want, err := Desired(spec)
		if err != nil {
			return
		}
		observed := Observed{UserExists: exists}
		if exists {
			observed.Password = hadPassword
			observed.RoleExists = true
			observed.Roles = []string{"u", extraRole}
			if op1 != "" {
				observed.Permissions = []Permission{{Key: op1, RangeEnd: op1 + "\x00", Access: Access(oa % 3)}}
			}
		}
		ops, missing := Changes(want, observed, map[string]bool{extraRole: true}, false)
		if len(missing) != 0 {
			t.Fatalf("missing %q: the user's own role is created, never missing", missing)
		}
		after := applyOps(observed, want, ops)
		if after.Password != want.Password {
			t.Fatalf("password %v after %v, want %v", after.Password, ops, want.Password)
		}
		if again, _ := Changes(want, after, map[string]bool{extraRole: true}, false); len(again) != 0 {
			t.Fatalf("second pass after %v still wants %v (state %+v)", ops, again, after)
		}
		if len(want.Permissions) > 0 && !reflect.DeepEqual(normalize(after.Permissions), want.Permissions) {
			t.Fatalf("permissions after %v = %v, want %v", ops, after.Permissions, want.Permissions)
		}
	})
}

func TestUndeclared(t *testing.T) {
	got := Undeclared([]string{"zed", "root", "app-a", "steward-ops", "admin", OperatorUser},
		map[string]bool{"app-a": true}, map[string]bool{"steward-ops": true})
	if want := []string{"admin", "zed"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Undeclared = %v, want %v (root, the operator user, declared and protected users left out, sorted)", got, want)
	}
	if got := Undeclared(nil, nil, nil); got != nil {
		t.Fatalf("Undeclared(nil) = %v", got)
	}
}
