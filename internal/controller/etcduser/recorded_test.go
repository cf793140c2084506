package etcduser

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcdauth"
)

// TestRecordedPasswordReadsPastTheCache: whether the etcd user holds Steward's password is decided on the EtcdUser
// and Secret as the API server holds them, not on the copy the pass was given, whose status can be a pass behind
// (then the user would be deleted and re-created under its clients).
func TestRecordedPasswordReadsPastTheCache(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := etcdv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	const password = "the password in the Secret"
	user := func(statusSecret string) *etcdv1alpha1.EtcdUser {
		return &etcdv1alpha1.EtcdUser{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", UID: "uid-app"},
			Spec:       etcdv1alpha1.EtcdUserSpec{ClusterName: "db", Password: &etcdv1alpha1.UserPassword{SecretName: "app-password"}},
			Status:     etcdv1alpha1.EtcdUserStatus{PasswordSecretName: statusSecret},
		}
	}
	secret := func(owned bool, applied string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-password", Namespace: "ns"}}
		if owned {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: etcdv1alpha1.GroupVersion.String(), Kind: "EtcdUser",
				Name: "app", UID: "uid-app", Controller: ptr.To(true)}}
		}
		if applied != "" {
			s.Annotations = map[string]string{annotationPasswordApplied: passwordDigest(applied)}
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		objects []client.Object
		want    bool
	}{
		{"the status names the password Secret", []client.Object{user("app-password")}, true},
		{"the Secret is marked as holding this password", []client.Object{user(""), secret(true, password)}, true},
		{"the Secret is not marked yet", []client.Object{user(""), secret(true, "")}, false},
		{"the mark is of another password", []client.Object{user(""), secret(true, "an older one")}, false},
		{"the Secret is not this EtcdUser's", []client.Object{user(""), secret(false, password)}, false},
		{"no Secret", []client.Object{user("")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{APIReader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objects...).Build()}
			// The copy the pass holds says nothing was given: what the API server holds decides.
			got, err := r.recordedPassword(context.Background(), user(""), password)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("recorded password %v, want %v", got, tc.want)
			}
		})
	}
	r := &Reconciler{APIReader: fake.NewClientBuilder().WithScheme(scheme).Build()}
	if _, err := r.recordedPassword(context.Background(), user(""), password); err == nil {
		t.Error("an EtcdUser the API server does not have: no error")
	}
}

// TestRecordingTheRoleKeepsThePassStatus: recording the role's creation mid-pass writes status.createdRole and
// leaves what the pass has put in status but not written yet (the certificate Secret's name and expiry); the
// first pass of a new EtcdUser once reported Ready with neither.
func TestRecordingTheRoleKeepsThePassStatus(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := etcdv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	stored := &etcdv1alpha1.EtcdUser{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", UID: "uid-app"},
		Spec:       etcdv1alpha1.EtcdUserSpec{ClusterName: "db", Certificate: &etcdv1alpha1.UserCertificate{SecretName: "app-tls"}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stored).WithStatusSubresource(&etcdv1alpha1.EtcdUser{}).Build()
	r := &Reconciler{Client: c}
	ctx := context.Background()
	user := &etcdv1alpha1.EtcdUser{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(stored), user); err != nil {
		t.Fatal(err)
	}
	notAfter := metav1.Now()
	user.Status.CertificateSecretName, user.Status.CertificateNotAfter = "app-tls", &notAfter

	if err := r.recordRoleCreation(ctx, user, []etcdauth.Op{{Kind: etcdauth.AddRole}}); err != nil {
		t.Fatal(err)
	}
	if !user.Status.CreatedRole || user.Status.CertificateSecretName != "app-tls" || user.Status.CertificateNotAfter == nil {
		t.Errorf("the pass's status after recording: %+v, want createdRole and the certificate kept", user.Status)
	}
	var got etcdv1alpha1.EtcdUser
	if err := c.Get(ctx, client.ObjectKeyFromObject(stored), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Status.CreatedRole {
		t.Error("status.createdRole is not written before the role is created")
	}
}
