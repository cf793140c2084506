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

// TestMemberPodPeerCheck: a TLS member with PeerCheck accepts on its peer port only the cluster's peer identity
// (the peer Service's name), which its own certificate's names carry; PodChecksPeers reads it back. A Bridge
// member never gets the flag (its listeners are plaintext). The Pod records that it was created holding the
// identity, and spec.pod.annotations cannot set that record.
func TestMemberPodPeerCheck(t *testing.T) {
	const identity = "db-peer.prod.svc.cluster.local"
	tests := []struct {
		name      string
		mode      string
		check     bool
		provider  string
		peerAuth  string
		wantFlag  bool
		wantHeld  bool
		forgeHeld bool
	}{
		{"TLS, checking", MemberTLSOn, true, etcdv1alpha1.TLSProviderSteward, "", true, true, false},
		{"TLS, not yet checking", MemberTLSOn, false, etcdv1alpha1.TLSProviderSteward, "", false, true, false},
		{"Bridge", MemberTLSBridge, true, etcdv1alpha1.TLSProviderSteward, "", false, true, false},
		{"plaintext", MemberTLSPlaintext, true, etcdv1alpha1.TLSProviderSteward, "", false, false, false},
		{"Secrets, MemberIdentity", MemberTLSOn, true, etcdv1alpha1.TLSProviderSecrets, "", true, true, false},
		{"Secrets, AnyCertificate: not known to hold it", MemberTLSOn, false, etcdv1alpha1.TLSProviderSecrets, etcdv1alpha1.PeerAuthAnyCertificate, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testCluster(func(c *etcdv1alpha1.EtcdCluster) {
				c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: tt.provider, PeerAuth: tt.peerAuth}
				if tt.provider == etcdv1alpha1.TLSProviderSecrets {
					c.Spec.TLS.Secrets = &etcdv1alpha1.TLSSecrets{MemberSecretName: "m", ClientSecretName: "c"}
				}
				if tt.forgeHeld {
					c.Spec.Pod.Annotations = map[string]string{AnnotationPeerIdentity: identity}
				}
			})
			m := boot
			m.TLS, m.PeerCheck = tt.mode, tt.check
			pod := MemberPod(c, m, opts)
			v, ok := arg(pod.Spec.Containers[0].Command, "--peer-cert-allowed-hostname")
			if ok != tt.wantFlag || ok && v != identity || PodChecksPeers(pod) != tt.wantFlag {
				t.Errorf("--peer-cert-allowed-hostname=%q (%v), PodChecksPeers %v; want %v for %s", v, ok, PodChecksPeers(pod), tt.wantFlag, identity)
			}
			if PodHeldPeerIdentity(c, pod, opts) != tt.wantHeld {
				t.Errorf("PodHeldPeerIdentity = %v, want %v", !tt.wantHeld, tt.wantHeld)
			}
		})
	}
	c := testCluster()
	if got := PeerIdentity(c, opts); got != identity {
		t.Fatalf("PeerIdentity = %s", got)
	}
	found := false
	for _, n := range MemberDNSNames(c, "db-abcde", opts) {
		found = found || n == identity
	}
	if !found {
		t.Errorf("member certificate names %v lack the peer identity", MemberDNSNames(c, "db-abcde", opts))
	}
}
