package resources

import (
	"strings"
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func TestGeneratePassword(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		p, err := GeneratePassword()
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != PasswordLength || strings.Trim(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") != "" {
			t.Fatalf("password %q: want %d alphanumeric characters", p, PasswordLength)
		}
		if seen[p] {
			t.Fatalf("password %q generated twice", p)
		}
		seen[p] = true
	}
}

// TestClientAuth: tls.clientAuth Password starts members serving TLS without asking for client certificates
// (neither --client-cert-auth nor --trusted-ca-file: etcd asks whenever it has a trusted CA), the peer port
// unchanged; Steward then acts as a password user once auth is on. Read back from the Pod as the planner sees it.
func TestClientAuth(t *testing.T) {
	tests := map[string]struct {
		provider, clientAuth string
		auth                 bool
		wantCerts, wantTLS   bool
		wantPasswordAuth     bool
	}{
		"TLS, the default":               {"Steward", "", false, true, true, false},
		"TLS, Certificate, auth":         {"Steward", etcdv1alpha1.ClientAuthCertificate, true, true, true, false},
		"TLS, Password":                  {"Steward", etcdv1alpha1.ClientAuthPassword, false, false, true, false},
		"TLS, Password, auth":            {"CertManager", etcdv1alpha1.ClientAuthPassword, true, false, true, true},
		"plaintext, auth":                {"None", etcdv1alpha1.ClientAuthCertificate, true, false, false, true},
		"plaintext, Certificate default": {"None", etcdv1alpha1.ClientAuthCertificate, false, false, false, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := testCluster(func(c *etcdv1alpha1.EtcdCluster) {
				c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: tt.provider, ClientAuth: tt.clientAuth}
				if tt.provider == etcdv1alpha1.TLSProviderCertManager {
					c.Spec.TLS.CertManager = &etcdv1alpha1.TLSCertManager{}
				}
				c.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: tt.auth}
			})
			pod := MemberPod(c, boot, opts)
			args := strings.Join(etcdCommand(pod), " ")
			if ClientCertAuth(c) != tt.wantCerts || PodVerifiesClientCerts(pod) != tt.wantCerts ||
				strings.Contains(args, "--trusted-ca-file=") != tt.wantCerts {
				t.Errorf("ClientCertAuth %v, Pod verifies %v, want %v: %s", ClientCertAuth(c), PodVerifiesClientCerts(pod), tt.wantCerts, args)
			}
			if strings.Contains(args, "--cert-file=") != tt.wantTLS || strings.Contains(args, "--peer-client-cert-auth") != tt.wantTLS {
				t.Errorf("serving TLS %v, peer certificates %v; want %v: %s", strings.Contains(args, "--cert-file="),
					strings.Contains(args, "--peer-client-cert-auth"), tt.wantTLS, args)
			}
			if PasswordAuth(c) != tt.wantPasswordAuth {
				t.Errorf("PasswordAuth %v, want %v", PasswordAuth(c), tt.wantPasswordAuth)
			}
		})
	}
}
