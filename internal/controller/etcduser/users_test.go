package etcduser

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcdauth"
)

// TestAuthSpec: the etcd user is spec.userName or the object's name, and every access the API admits is one
// etcdauth maps (etcdauth compares the API's KeyAccess values as plain strings).
func TestAuthSpec(t *testing.T) {
	key := "/k"
	for _, access := range []etcdv1alpha1.KeyAccess{etcdv1alpha1.AccessRead, etcdv1alpha1.AccessWrite, etcdv1alpha1.AccessReadWrite} {
		u := &etcdv1alpha1.EtcdUser{ObjectMeta: metav1.ObjectMeta{Name: "obj"}, Spec: etcdv1alpha1.EtcdUserSpec{ClusterName: "c",
			UserName: "tenant-a", Password: &etcdv1alpha1.UserPassword{SecretName: "pw"},
			Permissions: []etcdv1alpha1.KeyPermission{{Key: &key, Access: access}}}}
		want, err := etcdauth.Desired(authSpec(u))
		if err != nil {
			t.Fatalf("access %s: %v", access, err)
		}
		if want.Name != "tenant-a" || !want.Password || len(want.Permissions) != 1 {
			t.Fatalf("access %s: %+v, want user tenant-a with a password and one permission", access, want)
		}
	}
	if got := etcdv1alpha1.EtcdUserName(&etcdv1alpha1.EtcdUser{ObjectMeta: metav1.ObjectMeta{Name: "obj"}}); got != "obj" {
		t.Fatalf("without spec.userName the etcd user is %q, want the object's name", got)
	}
}

func TestOwnerOf(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.NewTime(time.Unix(sec, 0)) }
	user := func(name, cluster, userName string, created int64, deleting bool) etcdv1alpha1.EtcdUser {
		u := etcdv1alpha1.EtcdUser{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(created)},
			Spec: etcdv1alpha1.EtcdUserSpec{ClusterName: cluster, UserName: userName}}
		if deleting {
			gone := at(created + 100)
			u.DeletionTimestamp = &gone
		}
		return u
	}
	tests := map[string]struct {
		users []etcdv1alpha1.EtcdUser
		want  string
	}{
		"the oldest owns the name":            {[]etcdv1alpha1.EtcdUser{user("b", "db", "shared", 20, false), user("a", "db", "shared", 10, false)}, "a"},
		"created in the same second: by name": {[]etcdv1alpha1.EtcdUser{user("z", "db", "shared", 10, false), user("y", "db", "shared", 10, false)}, "y"},
		"one being deleted hands over":        {[]etcdv1alpha1.EtcdUser{user("a", "db", "shared", 10, true), user("b", "db", "shared", 20, false)}, "b"},
		"other clusters and names do not claim it": {[]etcdv1alpha1.EtcdUser{user("a", "other", "shared", 1, false), user("b", "db", "else", 2, false),
			user("c", "db", "shared", 30, false)}, "c"},
		"the object's name is the default user name": {[]etcdv1alpha1.EtcdUser{user("shared", "db", "", 20, false), user("b", "db", "shared", 30, false)}, "shared"},
		"none left": {[]etcdv1alpha1.EtcdUser{user("a", "db", "shared", 10, true)}, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := ""
			if o := ownerOf(tt.users, "db", "shared"); o != nil {
				got = o.Name
			}
			if got != tt.want {
				t.Errorf("ownerOf = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRoleCreatedBySteward(t *testing.T) {
	u := func(spec etcdv1alpha1.EtcdUserSpec, status etcdv1alpha1.EtcdUserStatus) *etcdv1alpha1.EtcdUser {
		return &etcdv1alpha1.EtcdUser{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: spec, Status: status}
	}
	tests := map[string]struct {
		user *etcdv1alpha1.EtcdUser
		want bool
	}{
		"recorded":                    {u(etcdv1alpha1.EtcdUserSpec{}, etcdv1alpha1.EtcdUserStatus{CreatedRole: true}), true},
		"never applied":               {u(etcdv1alpha1.EtcdUserSpec{}, etcdv1alpha1.EtcdUserStatus{}), false},
		"applied by an older release": {u(etcdv1alpha1.EtcdUserSpec{}, etcdv1alpha1.EtcdUserStatus{Roles: []string{"app", "reader"}}), true},
		"a role of its name granted by spec.roles": {u(etcdv1alpha1.EtcdUserSpec{Roles: []string{"app"}},
			etcdv1alpha1.EtcdUserStatus{Roles: []string{"app"}}), false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := roleCreatedBySteward(tt.user); got != tt.want {
				t.Errorf("roleCreatedBySteward = %v, want %v", got, tt.want)
			}
		})
	}
}
