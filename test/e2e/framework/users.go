package framework

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/resources"
)

// NewEtcdUser is an EtcdUser of cluster with read-write access to prefix, authenticating by certificate (into
// Secret <name>-tls) or by password (into Secret <name>-password).
func NewEtcdUser(ns, name, cluster, prefix string, access etcdv1alpha1.KeyAccess, password bool) *etcdv1alpha1.EtcdUser {
	u := &etcdv1alpha1.EtcdUser{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: etcdv1alpha1.EtcdUserSpec{
		ClusterName: cluster, Permissions: []etcdv1alpha1.KeyPermission{{Prefix: ptr.To(prefix), Access: access}}}}
	if password {
		u.Spec.Password = &etcdv1alpha1.UserPassword{SecretName: name + "-password"}
	} else {
		u.Spec.Certificate = &etcdv1alpha1.UserCertificate{SecretName: name + "-tls"}
	}
	return u
}

// CreateUsersReady creates the EtcdUsers, waits for each to be Ready and puts what it read back into users.
func CreateUsersReady(t *testing.T, users map[string]*etcdv1alpha1.EtcdUser) {
	t.Helper()
	for _, u := range users {
		if err := K8s.Create(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
	for name, u := range users {
		users[name] = WaitUserReady(t, client.ObjectKeyFromObject(u), 2*time.Minute)
	}
}

// WaitUserReady waits for the EtcdUser's Ready condition to be True and returns it.
func WaitUserReady(t *testing.T, key client.ObjectKey, timeout time.Duration) *etcdv1alpha1.EtcdUser {
	t.Helper()
	u := &etcdv1alpha1.EtcdUser{}
	Poll(t, "EtcdUser "+key.Name+" Ready", timeout, func() error {
		if err := K8s.Get(context.Background(), key, u); err != nil {
			return err
		}
		c := meta.FindStatusCondition(u.Status.Conditions, etcdv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != u.Generation {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	return u
}

// UserClient dials the cluster's client Service the way an application holding the EtcdUser's Secret would:
// with the certificate Secret (tls.crt, tls.key, ca.crt), or with the password Secret (username, password). Members
// require a client certificate of the cluster's CA for the TLS handshake (--client-cert-auth), so a password
// client presents transport-only's; etcd acts as the password's user when a client sends both.
func UserClient(t *testing.T, c *etcdv1alpha1.EtcdCluster, u *etcdv1alpha1.EtcdUser) *clientv3.Client {
	t.Helper()
	ctx := context.Background()
	cfg := clientv3.Config{Endpoints: []string{ClientServiceURL(t, c)}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	var s corev1.Secret
	switch {
	case u.Spec.Certificate != nil:
		if err := K8s.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: u.Spec.Certificate.SecretName}, &s); err != nil {
			t.Fatal(err)
		}
		tlsCfg, err := (&etcd.TLS{CA: s.Data[resources.SecretCAKey], Cert: s.Data[resources.SecretCertKey], Key: s.Data[resources.SecretKeyKey],
			ServerName: resources.ClientServiceHost(c, OperatorOptions)}).Config()
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLS = tlsCfg
	default:
		if err := K8s.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: u.Spec.Password.SecretName}, &s); err != nil {
			t.Fatal(err)
		}
		cfg.Username, cfg.Password = string(s.Data["username"]), string(s.Data["password"])
		cfg.TLS = AnonymousTLS(t, c)
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// MayRead fails t unless a read of key by cli (the client of who) is allowed or refused for its permissions, as
// allowed says.
func MayRead(t *testing.T, who string, cli *clientv3.Client, key string, allowed bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cli.Get(ctx, key)
	CheckAccess(t, who, "read "+key, err, allowed)
}

// MayWrite and MayRead check one access of cli, wanting it allowed or refused with etcd's permission error.
func MayWrite(t *testing.T, who string, cli *clientv3.Client, key string, allowed bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cli.Put(ctx, key, "v-"+who)
	CheckAccess(t, who, "write "+key, err, allowed)
}

// AnonymousTLS is a TLS client configuration with a certificate of the cluster's CA whose common name is no etcd
// user: what a password client needs to pass the members' --client-cert-auth, without a certificate identity
// (etcd takes the password's user over the certificate's when both are given).
func AnonymousTLS(t *testing.T, c *etcdv1alpha1.EtcdCluster) *tls.Config {
	t.Helper()
	u := NewEtcdUser(c.Namespace, "transport-only", c.Name, "/unused/", etcdv1alpha1.AccessRead, false)
	var s corev1.Secret
	if err := K8s.Get(context.Background(), client.ObjectKey{Namespace: u.Namespace, Name: u.Spec.Certificate.SecretName}, &s); err != nil {
		t.Fatal(err)
	}
	cfg, err := (&etcd.TLS{CA: s.Data[resources.SecretCAKey], Cert: s.Data[resources.SecretCertKey], Key: s.Data[resources.SecretKeyKey],
		ServerName: resources.ClientServiceHost(c, OperatorOptions)}).Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// WaitUserReason waits for the EtcdUser's Ready condition to have reason, and a message containing text.
func WaitUserReason(t *testing.T, key client.ObjectKey, reason, text string) {
	t.Helper()
	Poll(t, "EtcdUser "+key.Name+" Ready reason "+reason, time.Minute, func() error {
		u := &etcdv1alpha1.EtcdUser{}
		if err := K8s.Get(context.Background(), key, u); err != nil {
			return err
		}
		if r := meta.FindStatusCondition(u.Status.Conditions, etcdv1alpha1.ConditionReady); r == nil || r.Reason != reason || !strings.Contains(r.Message, text) {
			return fmt.Errorf("Ready %+v", r)
		}
		return nil
	})
}

// WaitAuthEnabled waits for status.authEnabled to be want.
func WaitAuthEnabled(t *testing.T, key client.ObjectKey, want bool) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{}
	Poll(t, fmt.Sprintf("status.authEnabled %v", want), 2*time.Minute, func() error {
		if err := K8s.Get(context.Background(), key, c); err != nil {
			return err
		}
		if c.Status.AuthEnabled == nil || *c.Status.AuthEnabled != want {
			return fmt.Errorf("status.authEnabled %v", c.Status.AuthEnabled)
		}
		return nil
	})
	return c
}

// CheckAccess fails t unless err, of what who did, is nil when allowed, and a refusal for permissions (or an
// unknown user, or failed authentication) when not.
func CheckAccess(t *testing.T, who, what string, err error, allowed bool) {
	t.Helper()
	switch {
	case allowed && err != nil:
		t.Fatalf("%s: %s refused: %v", who, what, err)
	case !allowed && err == nil:
		t.Fatalf("%s: %s allowed, want refused", who, what)
	case !allowed && !errors.Is(err, rpctypes.ErrPermissionDenied) && !errors.Is(err, rpctypes.ErrUserNotFound) &&
		!errors.Is(err, rpctypes.ErrAuthFailed) && !strings.Contains(err.Error(), "permission denied"):
		t.Fatalf("%s: %s refused for another reason than permissions: %v", who, what, err)
	}
}
