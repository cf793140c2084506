package resources

import (
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// TestPeerSANCheckOffByRelease: a TLS member skips etcd's peer client-certificate SAN lookup under the name its
// release knows (3.6 refuses both names at once), and a plaintext member has no such setting.
func TestPeerSANCheckOffByRelease(t *testing.T) {
	for _, tt := range []struct {
		version, tls, want string
	}{
		{"3.5.35", etcdv1alpha1.TLSProviderSteward, "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION"},
		{"3.6.16", etcdv1alpha1.TLSProviderSteward, "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION"},
		{"3.7.3", etcdv1alpha1.TLSProviderSteward, "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION"},
		{"3.6.16", etcdv1alpha1.TLSProviderNone, ""},
	} {
		c := testCluster(func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Version = tt.version
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: tt.tls}
		})
		env := MemberPod(c, boot, opts).Spec.Containers[0].Env
		switch {
		case tt.want == "" && len(env) != 0:
			t.Errorf("%s %s: env %v, want none", tt.version, tt.tls, env)
		case tt.want != "" && (len(env) != 1 || env[0].Name != tt.want || env[0].Value != "true"):
			t.Errorf("%s %s: env %v, want %s=true", tt.version, tt.tls, env, tt.want)
		}
	}
}
