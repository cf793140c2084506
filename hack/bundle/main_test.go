package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"steward.dev/steward/internal/version"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

// TestCommittedBundleIsFresh is `make verify`'s freshness check in the unit tier, so that a change to config/,
// the samples or the version that forgot `make bundle` fails `go test` too.
func TestCommittedBundleIsFresh(t *testing.T) {
	src, err := readSources(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	files, err := render(src)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(repoRoot, name)) //nolint:gosec // a path this generator writes
		if err != nil {
			t.Errorf("%s: %v (run make bundle)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make bundle", name)
		}
	}
	committed, err := filepath.Glob(filepath.Join(repoRoot, "bundle", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range committed {
		name, err := filepath.Rel(repoRoot, path)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := files[name]; !ok {
			t.Errorf("%s is not generated any more: run make bundle", name)
		}
	}
}

func TestOLMDeployment(t *testing.T) {
	manager := func(args []string, env ...corev1.EnvVar) appsv1.Deployment {
		var d appsv1.Deployment
		d.Name, d.Namespace = "steward", "steward-system"
		d.Spec.Template.Spec.Containers = []corev1.Container{
			{Name: "sidecar", Image: "other:1"},
			{Name: "manager", Image: "steward.local/steward:dev", Args: args, Env: env},
		}
		return d
	}
	watchArg := "--watch-namespace=$(WATCH_NAMESPACE)"
	tests := map[string]struct {
		in       appsv1.Deployment
		wantArgs []string
		wantEnv  []string
		wantErr  string
	}{
		"cluster-wide manifest": {
			in:       manager([]string{"--leader-elect", "--agent-image=steward.local/steward-agent:dev"}),
			wantArgs: []string{"--leader-elect", "--agent-image=" + version.Image, watchArg},
			wantEnv:  []string{"WATCH_NAMESPACE"},
		},
		"a fixed namespace gives way to OLM's": {
			in: manager([]string{"--watch-namespace=$(POD_NAMESPACE)", "--leader-elect"},
				corev1.EnvVar{Name: "POD_NAMESPACE"}, corev1.EnvVar{Name: "WATCH_NAMESPACE", Value: "prod"}),
			wantArgs: []string{"--leader-elect", watchArg},
			wantEnv:  []string{"POD_NAMESPACE", "WATCH_NAMESPACE"},
		},
		"no manager container": {
			in:      appsv1.Deployment{},
			wantErr: "no container named manager",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			before := tt.in.DeepCopy()
			got, err := olmDeployment(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := got.Spec.Template.Spec.Containers[1]
			if c.Image != version.Image {
				t.Errorf("image %q, want %q", c.Image, version.Image)
			}
			if got.Spec.Template.Spec.Containers[0].Image != "other:1" {
				t.Errorf("another container's image changed")
			}
			if !slices.Equal(c.Args, tt.wantArgs) {
				t.Errorf("args %q, want %q", c.Args, tt.wantArgs)
			}
			var envNames []string
			for _, e := range c.Env {
				envNames = append(envNames, e.Name)
			}
			if !slices.Equal(envNames, tt.wantEnv) {
				t.Errorf("env %q, want %q", envNames, tt.wantEnv)
			}
			watch := c.Env[len(c.Env)-1]
			if watch.ValueFrom == nil || watch.ValueFrom.FieldRef == nil ||
				watch.ValueFrom.FieldRef.FieldPath != "metadata.annotations['olm.targetNamespaces']" {
				t.Errorf("WATCH_NAMESPACE %+v, want it from olm.targetNamespaces", watch)
			}
			if got.Namespace != "" {
				t.Errorf("namespace %q kept; OLM chooses it", got.Namespace)
			}
			if !equalDeployments(tt.in, *before) {
				t.Errorf("the input Deployment was changed")
			}
		})
	}
}

func equalDeployments(a, b appsv1.Deployment) bool {
	return a.Namespace == b.Namespace && slices.EqualFunc(a.Spec.Template.Spec.Containers, b.Spec.Template.Spec.Containers,
		func(x, y corev1.Container) bool {
			return x.Image == y.Image && slices.Equal(x.Args, y.Args) && len(x.Env) == len(y.Env)
		})
}

func TestDescriptors(t *testing.T) {
	enum := func(values ...string) []apiextensionsv1.JSON {
		var out []apiextensionsv1.JSON
		for _, v := range values {
			out = append(out, apiextensionsv1.JSON{Raw: []byte(`"` + v + `"`)})
		}
		return out
	}
	root := apiextensionsv1.JSONSchemaProps{Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"replicas": {Description: "Replicas is the number of voting members. Odd, because an even count tolerates no more failures."},
		"tls": {Description: "TLS secures traffic.", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"provider": {Description: "Provider issues certificates.", Enum: enum("None", "Steward")},
		}},
		"credentialsSecret": {Description: "CredentialsSecret is a Secret with the keys.", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"name": {},
		}},
		"undocumented": {},
		"pod": {Description: "Pod is scheduling for member Pods.", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"priorityClassName": {},
		}},
	}}
	tests := map[string]struct {
		field   field
		status  bool
		names   map[string]string
		want    descriptor
		wantErr string
	}{
		"first sentence of the field's description": {
			field: field{"replicas", []string{xPodCount}},
			want:  descriptor{"replicas", "Replicas", "Replicas is the number of voting members.", []string{xPodCount}},
		},
		"enum becomes a select, before the given x-descriptors": {
			field: field{"tls.provider", []string{xAdvanced}},
			want: descriptor{"tls.provider", "Provider", "Provider issues certificates.",
				[]string{xSelectPrefix + "None", xSelectPrefix + "Steward", xAdvanced}},
		},
		"a status enum stays as it is: status is shown, not edited": {
			field:  field{"tls.provider", []string{xText}},
			status: true,
			want:   descriptor{"tls.provider", "Provider", "Provider issues certificates.", []string{xText}},
		},
		"a display name given for the path": {
			field: field{"tls.provider", nil},
			names: map[string]string{"tls.provider": "TLS Provider"},
			want: descriptor{"tls.provider", "TLS Provider", "Provider issues certificates.",
				[]string{xSelectPrefix + "None", xSelectPrefix + "Steward"}},
		},
		"an undocumented field is not described by its parent": {
			field:   field{"pod.priorityClassName", []string{xText}},
			wantErr: "no description",
		},
		"a reference's name is described by the reference": {
			field: field{"credentialsSecret.name", []string{xSecret}},
			want: descriptor{"credentialsSecret.name", "Credentials Secret", "CredentialsSecret is a Secret with the keys.",
				[]string{xSecret}},
		},
		"a field the schema does not have": {
			field:   field{"tls.secretName", []string{xText}},
			wantErr: `the schema has no field "secretName"`,
		},
		"a field without documentation": {
			field:   field{"undocumented", []string{xText}},
			wantErr: "no description",
		},
		"no x-descriptors and no enum": {
			field:   field{"replicas", nil},
			wantErr: "no x-descriptors",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := descriptors(root, []field{tt.field}, !tt.status, tt.names)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Path != tt.want.Path || got[0].DisplayName != tt.want.DisplayName ||
				got[0].Description != tt.want.Description || !slices.Equal(got[0].XDescriptors, tt.want.XDescriptors) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDisplayName(t *testing.T) {
	tests := map[string]string{
		"replicas":                  "Replicas",
		"storage.storageClassName":  "Storage Class Name",
		"clusterID":                 "Cluster ID",
		"previousClusterID":         "Previous Cluster ID",
		"sha256":                    "Sha256",
		"lastBackup.name":           "Last Backup",
		"destination.pvc.claimName": "Claim Name",
		"name":                      "Name",
	}
	for path, want := range tests {
		if got := displayName(path); got != want {
			t.Errorf("displayName(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestSummary(t *testing.T) {
	tests := map[string]string{
		"One sentence.":  "One sentence.",
		"First. Second.": "First.",
		"Version is a release, for example \"3.6.16\". Next.": "Version is a release, for example \"3.6.16\".",
		"Lines\njoined by\ncontroller-gen. Then more.":        "Lines joined by controller-gen.",
		"First paragraph\n\nSecond paragraph.":                "First paragraph",
		"e.g. lowercase after a period. Stays.":               "e.g. lowercase after a period.",
	}
	for in, want := range tests {
		if got := summary(in); got != want {
			t.Errorf("summary(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEveryKindIsDescribed: a CRD without an entry in kinds, or an entry without a CRD, fails generation.
func TestEveryKindIsDescribed(t *testing.T) {
	crd := func(kind string) crdFile {
		var c crdFile
		c.name = strings.ToLower(kind) + ".yaml"
		c.crd.Name = strings.ToLower(kind) + "s.etcd.steward.dev"
		c.crd.Spec.Names.Kind = kind
		c.crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1alpha1", Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{}},
		}}
		return c
	}
	if _, err := ownedCRDs([]crdFile{crd("EtcdProxy")}); err == nil || !strings.Contains(err.Error(), "EtcdProxy has no entry") {
		t.Errorf("unknown kind: error %v", err)
	}
	if _, err := ownedCRDs(nil); err == nil || !strings.Contains(err.Error(), "has no CRD for it") {
		t.Errorf("missing CRD: error %v", err)
	}
}

func TestReadManager(t *testing.T) {
	const deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: steward, namespace: steward-system}\n" +
		"spec:\n  template:\n    spec:\n      containers: [{name: manager, image: x}]\n"
	tests := map[string]struct {
		files        map[string]string
		wantServices []string
		wantErr      string
	}{
		"Namespace and Deployment in one file, a Service in another": {
			files: map[string]string{
				"kustomization.yaml": "resources: [manager.yaml, service.yaml]\n",
				"manager.yaml":       "apiVersion: v1\nkind: Namespace\nmetadata: {name: steward-system}\n---\n" + deployment,
				"service.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: steward-metrics, namespace: steward-system}\n" +
					"spec:\n  ports: [{name: metrics, port: 8080}]\n",
			},
			wantServices: []string{"steward-metrics"},
		},
		"a file the kustomization does not list is not read": {
			files: map[string]string{
				"kustomization.yaml": "resources: [manager.yaml]\n",
				"manager.yaml":       deployment,
				"extra.yaml":         "kind: ConfigMap\nmetadata: {name: x}\n",
			},
		},
		"a kind the bundle cannot ship": {
			files: map[string]string{
				"kustomization.yaml": "resources: [manager.yaml]\n",
				"manager.yaml":       deployment + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n",
			},
			wantErr: "ConfigMap settings: hack/bundle does not know how to ship",
		},
		"images are accepted: the bundle pins its own": {
			files: map[string]string{
				"kustomization.yaml": "resources: [manager.yaml]\nimages:\n- {name: steward, newTag: v9}\n",
				"manager.yaml":       deployment,
			},
		},
		"a kustomize feature the reader does not apply": {
			files: map[string]string{
				"kustomization.yaml": "resources: [manager.yaml]\nnamePrefix: x-\n",
				"manager.yaml":       deployment,
			},
			wantErr: "reads only resources and images",
		},
		"two Deployments": {
			files: map[string]string{
				"kustomization.yaml": "resources: [manager.yaml]\n",
				"manager.yaml":       deployment + "---\n" + deployment,
			},
			wantErr: "a second Deployment",
		},
		"no Deployment": {
			files: map[string]string{
				"kustomization.yaml": "resources: [manager.yaml]\n",
				"manager.yaml":       "apiVersion: v1\nkind: Namespace\nmetadata: {name: steward-system}\n",
			},
			wantErr: "no Deployment",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "config", "manager")
			if err := os.MkdirAll(dir, 0o750); err != nil {
				t.Fatal(err)
			}
			for file, content := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var src sources
			err := readManager(root, &src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if src.deployment.Name != "steward" {
				t.Errorf("Deployment %q, want steward", src.deployment.Name)
			}
			var services []string
			for _, s := range src.services {
				services = append(services, s.name)
				if ns, ok := s.object["metadata"].(map[string]any)["namespace"]; ok {
					t.Errorf("Service %s keeps namespace %v; OLM chooses it", s.name, ns)
				}
				if _, ok := s.object["status"]; ok {
					t.Errorf("Service %s gained a status", s.name)
				}
			}
			if !slices.Equal(services, tt.wantServices) {
				t.Errorf("Services %q, want %q", services, tt.wantServices)
			}
		})
	}
}
