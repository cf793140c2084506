package resources

import (
	"strings"
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

// TestMemberPodTLSModes: the three ways a member runs TLS, and that PodTLS reads back what MemberPod wrote.
// Bridge listens and advertises plaintext, holds the certificate for its peer transport only, and has no client
// certificate check (its listeners are plaintext).
func TestMemberPodTLSModes(t *testing.T) {
	tests := []struct {
		mode                            string
		scheme                          string
		peerCert, clientCert, mountsTLS bool
		provider                        string
	}{
		{MemberTLSPlaintext, "http", false, false, false, "None"},
		{MemberTLSBridge, "http", true, false, true, "Steward"},
		{MemberTLSOn, "https", true, true, true, "Steward"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			c := testCluster()
			pod := MemberPod(c, Member{Name: "db-abcde", InitialCluster: map[string]string{"db-abcde": "http://x:2380"}, State: "existing", TLS: tt.mode}, opts)
			args := pod.Spec.Containers[0].Command
			args = append(args, pod.Spec.Containers[0].Args...)
			for _, flag := range []string{"--listen-client-urls", "--advertise-client-urls", "--listen-peer-urls", "--initial-advertise-peer-urls"} {
				if v, _ := arg(args, flag); !strings.HasPrefix(v, tt.scheme+"://") {
					t.Errorf("%s=%s, want %s", flag, v, tt.scheme)
				}
			}
			if _, ok := arg(args, "--peer-cert-file"); ok != tt.peerCert {
				t.Errorf("--peer-cert-file present %v, want %v", ok, tt.peerCert)
			}
			if _, ok := arg(args, "--cert-file"); ok != tt.clientCert {
				t.Errorf("--cert-file present %v, want %v", ok, tt.clientCert)
			}
			mounts := false
			for _, v := range pod.Spec.Volumes {
				mounts = mounts || v.Secret != nil && v.Secret.SecretName == "db-abcde-tls"
			}
			if mounts != tt.mountsTLS {
				t.Errorf("mounts its TLS Secret %v, want %v", mounts, tt.mountsTLS)
			}
			if mode, provider := PodTLS(pod); mode != tt.mode || provider != tt.provider {
				t.Errorf("PodTLS = %s/%s, want %s/%s", mode, provider, tt.mode, tt.provider)
			}
		})
	}
}
