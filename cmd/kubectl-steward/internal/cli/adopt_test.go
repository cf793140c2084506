package cli

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// withStdin runs the command with in as its standard input.
func withStdin(in string) func(*Options) {
	return func(o *Options) { o.Streams.In = strings.NewReader(in) }
}

// TestAdoptCreates: the objects adopt creates for a plaintext source, one with authentication on (the Secret
// from the password on stdin, owned by the cluster) and a TLS source, with what each spec must carry.
func TestAdoptCreates(t *testing.T) {
	ctx := context.Background()
	c := newFake(t)
	if r := run(t, c, "adopt", "plain", "--endpoints", "http://10.0.0.11:2379,http://10.0.0.12:2379", "--version", "3.6.16", "--replicas", "5"); r.code != ExitOK ||
		!strings.Contains(r.stdout+r.stderr, "etcdcluster.etcd.steward.dev/plain created") {
		t.Fatalf("plaintext adopt: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	var plain etcdv1alpha1.EtcdCluster
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "plain"}, &plain); err != nil {
		t.Fatal(err)
	}
	src := plain.Spec.Bootstrap.FromExisting
	if plain.Spec.Replicas != 5 || plain.Spec.Version != "3.6.16" || plain.Spec.TLS.Provider != etcdv1alpha1.TLSProviderNone || plain.Spec.Auth != nil ||
		strings.Join(src.Endpoints, ",") != "http://10.0.0.11:2379,http://10.0.0.12:2379" || src.Handover != etcdv1alpha1.HandoverKeep || src.CredentialsSecret != "" {
		t.Errorf("plaintext adoption spec: %+v, source %+v", plain.Spec, src)
	}

	r := runWith(t, c, withStdin("s3cret\n"), "adopt", "authed", "--endpoints", "http://10.0.0.21:2379", "--username", "root", "--password-stdin", "--handover", "retire")
	if r.code != ExitOK || !strings.Contains(r.stdout+r.stderr, "secret/authed-source-credentials created") {
		t.Fatalf("adopt with auth: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	var authed etcdv1alpha1.EtcdCluster
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "authed"}, &authed); err != nil {
		t.Fatal(err)
	}
	if authed.Spec.Auth == nil || !authed.Spec.Auth.Enabled || authed.Spec.Bootstrap.FromExisting.CredentialsSecret != "authed-source-credentials" ||
		authed.Spec.Bootstrap.FromExisting.Handover != etcdv1alpha1.HandoverRetire {
		t.Errorf("adoption with auth: auth %+v, source %+v", authed.Spec.Auth, authed.Spec.Bootstrap.FromExisting)
	}
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "authed-source-credentials"}, &secret); err != nil {
		t.Fatal(err)
	}
	data := func(k string) string {
		if v, ok := secret.StringData[k]; ok {
			return v // the fake client keeps stringData as written
		}
		return string(secret.Data[k])
	}
	if data("username") != "root" || data("password") != "s3cret" {
		t.Errorf("credentials Secret holds %q/%q, want root/s3cret", data("username"), data("password"))
	}
	if refs := secret.OwnerReferences; len(refs) != 1 || refs[0].Kind != "EtcdCluster" || refs[0].Name != "authed" || refs[0].UID != authed.UID {
		t.Errorf("credentials Secret owners %+v, want the EtcdCluster", refs)
	}

	if r := run(t, c, "adopt", "secure", "--endpoints", "https://10.0.0.31:2379", "--member-secret", "m", "--client-secret", "s", "--credentials-secret", "root-creds"); r.code != ExitOK {
		t.Fatalf("TLS adopt: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	var secure etcdv1alpha1.EtcdCluster
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "secure"}, &secure); err != nil {
		t.Fatal(err)
	}
	if tls := secure.Spec.TLS; tls.Provider != etcdv1alpha1.TLSProviderSecrets || tls.PeerAuth != etcdv1alpha1.PeerAuthAnyCertificate ||
		tls.Secrets == nil || tls.Secrets.MemberSecretName != "m" || tls.Secrets.ClientSecretName != "s" ||
		secure.Spec.Bootstrap.FromExisting.CredentialsSecret != "root-creds" || secure.Spec.Auth == nil || !secure.Spec.Auth.Enabled {
		t.Errorf("TLS adoption spec: tls %+v, auth %+v, source %+v", tls, secure.Spec.Auth, secure.Spec.Bootstrap.FromExisting)
	}
}

// TestAdoptDryRunHidesThePassword: --dry-run prints the Secret and the cluster and creates nothing; the password
// read from stdin is not printed.
func TestAdoptDryRunHidesThePassword(t *testing.T) {
	c := newFake(t)
	r := runWith(t, c, withStdin("hunter2"), "adopt", "db", "--endpoints", "http://10.0.0.1:2379", "--username", "root", "--password-stdin", "--dry-run")
	if r.code != ExitOK || strings.Contains(r.stdout, "hunter2") || !strings.Contains(r.stdout, "<from stdin>") {
		t.Fatalf("dry run: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	docs := strings.Split(r.stdout, "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("dry run printed %d documents, want the Secret and the cluster:\n%s", len(docs), r.stdout)
	}
	var cluster etcdv1alpha1.EtcdCluster
	if err := yaml.Unmarshal([]byte(docs[1]), &cluster); err != nil || cluster.Kind != "EtcdCluster" || cluster.Spec.Bootstrap.FromExisting.CredentialsSecret != "db-source-credentials" {
		t.Errorf("dry run's second document: %v, %+v", err, cluster)
	}
	for _, obj := range []client.Object{&etcdv1alpha1.EtcdCluster{}, &corev1.Secret{}} {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db"}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("dry run created %T: %v", obj, err)
		}
	}
}

// TestAdoptRefusals: what the flags alone show to be wrong is refused before anything is created, and a cluster
// that cannot be created takes its new credentials Secret back.
func TestAdoptRefusals(t *testing.T) {
	existing := testCluster()
	for _, s := range []struct {
		name  string
		stdin string
		args  []string
		says  string
	}{
		{"no endpoints", "", nil, "--endpoints is required"},
		{"not a URL", "", []string{"--endpoints", "10.0.0.1:2379"}, "want http://host:port"},
		{"a path", "", []string{"--endpoints", "http://10.0.0.1:2379/v3"}, "want http://host:port"},
		{"mixed schemes", "", []string{"--endpoints", "http://a:2379,https://b:2379"}, "mixes http:// and https://"},
		{"TLS without certificates", "", []string{"--endpoints", "https://a:2379", "--member-secret", "m"}, "--member-secret and --client-secret"},
		{"certificates for plaintext", "", []string{"--endpoints", "http://a:2379", "--client-secret", "s"}, "are for a TLS source"},
		{"abort at creation", "", []string{"--endpoints", "http://a:2379", "--handover", "abort"}, "starts with keep or retire"},
		{"a handover that is none", "", []string{"--endpoints", "http://a:2379", "--handover", "later"}, "want keep, retire or abort"},
		{"user and Secret", "pw", []string{"--endpoints", "http://a:2379", "--username", "root", "--password-stdin", "--credentials-secret", "c"}, "give one"},
		{"user without password", "", []string{"--endpoints", "http://a:2379", "--username", "root"}, "--password-stdin"},
		{"password without user", "pw", []string{"--endpoints", "http://a:2379", "--password-stdin"}, "needs --username"},
		{"empty stdin", "", []string{"--endpoints", "http://a:2379", "--username", "root", "--password-stdin"}, "stdin held no password"},
		{"bad size", "", []string{"--endpoints", "http://a:2379", "--storage-size", "lots"}, "--storage-size"},
		{"the cluster exists", "pw", []string{"--endpoints", "http://a:2379", "--username", "root", "--password-stdin"}, "already exists: choose another name"},
	} {
		t.Run(s.name, func(t *testing.T) {
			c := newFake(t, existing.DeepCopy())
			r := runWith(t, c, withStdin(s.stdin), append([]string{"adopt", "db"}, s.args...)...)
			if r.code != ExitError || !strings.Contains(r.stderr, s.says) {
				t.Errorf("exit %d, %q; want an error saying %q", r.code, r.stderr, s.says)
			}
			var secrets corev1.SecretList
			if err := c.List(context.Background(), &secrets); err != nil || len(secrets.Items) != 0 {
				t.Errorf("Secrets left: %d (%v)", len(secrets.Items), err)
			}
		})
	}
}

// TestAdoptWaitEnds: adopt --wait ends when the preflight admitted the source, and fails with Steward's reason
// when it refused it (for this generation of the spec).
func TestAdoptWaitEnds(t *testing.T) {
	progressing := func(reason string, generation int64) []metav1.Condition {
		return []metav1.Condition{{Type: etcdv1alpha1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: reason,
			Message: "the message", ObservedGeneration: generation}}
	}
	for name, tc := range map[string]struct {
		phase      etcdv1alpha1.AdoptionPhase
		conditions []metav1.Condition
		want       bool
		wantErr    string
	}{
		"nothing reported yet":           {},
		"checking":                       {phase: etcdv1alpha1.AdoptionChecking},
		"refused":                        {phase: etcdv1alpha1.AdoptionChecking, conditions: progressing(etcdv1alpha1.ReasonSourceUnreachable, 1), wantErr: "the source was refused by Steward (SourceUnreachable): the message"},
		"refused for an earlier spec":    {conditions: progressing(etcdv1alpha1.ReasonSourceUnreachable, 0)},
		"admitted, reported by reason":   {conditions: progressing(etcdv1alpha1.ReasonSourceAdmitted, 1)},
		"migrating":                      {phase: etcdv1alpha1.AdoptionMigrating, want: true},
		"migrating, an old refusal kept": {phase: etcdv1alpha1.AdoptionMigrating, conditions: progressing(etcdv1alpha1.ReasonSourceUnhealthy, 1), want: true},
		"complete":                       {phase: etcdv1alpha1.AdoptionComplete, want: true},
	} {
		c := testCluster()
		c.Generation = 1
		if tc.phase != "" {
			c.Status.Adoption = &etcdv1alpha1.AdoptionStatus{Phase: tc.phase}
		}
		c.Status.Conditions = tc.conditions
		got, err := admitted(c)
		if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, %v; want %v, %q", name, got, err, tc.want, tc.wantErr)
		}
	}
}
